"""Battle state and rules of ruleset arena-1 (DESIGN section 3).

A :class:`State` is explicit and self-contained: both players' heroes, hands, decks
(in draw order), boards, the turn counter and the battle's own seeded generator. It
follows OpenSpiel's State API: ``legal_actions``, ``apply``, ``clone``, ``is_terminal``,
``to_dict``/``from_dict``. Players are numbered 1 and 2; internally index 0 and 1.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, NamedTuple

import numpy as np

from . import features, views
from .actions import (ACTION_SPACE_SIZE, ATTACK_BASE, ATTACK_TARGETS, BOARD_SLOTS, END_TURN, HAND_LIMIT,
                      PLAY_BASE, PLAY_TARGETS, TARGET_ENEMY_HERO, TARGET_ENEMY_SLOT, TARGET_NONE,
                      TARGET_OWN_HERO, TARGET_OWN_SLOT, check_action_id, decode_action)
from .cards import (BREAKTHROUGH, CARDS, CHARGE, DRAIN, GUARD, KEYWORD_BIT, LETHAL, WARD, keywords_to_mask,
                    mask_to_keywords)
from .decks import random_deck, validate_deck
from .errors import IllegalActionError, StateFormatError
from .rng import SplitMix64, derive_seed

RULESET = "arena-1"
STATE_SCHEMA_VERSION = 1
HERO_HEALTH = 30
MAX_MANA = 10
MAX_TURNS_PER_PLAYER = 30
MAX_TURNS = 2 * MAX_TURNS_PER_PLAYER
STARTING_HAND = {True: 3, False: 4}  # keyed by "is the starting player"

# Play targets each spell target rule allows, split by side; filled against the live board.
_SPELL_TARGET_SIDES = {
    "none": (False, False, False, False),  # (own hero, enemy hero, own creatures, enemy creatures)
    "friendly_creature": (False, False, True, False),
    "enemy_creature": (False, False, False, True),
    "any_creature": (False, False, True, True),
    "enemy_hero": (False, True, False, False),
    "any_character": (True, True, True, True),
}


class Creature(NamedTuple):
    """A creature on the board. Immutable: rules replace it, so clones share it safely."""

    uid: int
    card_id: int
    attack: int
    health: int
    max_health: int
    keywords: int  # bitmask, see engine.cards.KEYWORD_BIT
    sick: bool  # played this turn (cannot attack unless it has charge)
    attacked: bool  # already attacked this turn

    @property
    def can_attack(self) -> bool:
        return self.attack > 0 and not self.attacked and (not self.sick or bool(self.keywords & CHARGE))

    def has(self, keyword: str) -> bool:
        return bool(self.keywords & KEYWORD_BIT[keyword])


class Player:
    """One side: hero health, mana, fatigue counter, deck (top = last), hand and 6 board slots."""

    __slots__ = ("hp", "max_mana", "mana", "fatigue", "deck", "hand", "board")

    def __init__(self, deck: list[int]) -> None:
        self.hp = HERO_HEALTH
        self.max_mana = 0
        self.mana = 0
        self.fatigue = 0
        self.deck = deck
        self.hand: list[int] = []
        self.board: list[Creature | None] = [None] * BOARD_SLOTS

    def copy(self) -> "Player":
        other = Player.__new__(Player)
        other.hp, other.max_mana, other.mana, other.fatigue = self.hp, self.max_mana, self.mana, self.fatigue
        other.deck, other.hand, other.board = self.deck[:], self.hand[:], self.board[:]
        return other


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise StateFormatError(f"seed must be an integer, got {seed!r}")
    return int(seed)


def new_battle(seed: int, p1_deck: Any = None, p2_deck: Any = None, starting_player: int | None = None) -> "State":
    """Start a battle on the Python engine (the reference; ``engine.new_battle`` follows the backend).
    Decks default to seeded valid decks; the starting player to a seeded coin flip.

    Each random choice uses its own stream derived from ``seed`` (decks, start, shuffles), so
    passing the default decks explicitly gives the same battle as omitting them.
    """
    seed = _check_seed(seed)
    decks = [
        validate_deck(deck, f"p{i + 1}_deck") if deck is not None
        else random_deck(SplitMix64(derive_seed(seed, f"deck{i + 1}")))
        for i, deck in enumerate((p1_deck, p2_deck))
    ]
    if starting_player is None:
        starting_player = 1 + SplitMix64(derive_seed(seed, "start")).below(2)
    elif isinstance(starting_player, bool) or starting_player not in (1, 2):
        raise StateFormatError(f"starting_player must be 1, 2 or None (seeded), got {starting_player!r}")
    state = State.__new__(State)
    state.seed = seed
    state.decks = (decks[0], decks[1])
    state.starting_player = int(starting_player)
    state.rng = SplitMix64(derive_seed(seed, "battle"))
    piles = [list(decks[0]), list(decks[1])]
    for pile in piles:
        state.rng.shuffle(pile)
    state.players = [Player(piles[0]), Player(piles[1])]
    state.turn = 0
    state.active = state.starting_player - 1
    state.next_uid = 1
    state.winner = None
    state.end_reason = None
    state._legal = None
    events: list[dict] = []
    for index in (state.active, 1 - state.active):
        for _ in range(STARTING_HAND[index == state.active]):
            state._draw(index, events)
    state._start_turn(state.active, events)
    state.last_events = events
    return state


class State:
    """A battle in progress (or over). Build with :func:`new_battle` or :meth:`from_dict`."""

    __slots__ = ("seed", "decks", "starting_player", "rng", "players", "active", "turn", "next_uid",
                 "winner", "end_reason", "_legal", "last_events")

    # ------------------------------------------------------------------ queries
    @property
    def is_terminal(self) -> bool:
        return self.winner is not None

    @property
    def to_move(self) -> int | None:
        """Player (1 or 2) whose decision it is, or None once the battle is over."""
        return None if self.winner is not None else self.active + 1

    @property
    def player_turn(self) -> int:
        """How many turns the active player has started (1..30)."""
        return (self.turn + 1) // 2

    def player(self, player: int) -> Player:
        if player not in (1, 2):
            raise ValueError(f"player must be 1 or 2, got {player!r}")
        return self.players[player - 1]

    def legal_actions(self) -> list[int]:
        """Legal action ids for the player to move, ascending; empty once terminal."""
        if self._legal is None:
            self._legal = self._compute_legal()
        return list(self._legal)

    def legal_action_mask(self) -> np.ndarray:
        """Boolean mask of length ACTION_SPACE_SIZE (163); True where the action is legal."""
        if self._legal is None:
            self._legal = self._compute_legal()
        mask = np.zeros(ACTION_SPACE_SIZE, dtype=bool)
        mask[self._legal] = True
        return mask

    def _compute_legal(self) -> list[int]:
        if self.winner is not None:
            return []
        me = self.players[self.active]
        opp = self.players[1 - self.active]
        mana = me.mana
        my_board = me.board
        opp_board = opp.board
        own_slots = [TARGET_OWN_SLOT + i for i, c in enumerate(my_board) if c is not None]
        enemy_slots = [TARGET_ENEMY_SLOT + i for i, c in enumerate(opp_board) if c is not None]
        board_full = len(own_slots) == BOARD_SLOTS
        legal = [END_TURN]
        for h, card_id in enumerate(me.hand):
            card = CARDS[card_id]
            if card.cost > mana:
                continue
            base = PLAY_BASE + h * PLAY_TARGETS
            if card.type == "creature":
                if not board_full:
                    legal.append(base)
                continue
            own_hero, enemy_hero, own_creatures, enemy_creatures = _SPELL_TARGET_SIDES[card.target]
            if card.target == "none":
                legal.append(base)
                continue
            if own_hero:
                legal.append(base + TARGET_OWN_HERO)
            if enemy_hero:
                legal.append(base + TARGET_ENEMY_HERO)
            if own_creatures:
                legal.extend(base + t for t in own_slots)
            if enemy_creatures:
                legal.extend(base + t for t in enemy_slots)
        targets = [1 + i for i, c in enumerate(opp_board) if c is not None and c.keywords & GUARD]
        if not targets:
            targets = [0] + [t - TARGET_ENEMY_SLOT + 1 for t in enemy_slots]
        for slot, c in enumerate(my_board):
            if c is not None and c.attack > 0 and not c.attacked and (not c.sick or c.keywords & CHARGE):
                base = ATTACK_BASE + slot * ATTACK_TARGETS
                legal.extend(base + t for t in targets)
        return legal

    # ------------------------------------------------------------------ transitions
    def apply(self, action_id: int) -> list[dict[str, Any]]:
        """Apply a legal action and return its events. An illegal action raises
        :class:`IllegalActionError` (with the reason and the legal ids) and changes nothing."""
        if type(action_id) is not int:
            action_id = check_action_id(action_id)  # numpy ints pass; floats, bools, strings do not
        if self._legal is None:
            self._legal = self._compute_legal()
        if action_id not in self._legal:
            raise IllegalActionError(self._why_illegal(action_id))
        events: list[dict[str, Any]] = []
        if action_id == END_TURN:
            self._end_turn(events)
        elif action_id < ATTACK_BASE:
            h, t = divmod(action_id - PLAY_BASE, PLAY_TARGETS)
            self._play(h, t, events)
        else:
            slot, t = divmod(action_id - ATTACK_BASE, ATTACK_TARGETS)
            self._attack(slot, t, events)
        self._legal = None
        self.last_events = events
        return events

    def _draw(self, index: int, events: list) -> None:
        p = self.players[index]
        if not p.deck:
            p.fatigue += 1
            p.hp -= p.fatigue
            events.append({"type": "fatigue", "player": index + 1, "damage": p.fatigue, "hero_health": p.hp})
            return
        card_id = p.deck.pop()
        if len(p.hand) >= HAND_LIMIT:
            events.append({"type": "burn", "player": index + 1, "card_id": card_id})
        else:
            p.hand.append(card_id)
            events.append({"type": "draw", "player": index + 1, "card_id": card_id})

    def _start_turn(self, index: int, events: list) -> None:
        self.turn += 1
        self.active = index
        p = self.players[index]
        p.max_mana = min(MAX_MANA, p.max_mana + 1)
        p.mana = p.max_mana
        board = p.board
        for slot, c in enumerate(board):
            if c is not None and (c.sick or c.attacked):
                board[slot] = c._replace(sick=False, attacked=False)
        events.append({"type": "turn_start", "player": index + 1, "turn": self.turn, "max_mana": p.max_mana})
        self._draw(index, events)
        self._check_end(events)

    def _end_turn(self, events: list) -> None:
        events.append({"type": "end_turn", "player": self.active + 1, "turn": self.turn})
        if self.turn >= MAX_TURNS:
            self._finish(0, "turn_limit", events)
        else:
            self._start_turn(1 - self.active, events)

    def _finish(self, winner: int, reason: str, events: list) -> None:
        self.winner = winner
        self.end_reason = reason
        events.append({"type": "game_over", "winner": winner, "reason": reason})

    def _check_end(self, events: list) -> None:
        if self.winner is not None:
            return
        dead1 = self.players[0].hp <= 0
        dead2 = self.players[1].hp <= 0
        if dead1 and dead2:
            self._finish(0, "simultaneous_death", events)
        elif dead1 or dead2:
            self._finish(2 if dead1 else 1, "hero_defeated", events)

    def _damage_hero(self, index: int, amount: int, events: list) -> None:
        p = self.players[index]
        p.hp -= amount
        events.append({"type": "damage", "target": {"kind": "hero", "player": index + 1},
                       "amount": amount, "hero_health": p.hp})

    def _heal_hero(self, index: int, amount: int, events: list) -> None:
        p = self.players[index]
        healed = min(amount, HERO_HEALTH - p.hp)
        p.hp += healed
        events.append({"type": "heal", "target": {"kind": "hero", "player": index + 1},
                       "amount": healed, "hero_health": p.hp})

    def _damage_creature(self, index: int, slot: int, amount: int, lethal: bool, events: list) -> bool:
        """Deal one damage instance; returns whether it landed (ward absorbs it)."""
        board = self.players[index].board
        c = board[slot]
        target = {"kind": "creature", "player": index + 1, "slot": slot, "uid": c.uid}
        if c.keywords & WARD:
            board[slot] = c._replace(keywords=c.keywords & ~WARD)
            events.append({"type": "ward_broken", "target": target, "absorbed": amount})
            return False
        health = c.health - amount
        if lethal:
            health = min(health, 0)
        board[slot] = c._replace(health=health)
        events.append({"type": "damage", "target": target, "amount": amount, "health": health,
                       "lethal": lethal})
        return True

    def _remove_dead(self, events: list) -> None:
        for index in (0, 1):
            board = self.players[index].board
            for slot, c in enumerate(board):
                if c is not None and c.health <= 0:
                    board[slot] = None
                    events.append({"type": "death", "player": index + 1, "slot": slot, "uid": c.uid,
                                   "card_id": c.card_id})

    def _play(self, h: int, t: int, events: list) -> None:
        me_index = self.active
        p = self.players[me_index]
        card_id = p.hand.pop(h)
        card = CARDS[card_id]
        p.mana -= card.cost
        events.append({"type": "play", "player": me_index + 1, "hand_slot": h, "card_id": card_id, "target": t})
        if card.type == "creature":
            slot = p.board.index(None)
            c = Creature(self.next_uid, card_id, card.attack, card.health, card.health, card.keywords, True, False)
            self.next_uid += 1
            p.board[slot] = c
            events.append({"type": "summon", "player": me_index + 1, "slot": slot, "uid": c.uid,
                           "card_id": card_id})
            return
        self._cast(card, me_index, t, events)

    def _cast(self, card, me: int, t: int, events: list) -> None:
        effect = card.effect
        if effect == "draw":
            for _ in range(card.amount):
                self._draw(me, events)
            self._check_end(events)
            return
        if effect == "area_damage":
            sides = (1 - me,) if card.scope == "enemy_creatures" else (1 - me, me)
            for index in sides:
                for slot, c in enumerate(self.players[index].board):
                    if c is not None:
                        self._damage_creature(index, slot, card.amount, False, events)
            if card.scope == "all_characters":
                self._damage_hero(1 - me, card.amount, events)
                self._damage_hero(me, card.amount, events)
            self._remove_dead(events)
            self._check_end(events)
            return
        if t == TARGET_OWN_HERO or t == TARGET_ENEMY_HERO:
            index = me if t == TARGET_OWN_HERO else 1 - me
            if effect == "damage":
                self._damage_hero(index, card.amount, events)
                self._check_end(events)
            else:  # heal: the only hero-targeting effect besides damage
                self._heal_hero(index, card.amount, events)
            return
        index, slot = (me, t - TARGET_OWN_SLOT) if t < TARGET_ENEMY_SLOT else (1 - me, t - TARGET_ENEMY_SLOT)
        board = self.players[index].board
        c = board[slot]
        target = {"kind": "creature", "player": index + 1, "slot": slot, "uid": c.uid}
        if effect == "damage":
            self._damage_creature(index, slot, card.amount, False, events)
            self._remove_dead(events)
            return
        if effect == "heal":
            healed = min(card.amount, c.max_health - c.health)
            board[slot] = c._replace(health=c.health + healed)
            events.append({"type": "heal", "target": target, "amount": healed, "health": c.health + healed})
        elif effect == "buff":
            board[slot] = c._replace(attack=max(0, c.attack + card.buff_attack), health=c.health + card.buff_health,
                                     max_health=c.max_health + card.buff_health)
            events.append({"type": "buff", "target": target, "attack": card.buff_attack,
                           "health": card.buff_health})
        elif effect == "grant_keyword":
            board[slot] = c._replace(keywords=c.keywords | KEYWORD_BIT[card.keyword])
            events.append({"type": "keyword_granted", "target": target, "keyword": card.keyword})
        else:  # remove_keyword
            board[slot] = c._replace(keywords=c.keywords & ~KEYWORD_BIT[card.keyword])
            events.append({"type": "keyword_removed", "target": target, "keyword": card.keyword})

    def _attack(self, slot: int, t: int, events: list) -> None:
        me = self.active
        opp = 1 - me
        my_board = self.players[me].board
        attacker = my_board[slot]
        my_board[slot] = attacker._replace(attacked=True)
        events.append({"type": "attack", "player": me + 1, "slot": slot, "uid": attacker.uid,
                       "target": {"kind": "hero", "player": opp + 1} if t == 0 else
                       {"kind": "creature", "player": opp + 1, "slot": t - 1, "uid": self.players[opp].board[t - 1].uid}})
        power = attacker.attack
        kw = attacker.keywords
        if t == 0:
            self._damage_hero(opp, power, events)
            dealt = power
        else:
            defender = self.players[opp].board[t - 1]
            landed = self._damage_creature(opp, t - 1, power, bool(kw & LETHAL), events)
            dealt = power if landed else 0
            if defender.attack > 0:
                self._damage_creature(me, slot, defender.attack, bool(defender.keywords & LETHAL), events)
            if landed and kw & BREAKTHROUGH and power > defender.health:
                self._damage_hero(opp, power - defender.health, events)
            self._remove_dead(events)
        if dealt and kw & DRAIN:
            self._heal_hero(me, dealt, events)
        self._check_end(events)

    # ------------------------------------------------------------------ explanations
    def _why_illegal(self, action_id: Any) -> str:
        a = check_action_id(action_id)  # raises its own clear error for non-ids
        legal = self.legal_actions()
        head = f"action {a} ({views.describe_action(self, a)}) is not legal"
        if self.winner is not None:
            return f"{head}: the battle is over (winner {self.winner}, reason {self.end_reason}); no action is legal"
        me = self.players[self.active]
        opp = self.players[1 - self.active]
        spec = decode_action(a)
        reason = "it is not allowed in this state"
        if spec["kind"] == "play":
            h, t = spec["hand_slot"], a - PLAY_BASE - spec["hand_slot"] * PLAY_TARGETS
            if h >= len(me.hand):
                reason = f"hand slot {h} is empty (the hand has {len(me.hand)} card(s), slots 0..{len(me.hand) - 1})"
            else:
                card = CARDS[me.hand[h]]
                if card.cost > me.mana:
                    reason = f"{card.name} costs {card.cost} mana but only {me.mana} is available"
                elif card.type == "creature":
                    reason = ("the board is full (6 creatures)" if None not in me.board
                              else f"a creature is played with target 0 (none): use action {PLAY_BASE + h * PLAY_TARGETS}")
                else:
                    reason = f"{card.name} must target: {card.target.replace('_', ' ')}; target {t} is not a valid one now"
        elif spec["kind"] == "attack":
            s, tgt = spec["attacker_slot"], spec["target"]
            c = me.board[s]
            guards = [i for i, d in enumerate(opp.board) if d is not None and d.keywords & GUARD]
            if c is None:
                reason = f"own board slot {s} is empty"
            elif c.attack <= 0:
                reason = f"{CARDS[c.card_id].name} has 0 attack"
            elif c.attacked:
                reason = f"{CARDS[c.card_id].name} has already attacked this turn"
            elif c.sick and not c.keywords & CHARGE:
                reason = f"{CARDS[c.card_id].name} was played this turn and has no charge"
            elif tgt["kind"] == "enemy_creature" and opp.board[tgt["slot"]] is None:
                reason = f"enemy board slot {tgt['slot']} is empty"
            elif guards:
                reason = f"the enemy has guard creature(s) in slot(s) {guards}; attacks must target a guard"
        return f"{head}: {reason}. Legal actions now: {legal}"

    # ------------------------------------------------------------------ copies and serialization
    def clone(self) -> "State":
        other = State.__new__(State)
        other.seed, other.decks, other.starting_player = self.seed, self.decks, self.starting_player
        other.rng = SplitMix64(self.rng.state)
        other.players = [self.players[0].copy(), self.players[1].copy()]
        other.active, other.turn, other.next_uid = self.active, self.turn, self.next_uid
        other.winner, other.end_reason = self.winner, self.end_reason
        other._legal = self._legal
        other.last_events = list(self.last_events)
        return other

    def to_dict(self) -> dict[str, Any]:
        """Lossless, JSON-safe form of the whole state (hidden information included)."""
        return {
            "schema_version": STATE_SCHEMA_VERSION,
            "ruleset": RULESET,
            "seed": self.seed,
            "decks": [list(self.decks[0]), list(self.decks[1])],
            "starting_player": self.starting_player,
            "rng_state": f"{self.rng.state:016x}",
            "turn": self.turn,
            "active_player": self.active + 1,
            "next_uid": self.next_uid,
            "winner": self.winner,
            "end_reason": self.end_reason,
            "players": [_player_to_dict(p) for p in self.players],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "State":
        """Rebuild a state from :meth:`to_dict` output; a malformed dict is a StateFormatError.
        On the native backend the state is stepped in the core (engine.native_state)."""
        from .native_state import adopt_python  # native_state subclasses State

        return adopt_python(state_from_dict(data))

    def canonical_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def state_hash(self) -> str:
        """sha256 of the canonical JSON of :meth:`to_dict` (hex)."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, State) and self.to_dict() == other.to_dict()

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        p1, p2 = self.players
        status = f"winner={self.winner} ({self.end_reason})" if self.winner is not None else f"to_move={self.to_move}"
        return f"<arena-1 State seed={self.seed} turn={self.turn} hp={p1.hp}/{p2.hp} {status}>"

    # ------------------------------------------------------------------ views and features
    def observation(self, player: int) -> np.ndarray:
        """Player-relative float32 vector of length OBS_DIM, every entry in [-1, 1]."""
        return features.observation(self, player)

    def action_features(self, action_ids: list[int] | None = None) -> np.ndarray:
        """float32 [len(action_ids), ACTION_FEATURE_DIM] for the player to move (default: legal actions)."""
        return features.action_features(self, self.legal_actions() if action_ids is None else action_ids)

    def describe_action(self, action_id: int) -> str:
        return views.describe_action(self, action_id)

    def describe_actions(self, action_ids: list[int]) -> list[str]:
        return views.describe_actions(self, action_ids)

    def action_json(self, action_id: int, description: str | None = None) -> dict[str, Any]:
        return views.action_json(self, action_id, description)

    def player_view(self, player: int) -> dict[str, Any]:
        return views.player_view(self, player)

    def omniscient_view(self) -> dict[str, Any]:
        return views.omniscient_view(self)

    def render(self, player: int) -> str:
        return views.render(self, player)


