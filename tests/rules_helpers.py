"""Helpers that build precise arena-1 positions for rule tests.

A position is made by starting a real battle with :func:`engine.new_battle` and then
overwriting fields of its :meth:`engine.State.to_dict` form before loading it back with
:meth:`engine.State.from_dict`, so every position a test uses went through the engine's own
state validation (no private attribute poking).

Conventions used by :func:`make_state`:

* Cards are named (``"Firebolt"``) or given by id; :func:`card_id` resolves names.
* ``deck`` is given in *draw order*: the first card listed is the next one drawn (the engine
  itself stores the top of the deck last).
* ``board`` is a list of at most 6 entries, each ``None`` (empty slot), a card name / id
  (a fresh, ready-to-attack creature with the card's printed stats) or a dict built with
  :func:`creature`.
* Unspecified players get 30 health, 10/10 mana, no fatigue, an empty hand, an empty board
  and a filler deck of 10 cards (so nobody takes fatigue by accident).
"""

from __future__ import annotations

from typing import Any, Iterable, Union

import engine
from engine.actions import TARGET_ENEMY_HERO, TARGET_ENEMY_SLOT, TARGET_NONE, TARGET_OWN_HERO, TARGET_OWN_SLOT

CardRef = Union[str, int]

NONE = TARGET_NONE
OWN_HERO = TARGET_OWN_HERO
ENEMY_HERO = TARGET_ENEMY_HERO

FILLER_CARD = "Tide Serpent"
FILLER_DECK_SIZE = 10
_BY_NAME = {card.name: card.id for card in engine.CARDS.values()}


def card_id(ref: CardRef) -> int:
    """Card id of a card name (or pass an id through after checking it exists)."""
    if isinstance(ref, int) and not isinstance(ref, bool):
        if ref not in engine.CARDS:
            raise KeyError(f"no card with id {ref} in the pool")
        return ref
    try:
        return _BY_NAME[ref]
    except KeyError:
        raise KeyError(f"no card named {ref!r} in the pool") from None


def card(ref: CardRef) -> engine.Card:
    """The :class:`engine.Card` behind a name or id."""
    return engine.CARDS[card_id(ref)]


def own(slot: int) -> int:
    """Play target of the mover's own board slot."""
    return TARGET_OWN_SLOT + slot


def enemy(slot: int) -> int:
    """Play target of the opponent's board slot."""
    return TARGET_ENEMY_SLOT + slot


def play(hand_slot: int, target: int = NONE) -> int:
    """Action id: play ``hand_slot`` at play target ``target``."""
    return engine.play_action(hand_slot, target)


def attack(attacker_slot: int, enemy_slot: int | None = None) -> int:
    """Action id: attack with own ``attacker_slot`` the enemy hero (``None``) or ``enemy_slot``."""
    return engine.attack_action(attacker_slot, 0 if enemy_slot is None else 1 + enemy_slot)


def creature(ref: CardRef, *, attack: int | None = None, health: int | None = None,
             max_health: int | None = None, keywords: Iterable[str] | None = None,
             sick: bool = False, attacked: bool = False) -> dict[str, Any]:
    """A board creature spec (no uid yet). Defaults: the card's printed stats and keywords,
    not sick, not yet attacked; ``max_health`` defaults to ``max(printed health, health)``."""
    c = card(ref)
    if not c.is_creature:
        raise ValueError(f"{c.name} is not a creature")
    hp = c.health if health is None else health
    return {
        "card_id": c.id,
        "attack": c.attack if attack is None else attack,
        "health": hp,
        "max_health": max(c.health, hp) if max_health is None else max_health,
        "keywords": engine.cards.mask_to_keywords(c.keywords) if keywords is None else
        [k for k in engine.KEYWORDS if k in set(keywords)],
        "sick": sick,
        "attacked": attacked,
    }


