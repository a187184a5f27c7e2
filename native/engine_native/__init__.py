"""The arena-1 rules in C++ (issue 26 phase 1, DESIGN 16): byte-identical to ``engine``.

Built, verified by tests/engine/test_native_differential.py, and not yet used by the engine
API. The Python engine (``engine``) stays the reference: the card table comes from
``engine.CARDS`` (so ``engine/cards.json`` is the one source), and bad input is refused with
the reference's own errors and messages.

    import engine_native
    state = engine_native.new_battle(7)
    state.apply(state.legal_actions()[0])   # events, as engine.State.apply returns them
    engine.State.from_dict(state.to_dict()).state_hash() == state.state_hash()
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

import engine
from engine.cards import AREA_SCOPES, EFFECTS, KEYWORD_BIT, TARGET_RULES

from . import _core
from ._core import ACTION_SPACE_SIZE, State

__all__ = ["ACTION_SPACE_SIZE", "State", "from_state", "new_battle", "play_random_battles"]


def _pool_rows() -> list[tuple[int, ...]]:
    """engine.CARDS as the tuples _core.set_card_pool reads (enum values = index in engine.cards' tuples)."""
    return [(card.id, card.is_creature, card.cost, card.attack, card.health, card.keywords,
             0 if card.effect is None else 1 + EFFECTS.index(card.effect), TARGET_RULES.index(card.target),
             card.amount, card.buff_attack, card.buff_health, KEYWORD_BIT.get(card.keyword, 0),
             0 if card.scope is None else 1 + AREA_SCOPES.index(card.scope))
            for card in engine.CARDS.values()]


_core.set_card_pool(_pool_rows())


def new_battle(seed: int, p1_deck: Any = None, p2_deck: Any = None, starting_player: int | None = None) -> State:
    """engine.new_battle on the native core: the same battle for the same arguments."""
    seed_ok = not isinstance(seed, bool) and isinstance(seed, (int, np.integer))
    start_ok = starting_player is None or (not isinstance(starting_player, bool) and starting_player in (1, 2))
    if not (seed_ok and start_ok):
        engine.new_battle(seed, p1_deck, p2_deck, starting_player)  # raises the reference's error
        raise AssertionError(f"engine.new_battle accepted arguments engine_native refuses: {seed!r}, "
                             f"{starting_player!r}")
    decks = [None if deck is None else list(engine.validate_deck(deck, f"p{i + 1}_deck"))
             for i, deck in enumerate((p1_deck, p2_deck))]
    return _core._new_battle(str(int(seed)), decks[0], decks[1], 0 if starting_player is None else int(starting_player))


def from_state(state: engine.State) -> State:
    """A native copy of a Python ``engine.State``: every rules field (seed, decks, generator
    state, uid counter, turn, winner, both players' heroes, mana, fatigue, hands, decks in draw
    order and boards), read attribute by attribute with no JSON and no re-validation (an
    engine.State is valid by construction). ``last_events`` is not carried over (it starts
    empty). A state holding an integer beyond the core's -2**48..2**48 (only an extreme
    ``from_dict`` makes one) is a StateFormatError; use the Python engine for it."""
    if type(state) is not engine.State:
        raise TypeError(f"engine_native.from_state needs an engine.State, got {type(state).__name__}")
    return _core._from_state(state)


def play_random_battles(seeds: Iterable[int], hashes: bool = False) -> dict[str, list]:
    """Whole random battles inside the core, one per seed (0..2**64-1).

    Battle ``s`` is ``new_battle(s)`` (seeded decks and starting player) played by both sides
    with one generator ``SplitMix64(s)``: each step takes ``legal[rng.below(len(legal))]``,
    as benchmarks/engine.py's ``random_steps(s)`` does on the Python engine. Returns lists
    ``winner``, ``end_reason``, ``turn``, ``steps``, ``hero_health`` (pairs) and, with
    ``hashes``, each final ``state_hash``.
    """
    return _core.play_random_battles([int(s) for s in seeds], hashes)
from . import batch  # noqa: E402  (the batched API, engine_native.batch.BattleBatch)
