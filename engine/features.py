"""Fixed-length numeric encodings for learning: the observation and per-action features.

Everything is player-relative, float32 and bounded to [-1, 1]. The observation holds only
what the observing player may know (own hand, both boards, public counts); never the
opponent's hand or any deck order. Bump OBS_VERSION whenever a layout changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .actions import ATTACK_BASE, ATTACK_TARGETS, BOARD_SLOTS, HAND_LIMIT, PLAY_BASE, PLAY_TARGETS, \
    TARGET_ENEMY_HERO, TARGET_ENEMY_SLOT, TARGET_NONE, TARGET_OWN_HERO, TARGET_OWN_SLOT
from .cards import AREA_SCOPES, CARDS, CHARGE, EFFECTS, KEYWORD_BIT, KEYWORDS, LETHAL, TARGET_RULES, WARD, BREAKTHROUGH

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


def observation(state: "State", player: int) -> np.ndarray:
    return observations([(state, player)])[0]


def _would_kill(c: "Creature", amount: int, lethal: bool) -> bool:
    return amount > 0 and not c.keywords & WARD and (lethal or amount >= c.health)


_CARD_AT = 3
_ATTACKER_AT = _CARD_AT + _CARD_N
_KIND_AT = _ATTACKER_AT + _CREATURE_N
_TARGET_AT = _KIND_AT + len(TARGET_KINDS)
_DERIVED_AT = _TARGET_AT + _CREATURE_N  # target_hero_health, mana_after, kills_target, attacker_dies, hero damage
_HERO_HP, _MANA_AFTER, _KILLS, _DIES, _HERO_DAMAGE = range(_DERIVED_AT, _DERIVED_AT + 5)


def _piece(c: "Creature") -> np.ndarray:
    piece = _CREATURE_PIECES.get(c[2:])
    return piece if piece is not None else _creature_piece(c)


def action_features(state: "State", action_ids: list[int]) -> np.ndarray:
    """Features of candidate actions for the player to move: float32 [len(ids), ACTION_FEATURE_DIM].

    Rows are filled in place from cached per-card and per-creature pieces (no per-value lists).
    """
    out = np.zeros((len(action_ids), ACTION_FEATURE_DIM), dtype=np.float32)
    me = state.players[state.active]
    opp = state.players[1 - state.active]
    for row, a in zip(out, action_ids):
        a = int(a)
        mana_after = me.mana
        if a == 0:
            row[0] = 1.0
            row[_KIND_AT] = 1.0
        elif a < ATTACK_BASE:
            row[1] = 1.0
            h, t = divmod(a - PLAY_BASE, PLAY_TARGETS)
            if h < len(me.hand):
                card = CARDS[me.hand[h]]
                mana_after = me.mana - card.cost
                row[_CARD_AT:_ATTACKER_AT] = _HAND_PIECES[card.id, True]
                if t == TARGET_NONE:
                    row[_KIND_AT] = 1.0
                    if card.effect == "area_damage" and card.scope == "all_characters":
                        row[_HERO_DAMAGE] = _clip(card.amount / 30.0)
                elif t == TARGET_OWN_HERO or t == TARGET_ENEMY_HERO:
                    row[_KIND_AT + t] = 1.0
                    row[_HERO_HP] = _clip((me if t == TARGET_OWN_HERO else opp).hp / 30.0)
                    if card.effect == "damage" and t == TARGET_ENEMY_HERO:
                        row[_KILLS] = 1.0 if card.amount >= opp.hp else 0.0
                        row[_HERO_DAMAGE] = _clip(card.amount / 30.0)
                else:
                    own = t < TARGET_ENEMY_SLOT
                    row[_KIND_AT + (3 if own else 4)] = 1.0
                    c = (me if own else opp).board[(t - TARGET_OWN_SLOT) if own else (t - TARGET_ENEMY_SLOT)]
                    if c is not None:
                        row[_TARGET_AT:_DERIVED_AT] = _piece(c)
                        if card.effect == "damage" and _would_kill(c, card.amount, False):
                            row[_KILLS] = 1.0
        else:
            row[2] = 1.0
            slot, t = divmod(a - ATTACK_BASE, ATTACK_TARGETS)
            attacker = me.board[slot]
            if attacker is not None:
                row[_ATTACKER_AT:_KIND_AT] = _piece(attacker)
            if t == 0:
                row[_KIND_AT + 2] = 1.0
                row[_HERO_HP] = _clip(opp.hp / 30.0)
                if attacker is not None:
                    row[_KILLS] = 1.0 if attacker.attack >= opp.hp else 0.0
                    row[_HERO_DAMAGE] = _clip(attacker.attack / 30.0)
            else:
                row[_KIND_AT + 4] = 1.0
                defender = opp.board[t - 1]
                if defender is not None:
                    row[_TARGET_AT:_DERIVED_AT] = _piece(defender)
                if attacker is not None and defender is not None:
                    row[_KILLS] = float(_would_kill(defender, attacker.attack, bool(attacker.keywords & LETHAL)))
                    row[_DIES] = float(_would_kill(attacker, defender.attack, bool(defender.keywords & LETHAL)))
                    if attacker.keywords & BREAKTHROUGH and not defender.keywords & WARD:
                        row[_HERO_DAMAGE] = _clip(max(0, attacker.attack - defender.health) / 30.0)
        row[_MANA_AFTER] = _clip(mana_after / 10.0)
    return out
