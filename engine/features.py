"""Fixed-length numeric encodings for learning: the observation and per-action features.

Everything is player-relative, float32 and bounded to [-1, 1]. The observation holds only
what the observing player may know (own hand, both boards, public counts); never the
opponent's hand or any deck order. Bump OBS_VERSION whenever a layout changes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from . import backend
from .actions import ATTACK_BASE, ATTACK_TARGETS, BOARD_SLOTS, HAND_LIMIT, PLAY_BASE, PLAY_TARGETS, \
    TARGET_ENEMY_HERO, TARGET_ENEMY_SLOT, TARGET_NONE, TARGET_OWN_HERO, TARGET_OWN_SLOT
from .cards import AREA_SCOPES, CARDS, CHARGE, EFFECTS, KEYWORD_BIT, KEYWORDS, LETHAL, TARGET_RULES, WARD, BREAKTHROUGH
from .errors import StateFormatError

if TYPE_CHECKING:  # pragma: no cover
    from .state import Creature, State

OBS_VERSION = 1

_KW = [f"kw_{k}" for k in KEYWORDS]
CARD_FEATURES = (["present", "playable", "cost", "is_creature", "is_spell", "attack", "health", *_KW]
                 + [f"effect_{e}" for e in EFFECTS] + ["amount", "buff_attack", "buff_health"]
                 + [f"keyword_{k}" for k in KEYWORDS] + [f"target_{t}" for t in TARGET_RULES]
                 + [f"scope_{s}" for s in AREA_SCOPES])
CREATURE_FEATURES = ["present", "attack", "health", "max_health", *_KW, "can_attack", "sick", "attacked"]
GLOBAL_FEATURES = ["own_hero_health", "enemy_hero_health", "own_mana", "own_max_mana", "enemy_max_mana",
                   "own_hand_size", "enemy_hand_size", "own_deck_size", "enemy_deck_size", "own_fatigue",
                   "enemy_fatigue", "turn", "is_my_turn", "i_started", "own_board_count", "enemy_board_count"]
OBS_FEATURE_NAMES = (GLOBAL_FEATURES
                     + [f"hand{h}_{f}" for h in range(HAND_LIMIT) for f in CARD_FEATURES]
                     + [f"own{s}_{f}" for s in range(BOARD_SLOTS) for f in CREATURE_FEATURES]
                     + [f"enemy{s}_{f}" for s in range(BOARD_SLOTS) for f in CREATURE_FEATURES])
OBS_DIM = len(OBS_FEATURE_NAMES)

TARGET_KINDS = ("none", "own_hero", "enemy_hero", "own_creature", "enemy_creature")
ACTION_FEATURE_NAMES = (["is_end_turn", "is_play", "is_attack"]
                        + [f"card_{f}" for f in CARD_FEATURES]
                        + [f"attacker_{f}" for f in CREATURE_FEATURES]
                        + [f"target_is_{k}" for k in TARGET_KINDS]
                        + [f"target_{f}" for f in CREATURE_FEATURES]
                        + ["target_hero_health", "mana_after", "kills_target", "attacker_dies", "enemy_hero_damage"])
ACTION_FEATURE_DIM = len(ACTION_FEATURE_NAMES)

_STAT = 12.0
_CARD_N = len(CARD_FEATURES)
_CREATURE_N = len(CREATURE_FEATURES)


def _clip(x: float) -> float:
    return 1.0 if x > 1.0 else (-1.0 if x < -1.0 else x)


def _card_static(card) -> tuple[float, ...]:
    """Card features after ``present`` and ``playable`` (fixed per card, computed once)."""
    creature = card.type == "creature"
    vec = [card.cost / 10.0, float(creature), float(not creature),
           _clip(card.attack / _STAT), _clip(card.health / _STAT)]
    vec += [float(bool(card.keywords & KEYWORD_BIT[k])) for k in KEYWORDS]
    vec += [float(card.effect == e) for e in EFFECTS]
    vec += [_clip(card.amount / 10.0), _clip(card.buff_attack / 5.0), _clip(card.buff_health / 5.0)]
    vec += [float(card.keyword == k) for k in KEYWORDS]
    vec += [float(not creature and card.target == t) for t in TARGET_RULES]
    vec += [float(card.scope == s) for s in AREA_SCOPES]
    return tuple(vec)


_CARD_STATIC = {card_id: _card_static(card) for card_id, card in CARDS.items()}
_EMPTY_CARD = (0.0,) * _CARD_N
_EMPTY_CREATURE = (0.0,) * _CREATURE_N
_KW_BITS = tuple(KEYWORD_BIT[k] for k in KEYWORDS)


_CREATURE_CACHE: dict[tuple, tuple[float, ...]] = {}


def creature_features(c: "Creature | None") -> tuple[float, ...]:
    """Features of a board creature. Cached by its stats (a small domain), not by identity."""
    if c is None:
        return _EMPTY_CREATURE
    key = c[2:]  # attack, health, max_health, keywords, sick, attacked
    cached = _CREATURE_CACHE.get(key)
    if cached is None:
        kw = c.keywords
        can_attack = c.attack > 0 and not c.attacked and (not c.sick or kw & CHARGE)
        cached = (1.0, _clip(c.attack / _STAT), _clip(c.health / _STAT), _clip(c.max_health / _STAT),
                  *[1.0 if kw & bit else 0.0 for bit in _KW_BITS],
                  1.0 if can_attack else 0.0, 1.0 if c.sick else 0.0, 1.0 if c.attacked else 0.0)
        if len(_CREATURE_CACHE) < 100_000:
            _CREATURE_CACHE[key] = cached
    return cached


# Observation pieces as float32 arrays, so an observation is one np.concatenate.
_HAND_PIECES = {(card_id, playable): np.array((1.0, float(playable), *static), dtype=np.float32)
                for card_id, static in _CARD_STATIC.items() for playable in (False, True)}
_EMPTY_CARD_PIECE = np.zeros(_CARD_N, dtype=np.float32)
_CREATURE_PIECES: dict[tuple, np.ndarray] = {}
_EMPTY_CREATURE_PIECE = np.zeros(_CREATURE_N, dtype=np.float32)
_HEAD_N = len(GLOBAL_FEATURES)


def _creature_piece(c: "Creature") -> np.ndarray:
    piece = np.array(creature_features(c), dtype=np.float32)
    if len(_CREATURE_PIECES) < 100_000:
        _CREATURE_PIECES[c[2:]] = piece
    return piece


def observations(items: list[tuple["State", int]]) -> np.ndarray:
    """Observations of several (state, player) pairs at once: float32 [len(items), OBS_DIM].

    Built from cached per-card and per-creature pieces with one concatenation for the whole
    batch, which is what makes recording a battle's observations cheap.
    """
    core = backend.native()
    if core is not None and items:
        rows = _native_rows(core, items)
        if rows is not None:
            return rows
    heads: list[float] = []
    pieces: list[np.ndarray] = []
    empty_hand, empty_slot, hand_pieces, creature_pieces = (_EMPTY_CARD_PIECE, _EMPTY_CREATURE_PIECE,
                                                            _HAND_PIECES, _CREATURE_PIECES)
    for state, player in items:
        if player not in (1, 2):
            raise ValueError(f"player must be 1 or 2, got {player!r}")
        me = state.players[player - 1]
        opp = state.players[2 - player]
        own_count = BOARD_SLOTS - me.board.count(None)
        heads += (max(-1.0, me.hp / 30.0), max(-1.0, opp.hp / 30.0), me.mana / 10.0, me.max_mana / 10.0,
                  opp.max_mana / 10.0, len(me.hand) / 8.0, len(opp.hand) / 8.0, len(me.deck) / 30.0,
                  len(opp.deck) / 30.0, min(me.fatigue / 10.0, 1.0), min(opp.fatigue / 10.0, 1.0),
                  state.turn / 60.0, 1.0 if state.to_move == player else 0.0,
                  1.0 if state.starting_player == player else 0.0, own_count / 6.0,
                  (BOARD_SLOTS - opp.board.count(None)) / 6.0)
        room = own_count < BOARD_SLOTS
        mana = me.mana
        for card_id in me.hand:
            card = CARDS[card_id]
            pieces.append(hand_pieces[card_id, card.cost <= mana and (room or card.type != "creature")])
        pieces += [empty_hand] * (HAND_LIMIT - len(me.hand))
        for board in (me.board, opp.board):
            for c in board:
                if c is None:
                    pieces.append(empty_slot)
                else:
                    piece = creature_pieces.get(c[2:])
                    pieces.append(piece if piece is not None else _creature_piece(c))
    n = len(items)
    if n == 0:
        return np.zeros((0, OBS_DIM), dtype=np.float32)
    out = np.empty((n, OBS_DIM), dtype=np.float32)
    out[:, :_HEAD_N] = np.array(heads, dtype=np.float32).reshape(n, _HEAD_N)
    out[:, _HEAD_N:] = np.concatenate(pieces).reshape(n, OBS_DIM - _HEAD_N)
    return out


# The single-observation path (what an env calls at every step) joins cached float32 bytes:
# the 16 head values packed at once, then one cached piece per hand card and board slot.
# A hand card's piece depends only on (card, playable), and playable only on the mana (capped
# at the highest cost, beyond which nothing changes) and whether the board has room, so the
# pieces are tabled by that pair: _HAND_ROWS[min(mana, _MAX_COST)][room][card_id].
_head = struct.Struct(f"={_HEAD_N}f").pack
_MAX_COST = max(card.cost for card in CARDS.values())
_HAND_ROWS = [[{card_id: _HAND_PIECES[card_id, card.cost <= mana and (room or card.type != "creature")].tobytes()
                for card_id, card in CARDS.items()} for room in (False, True)] for mana in range(_MAX_COST + 1)]
_EMPTY_HANDS = [_EMPTY_CARD_PIECE.tobytes() * n for n in range(HAND_LIMIT + 1)]


def _native(core, state: "State"):
    """The native copy of ``state`` for the features (None when the core cannot hold it: an
    extreme from_dict state; the Python code below then computes them). A native state is used
    as it is, and so is the core battle of an engine.State on the native backend (its ``_core``)."""
    held = getattr(state, "_core", None)  # engine.native_state.NativeState
    if held is not None:
        return held
    if type(state) is core.State:
        return state
    try:
        return core.from_state(state)
    except StateFormatError:
        return None


def _native_rows(core, items: list[tuple["State", int]]) -> np.ndarray | None:
    out = np.empty((len(items), OBS_DIM), dtype=np.float32)
    for k, (state, player) in enumerate(items):
        native = _native(core, state)
        if native is None:
            return None
        out[k] = native.observation(player)
    return out


def native_model_inputs(states: Sequence["State"]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[list[int]]] | None:
    """On the native backend, a v5 model's feed for ``states`` (each seen by its player to
    move) in one core call: ``(obs, action_features zero-padded to the widest legal set,
    counts, legal ids)``; None on the Python backend, for a state the core cannot hold, or when
    a state is finished (the caller's own path then says so)."""
    core = backend.native()
    if core is None:
        return None
    held = []
    for state in states:
        native = _native(core, state)
        if native is None:
            return None
        held.append(native)
    try:
        return core.model_inputs(held)
    except ValueError:
        return None


# On the native backend the features are computed by the core (engine_native's
# State.observation / action_features, the same bytes): converting the state and computing
# there is faster than the Python code (benchmarks/vector_env.py, "features": about 2x for
# action_features and a batch of observations; about 1.1x for one observation, where the
# conversion costs most of what the cached-bytes join below does).
def observation(state: "State", player: int) -> np.ndarray:
    """One observation, float32 [OBS_DIM]: the same bytes as ``observations([(state, player)])[0]``."""
    core = backend.native()
    if core is not None:
        native = _native(core, state)
        if native is not None:
            return native.observation(player)
    if player != 1 and player != 2:
        raise ValueError(f"player must be 1 or 2, got {player!r}")
    me = state.players[player - 1]
    opp = state.players[2 - player]
    my_board, opp_board, hand, mana = me.board, opp.board, me.hand, me.mana
    own_count = BOARD_SLOTS - my_board.count(None)
    parts = [_head(max(-1.0, me.hp / 30.0), max(-1.0, opp.hp / 30.0), mana / 10.0, me.max_mana / 10.0,
                   opp.max_mana / 10.0, len(hand) / 8.0, len(opp.hand) / 8.0, len(me.deck) / 30.0,
                   len(opp.deck) / 30.0, min(me.fatigue / 10.0, 1.0), min(opp.fatigue / 10.0, 1.0),
                   state.turn / 60.0, 1.0 if state.winner is None and state.active == player - 1 else 0.0,
                   1.0 if state.starting_player == player else 0.0, own_count / 6.0,
                   (BOARD_SLOTS - opp_board.count(None)) / 6.0)]
    parts += map(_HAND_ROWS[mana if mana < _MAX_COST else _MAX_COST][own_count < BOARD_SLOTS].__getitem__, hand)
    parts.append(_EMPTY_HANDS[HAND_LIMIT - len(hand)])
    cached, empty = _CREATURE_BYTES, _NO_CREATURE
    parts += [empty if c is None else (cached.get(c[2:]) or _creature_bytes(c)) for c in my_board + opp_board]
    return np.frombuffer(bytearray().join(parts), dtype=np.float32)


def _would_kill(c: "Creature", amount: int, lethal: bool) -> bool:
    return amount > 0 and not c.keywords & WARD and (lethal or amount >= c.health)


_CARD_AT = 3
_ATTACKER_AT = _CARD_AT + _CARD_N
_KIND_AT = _ATTACKER_AT + _CREATURE_N
_TARGET_AT = _KIND_AT + len(TARGET_KINDS)
_DERIVED_AT = _TARGET_AT + _CREATURE_N  # target_hero_health, mana_after, kills_target, attacker_dies, hero damage


def _piece(c: "Creature") -> np.ndarray:
    piece = _CREATURE_PIECES.get(c[2:])
    return piece if piece is not None else _creature_piece(c)


# An action's feature row is the concatenation of fixed pieces (kind flags, card, attacker,
# target kind, target) and five derived values, so rows are assembled as bytes from cached
# float32 pieces: no per-value array writes, one buffer per call (or per battle, see
# action_feature_parts).
_KIND_FLAGS = [np.eye(3, dtype=np.float32)[k].tobytes() for k in range(3)]
_TARGET_FLAGS = [np.eye(len(TARGET_KINDS), dtype=np.float32)[k].tobytes() for k in range(len(TARGET_KINDS))]
_NO_TARGET_FLAG = bytes(4 * len(TARGET_KINDS))
_NO_CARD = bytes(4 * _CARD_N)
_NO_CREATURE = bytes(4 * _CREATURE_N)
_PLAYED_CARD = {card_id: _HAND_PIECES[card_id, True].tobytes() for card_id in _CARD_STATIC}
_CREATURE_BYTES: dict[tuple, bytes] = {}
_derived = struct.Struct("=5f").pack  # target hero health, mana after, kills target, attacker dies, hero damage


def _creature_bytes(c: "Creature | None") -> bytes:
    if c is None:
        return _NO_CREATURE
    key = c[2:]
    cached = _CREATURE_BYTES.get(key)
    if cached is None:
        cached = _piece(c).tobytes()
        if len(_CREATURE_BYTES) < 100_000:
            _CREATURE_BYTES[key] = cached
    return cached


def action_feature_parts(state: "State", action_ids: list[int], parts: list[bytes]) -> None:
    """Append to ``parts`` the pieces of each action's feature row: joined, they are the rows
    as native float32, ACTION_FEATURE_DIM values each (see :func:`action_features`). A state on
    the native core appends one piece, computed there (the same bytes)."""
    held = getattr(state, "_core", None)  # engine.native_state.NativeState
    if held is not None:
        parts.append(held.action_features(action_ids).tobytes())
        return
    me = state.players[state.active]
    opp = state.players[1 - state.active]
    mana, hand, add = me.mana, me.hand, parts.extend
    mana_now = _clip(mana / 10.0)
    for a in action_ids:
        a = int(a)
        if a == 0:
            add((_KIND_FLAGS[0], _NO_CARD, _NO_CREATURE, _TARGET_FLAGS[0], _NO_CREATURE,
                 _derived(0.0, mana_now, 0.0, 0.0, 0.0)))
        elif a < ATTACK_BASE:
            h, t = divmod(a - PLAY_BASE, PLAY_TARGETS)
            if h >= len(hand):
                add((_KIND_FLAGS[1], _NO_CARD, _NO_CREATURE, _NO_TARGET_FLAG, _NO_CREATURE,
                     _derived(0.0, mana_now, 0.0, 0.0, 0.0)))
                continue
            card = CARDS[hand[h]]
            hero_hp = kills = hero_damage = 0.0
            target = _NO_CREATURE
            if t == TARGET_NONE:
                kind = 0
                if card.effect == "area_damage" and card.scope == "all_characters":
                    hero_damage = _clip(card.amount / 30.0)
            elif t == TARGET_OWN_HERO or t == TARGET_ENEMY_HERO:
                kind = t
                hero_hp = _clip((me if t == TARGET_OWN_HERO else opp).hp / 30.0)
                if card.effect == "damage" and t == TARGET_ENEMY_HERO:
                    kills = 1.0 if card.amount >= opp.hp else 0.0
                    hero_damage = _clip(card.amount / 30.0)
            else:
                own = t < TARGET_ENEMY_SLOT
                kind = 3 if own else 4
                c = me.board[t - TARGET_OWN_SLOT] if own else opp.board[t - TARGET_ENEMY_SLOT]
                if c is not None:
                    target = _creature_bytes(c)
                    if card.effect == "damage" and _would_kill(c, card.amount, False):
                        kills = 1.0
            add((_KIND_FLAGS[1], _PLAYED_CARD[card.id], _NO_CREATURE, _TARGET_FLAGS[kind], target,
                 _derived(hero_hp, _clip((mana - card.cost) / 10.0), kills, 0.0, hero_damage)))
        else:
            slot, t = divmod(a - ATTACK_BASE, ATTACK_TARGETS)
            attacker = me.board[slot]
            hero_hp = kills = dies = hero_damage = 0.0
            if t == 0:
                kind, target = 2, _NO_CREATURE
                hero_hp = _clip(opp.hp / 30.0)
                if attacker is not None:
                    kills = 1.0 if attacker.attack >= opp.hp else 0.0
                    hero_damage = _clip(attacker.attack / 30.0)
            else:
                defender = opp.board[t - 1]
                kind, target = 4, _creature_bytes(defender)
                if attacker is not None and defender is not None:
                    kills = float(_would_kill(defender, attacker.attack, bool(attacker.keywords & LETHAL)))
                    dies = float(_would_kill(attacker, defender.attack, bool(defender.keywords & LETHAL)))
                    if attacker.keywords & BREAKTHROUGH and not defender.keywords & WARD:
                        hero_damage = _clip(max(0, attacker.attack - defender.health) / 30.0)
            add((_KIND_FLAGS[2], _NO_CARD, _creature_bytes(attacker), _TARGET_FLAGS[kind], target,
                 _derived(hero_hp, mana_now, kills, dies, hero_damage)))


def action_features(state: "State", action_ids: list[int]) -> np.ndarray:
    """Features of candidate actions for the player to move: float32 [len(ids), ACTION_FEATURE_DIM]."""
    core = backend.native()
    if core is not None:
        native = _native(core, state)
        if native is not None:
            return native.action_features(action_ids)
    parts: list[bytes] = []
    action_feature_parts(state, action_ids, parts)
    return np.frombuffer(bytearray().join(parts), dtype=np.float32).reshape(len(action_ids), ACTION_FEATURE_DIM)