def _player_dict(base: dict[str, Any], spec: dict[str, Any], next_uid: int) -> tuple[dict[str, Any], int]:
    known = {"hero_health", "max_mana", "mana", "fatigue", "deck", "hand", "board"}
    unknown = set(spec) - known
    if unknown:
        raise KeyError(f"unknown player field(s) {sorted(unknown)}; use {sorted(known)}")
    out = dict(base)
    out["hero_health"] = spec.get("hero_health", engine.HERO_HEALTH)
    out["max_mana"] = spec.get("max_mana", 10)
    out["mana"] = spec.get("mana", out["max_mana"])
    out["fatigue"] = spec.get("fatigue", 0)
    deck = spec.get("deck", [FILLER_CARD] * FILLER_DECK_SIZE)
    out["deck"] = [card_id(c) for c in reversed(list(deck))]  # engine: top of deck = last
    out["hand"] = [card_id(c) for c in spec.get("hand", [])]
    board_spec = list(spec.get("board", []))
    if len(board_spec) > engine.actions.BOARD_SLOTS:
        raise ValueError(f"a board has {engine.actions.BOARD_SLOTS} slots, got {len(board_spec)} entries")
    board: list[dict[str, Any] | None] = [None] * engine.actions.BOARD_SLOTS
    for slot, entry in enumerate(board_spec):
        if entry is None:
            continue
        c = creature(entry) if isinstance(entry, (str, int)) else dict(entry)
        c["uid"] = next_uid
        next_uid += 1
        board[slot] = c
    out["board"] = board
    return out, next_uid


def make_state(p1: dict[str, Any] | None = None, p2: dict[str, Any] | None = None, *, active: int = 1,
               turn: int | None = None, seed: int = 7) -> engine.State:
    """A validated position: ``active`` is to move at global turn ``turn``.

    Player 1 is the starting player, so by default ``turn`` is 9 when player 1 is active and
    10 when player 2 is (far from the turn limit, consistent with who started).
    """
    base = engine.new_battle(seed, starting_player=1).to_dict()
    next_uid = 1
    players = []
    for i, spec in enumerate((p1 or {}, p2 or {})):
        pd, next_uid = _player_dict(base["players"][i], spec, next_uid)
        players.append(pd)
    base["players"] = players
    base["next_uid"] = next_uid
    base["active_player"] = active
    base["turn"] = turn if turn is not None else (9 if active == 1 else 10)
    return engine.State.from_dict(base)


def snapshot(state: engine.State) -> dict[str, Any]:
    """Full comparable form of a state (to check that a refused action changed nothing)."""
    return state.to_dict()


def board(state: engine.State, player: int) -> list[dict[str, Any] | None]:
    """A player's board slots as plain dicts (None for empty slots)."""
    return state.to_dict()["players"][player - 1]["board"]


def side(state: engine.State, player: int) -> dict[str, Any]:
    """A player's full serialized side (hero_health, mana, deck, hand, board, ...)."""
    return state.to_dict()["players"][player - 1]


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The events of one type, in order."""
    return [e for e in events if e["type"] == kind]


def types(events: list[dict[str, Any]]) -> list[str]:
    """The sequence of event types."""
    return [e["type"] for e in events]


def play_targets(state: engine.State, hand_slot: int) -> set[int]:
    """Play targets (0..14) legal now for the card in ``hand_slot``."""
    lo = engine.PLAY_BASE + hand_slot * engine.actions.PLAY_TARGETS
    return {a - lo for a in state.legal_actions() if lo <= a < lo + engine.actions.PLAY_TARGETS}


def attack_targets(state: engine.State, attacker_slot: int) -> set[int | None]:
    """Enemy slots (None = hero) the creature in ``attacker_slot`` may attack now."""
    lo = engine.ATTACK_BASE + attacker_slot * engine.actions.ATTACK_TARGETS
    return {None if a == lo else a - lo - 1 for a in state.legal_actions()
            if lo <= a < lo + engine.actions.ATTACK_TARGETS}