def _player_to_dict(p: Player) -> dict[str, Any]:
    return {
        "hero_health": p.hp,
        "max_mana": p.max_mana,
        "mana": p.mana,
        "fatigue": p.fatigue,
        "deck": list(p.deck),
        "hand": list(p.hand),
        "board": [None if c is None else {
            "uid": c.uid, "card_id": c.card_id, "attack": c.attack, "health": c.health,
            "max_health": c.max_health, "keywords": mask_to_keywords(c.keywords),
            "sick": c.sick, "attacked": c.attacked,
        } for c in p.board],
    }


def _int(value: Any, what: str, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise StateFormatError(f"state field {what} must be an integer, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise StateFormatError(f"state field {what} = {value} is outside {lo}..{hi}")
    return value


def _card_list(value: Any, what: str, max_len: int) -> list[int]:
    if not isinstance(value, list) or len(value) > max_len:
        raise StateFormatError(f"state field {what} must be a list of at most {max_len} card ids")
    for card_id in value:
        if _int(card_id, what) not in CARDS:
            raise StateFormatError(f"state field {what} holds unknown card id {card_id}")
    return list(value)


def state_from_dict(data: Any) -> State:
    """:meth:`State.from_dict` on the Python engine whatever the backend (engine.reference)."""
    try:
        return _state_from_dict(data)
    except StateFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise StateFormatError(f"malformed arena-1 state: {type(exc).__name__}: {exc}") from None


def _state_from_dict(data: dict[str, Any]) -> State:
    if not isinstance(data, dict):
        raise StateFormatError(f"a state must be a JSON object, got {type(data).__name__}")
    if data.get("schema_version") != STATE_SCHEMA_VERSION:
        raise StateFormatError(f"unknown state schema_version {data.get('schema_version')!r}; "
                               f"this engine reads version {STATE_SCHEMA_VERSION}")
    if data.get("ruleset") != RULESET:
        raise StateFormatError(f"unknown ruleset {data.get('ruleset')!r}; this engine plays {RULESET!r}")
    state = State.__new__(State)
    state.seed = _int(data["seed"], "seed")
    state.decks = tuple(validate_deck(d, f"decks[{i}]") for i, d in enumerate(data["decks"]))
    if len(state.decks) != 2:
        raise StateFormatError("state field decks must hold two decks")
    state.starting_player = _int(data["starting_player"], "starting_player", 1, 2)
    state.rng = SplitMix64(int(data["rng_state"], 16))
    state.turn = _int(data["turn"], "turn", 0, MAX_TURNS)
    state.active = _int(data["active_player"], "active_player", 1, 2) - 1
    state.next_uid = _int(data["next_uid"], "next_uid", 1)
    winner = data["winner"]
    state.winner = None if winner is None else _int(winner, "winner", 0, 2)
    state.end_reason = data["end_reason"]
    if (state.winner is None) != (state.end_reason is None):
        raise StateFormatError("state fields winner and end_reason must both be set or both be null")
    players = data["players"]
    if not isinstance(players, list) or len(players) != 2:
        raise StateFormatError("state field players must hold two players")
    state.players = []
    for i, pd in enumerate(players):
        p = Player(_card_list(pd["deck"], f"players[{i}].deck", 30))
        p.hp = _int(pd["hero_health"], f"players[{i}].hero_health", None, HERO_HEALTH)
        p.max_mana = _int(pd["max_mana"], f"players[{i}].max_mana", 0, MAX_MANA)
        p.mana = _int(pd["mana"], f"players[{i}].mana", 0, p.max_mana)
        p.fatigue = _int(pd["fatigue"], f"players[{i}].fatigue", 0)
        p.hand = _card_list(pd["hand"], f"players[{i}].hand", HAND_LIMIT)
        board = pd["board"]
        if not isinstance(board, list) or len(board) != BOARD_SLOTS:
            raise StateFormatError(f"state field players[{i}].board must have {BOARD_SLOTS} slots")
        for slot, cd in enumerate(board):
            if cd is None:
                continue
            where = f"players[{i}].board[{slot}]"
            if _int(cd["card_id"], f"{where}.card_id") not in CARDS or not CARDS[cd["card_id"]].type == "creature":
                raise StateFormatError(f"state field {where}.card_id is not a creature card")
            p.board[slot] = Creature(
                _int(cd["uid"], f"{where}.uid", 1), cd["card_id"], _int(cd["attack"], f"{where}.attack", 0),
                _int(cd["health"], f"{where}.health", 1), _int(cd["max_health"], f"{where}.max_health", 1),
                keywords_to_mask(cd["keywords"]), bool(cd["sick"]), bool(cd["attacked"]))
        state.players.append(p)
    state._legal = None
    state.last_events = []
    return state
