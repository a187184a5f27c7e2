"""The arena-1 rules in C++ (issue 26 phase 1, DESIGN 16): byte-identical to ``engine``.

Verified by tests/engine/test_native_differential.py (the rules) and test_native_policies.py
(the greedy and random baselines and the search actor over a baseline, which
adapters.baselines.GreedyPolicy and adapters.search.SearchPolicy use on the native backend via
``from_state``). The Python engine (``engine``) stays the reference: the card table comes from
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
import orjson

import engine
from engine import views
from engine.cards import AREA_SCOPES, EFFECTS, KEYWORD_BIT, TARGET_RULES

from . import _core
from ._core import ACTION_SPACE_SIZE, State

__all__ = ["ACTION_SPACE_SIZE", "State", "determinize", "evaluate", "from_state", "greedy_act",
           "information_set_digest", "new_battle", "play_greedy_battles", "play_random_battles", "random_act",
           "search"]


def _pool_rows() -> list[tuple[int, ...]]:
    """engine.CARDS as the tuples _core.set_card_pool reads (enum values = index in engine.cards' tuples)."""
    return [(card.id, card.is_creature, card.cost, card.attack, card.health, card.keywords,
             0 if card.effect is None else 1 + EFFECTS.index(card.effect), TARGET_RULES.index(card.target),
             card.amount, card.buff_attack, card.buff_health, KEYWORD_BIT.get(card.keyword, 0),
             0 if card.scope is None else 1 + AREA_SCOPES.index(card.scope))
            for card in engine.CARDS.values()]


def _view_card_rows() -> list[tuple[int, str, str, str]]:
    """Each card's fixed parts of engine.views' player view, printed by orjson itself (so the
    core's information-set JSON escapes names and texts exactly as orjson does): the name, and
    the members of {"hand_slot": h, **card_json(id)} sorted before and after "hand_slot"."""
    rows = []
    for card_id, card in engine.CARDS.items():
        fields = views.card_json(card_id)
        parts = [orjson.dumps({k: v for k, v in fields.items() if (k < "hand_slot") == before},
                              option=orjson.OPT_SORT_KEYS).decode()[1:-1] for before in (True, False)]
        rows.append((card_id, orjson.dumps(card.name).decode(), parts[0], parts[1]))
    return rows


_core.set_card_pool(_pool_rows())
_core._set_view_cards(_view_card_rows())


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


def evaluate(state: Any, player: int) -> float:
    """adapters.baselines.evaluate on the core, for an engine.State or an engine_native.State."""
    return _core._evaluate(state, player)


def greedy_act(state: Any) -> int:
    """adapters.baselines.GreedyPolicy.act on the core (an engine.State is converted as from_state does)."""
    return _core._greedy_act(state)


def random_act(state: Any, rng: engine.SplitMix64) -> int:
    """RandomPolicy.act on the core: legal[rng.below(len(legal))], advancing ``rng`` as the Python draw does."""
    action, rng.state = _core._random_act(state, rng.state)
    return action


def determinize(state: Any, player: int, rng: engine.SplitMix64) -> State:
    """adapters.search.determinize on the core: the same world, and ``rng`` advanced the same."""
    world, rng.state = _core._determinize(state, player, rng.state)
    return world


def information_set_digest(state: Any, player: int) -> str:
    """adapters.search.information_set_digest computed in the core (the same sha256 hex)."""
    return _core._information_set_digest(state, player)


def search(state: Any, search_seed: int, sims: int, rollout: str,
           rollout_rng: engine.SplitMix64 | None = None) -> tuple[int, list[int], list[float | None]]:
    """SearchPolicy.decide's search (adapters/search.py) for the player to move, in the core.

    ``search_seed`` seeds the search's generator (SearchPolicy derives it from its seed and the
    information-set digest); ``rollout`` is ``"greedy"`` or ``"random"``, whose generator
    ``rollout_rng`` (RandomPolicy.rng) is advanced exactly as the Python rollouts would. Returns
    the chosen action and, per legal action in order, the visits and the mean leaf value (None
    where unvisited; not rounded). One call is one decision: a cancellable caller checks between calls.
    """
    random = rollout == "random"
    if random and rollout_rng is None:
        raise ValueError("a random rollout needs its generator (rollout_rng)")
    action, visits, means, after = _core._search(state, search_seed, sims, rollout,
                                                 rollout_rng.state if random else None)
    if random:
        rollout_rng.state = after
    return action, visits, means


def play_greedy_battles(seeds: Iterable[int], hashes: bool = False) -> dict[str, list]:
    """Whole greedy-vs-greedy battles inside the core, one per seed (0..2**64-1): battle ``s`` is
    ``new_battle(s)`` with GreedyPolicy moving for both sides. Returns what play_random_battles does."""
    return _core.play_greedy_battles([int(s) for s in seeds], hashes)


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
