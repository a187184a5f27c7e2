"""The arena-1 rules in C++ (issue 26, DESIGN 16): byte-identical to the Python engine (``engine``).

Verified by tests/engine/test_native_differential.py (the rules) and test_native_policies.py
(the greedy and random baselines and the search actor over a baseline). The Python engine
stays the reference and this package never imports it: ``engine.backend`` registers the card
table (``engine/cards.json`` is the one source), the player view's card texts, its error
classes and the reference functions whose words the core reuses, in one call
(:func:`register`), so bad input is refused with the reference's own errors and messages.
Use it through the engine: on the native backend ``engine.new_battle()`` and
``engine.State.from_dict()`` return states stepped here; ``engine.backend.load_native()``
returns this module registered (whatever ``EXTRAARENA_ENGINE`` says) for direct use:

    from engine import backend
    engine_native = backend.load_native()
    state = engine_native.new_battle(7)       # the raw core state (engine_native.State)
    state.apply(state.legal_actions()[0])      # events, as engine.State.apply returns them
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from . import _core
from ._core import ACTION_SPACE_SIZE, State, concat_columns, read_decisions, read_turns

__all__ = ["ACTION_SPACE_SIZE", "State", "action_json", "concat_columns", "describe_actions", "determinize", "evaluate", "from_state",
           "greedy_act", "information_set_digest", "model_inputs", "new_battle", "play_greedy_battles",
           "play_random_battles", "random_act", "read_decisions", "read_turns", "register", "search"]

_hooks: Any = None  # what engine.backend registered (see register)


def register(hooks: Any) -> None:
    """The Python engine's one registration call (engine.backend makes it when it loads the core).

    ``hooks`` has ``card_rows`` and ``view_card_rows`` (the card table and the player view's
    fixed card texts), ``describe_card_rows`` (each card's name, its text in action lines and
    whether it is a creature; without them :func:`describe_actions` and :func:`action_json`
    return None), the classes ``StateFormatError``, ``CardPoolError``,
    ``IllegalActionError`` and ``State``, and the reference functions ``check_action_id``,
    ``check_action_batch``, ``check_batch_seats``, ``validate_deck``, ``new_battle`` (the
    Python engine's, for its argument errors), ``explain_illegal``, ``normalize_dict`` and
    ``checked_dict``. Calling it again replaces them."""
    global _hooks
    _core._register(hooks)
    _core.set_card_pool(list(hooks.card_rows))
    _core._set_view_cards(list(hooks.view_card_rows))
    _core._set_describe_cards(list(getattr(hooks, "describe_card_rows", ())))
    _hooks = hooks


def hooks() -> Any:
    """What :func:`register` was given; a RuntimeError saying how to register before that."""
    if _hooks is None:
        raise RuntimeError("engine_native is not registered with the Python engine: get it through "
                           "engine.backend.native() or engine.backend.load_native(), which register the card table")
    return _hooks


def new_battle(seed: int, p1_deck: Any = None, p2_deck: Any = None, starting_player: int | None = None) -> State:
    """engine.new_battle on the native core: the same battle for the same arguments."""
    h = hooks()
    seed_ok = not isinstance(seed, bool) and isinstance(seed, (int, np.integer))
    start_ok = starting_player is None or (not isinstance(starting_player, bool) and starting_player in (1, 2))
    if not (seed_ok and start_ok):
        h.new_battle(seed, p1_deck, p2_deck, starting_player)  # raises the reference's error
        raise AssertionError(f"engine.new_battle accepted arguments engine_native refuses: {seed!r}, "
                             f"{starting_player!r}")
    decks = [None if deck is None else list(h.validate_deck(deck, f"p{i + 1}_deck"))
             for i, deck in enumerate((p1_deck, p2_deck))]
    return _core._new_battle(str(int(seed)), decks[0], decks[1], 0 if starting_player is None else int(starting_player))


def from_state(state: Any) -> State:
    """A native copy of a Python ``engine.State``: every rules field (seed, decks, generator
    state, uid counter, turn, winner, both players' heroes, mana, fatigue, hands, decks in draw
    order and boards), read attribute by attribute. Its slots are writable, so each field is
    checked against what ``engine.State.from_dict`` accepts; an edited field gets the
    reference's StateFormatError (the message from_dict gives for the state's to_dict).
    ``last_events`` is not carried over (it starts empty). A state holding an integer beyond
    the core's -2**48..2**48 (only an extreme ``from_dict`` makes one) is a StateFormatError
    saying so; use the Python engine for it."""
    return _core._from_state(state)


def _generator_state(rng: Any, what: str) -> int:
    """The 64-bit state of an engine.SplitMix64 (the object whose ``state`` the call advances)."""
    state = getattr(rng, "state", None)
    if isinstance(state, bool) or not isinstance(state, int) or not 0 <= state < 2**64:
        raise TypeError(f"{what} must be an engine.SplitMix64 (an object whose .state is an integer "
                        f"0..2**64-1), got {type(rng).__name__}")
    return state


def evaluate(state: Any, player: int) -> float:
    """adapters.baselines.evaluate on the core, for an engine.State (either backend) or an engine_native.State."""
    return _core._evaluate(state, player)


def greedy_act(state: Any) -> int:
    """adapters.baselines.GreedyPolicy.act on the core (an engine.State is converted as from_state does)."""
    return _core._greedy_act(state)


def random_act(state: Any, rng: Any) -> int:
    """RandomPolicy.act on the core: legal[rng.below(len(legal))], advancing ``rng`` (an
    engine.SplitMix64) as the Python draw does."""
    action, rng.state = _core._random_act(state, _generator_state(rng, "rng"))
    return action


def determinize(state: Any, player: int, rng: Any) -> State:
    """adapters.search.determinize on the core: the same world, and ``rng`` advanced the same."""
    world, rng.state = _core._determinize(state, player, _generator_state(rng, "rng"))
    return world


def describe_actions(state: State, action_ids: Any) -> list[str] | None:
    """engine.views.describe_actions for a native state, in the core: one readable line per
    action of the player to move. None (the caller then uses the Python reference, which
    checks the ids and words the error) unless ``action_ids`` is a list of ints 0..162 and
    every card on the state's hands and boards has registered texts."""
    return _core._describe_actions(state, action_ids)


def action_json(state: State, action_id: Any, description: str | None = None) -> dict[str, Any] | None:
    """engine.views.action_json for a native state, in the core (the same keys in the same
    order); None, as for :func:`describe_actions`, unless ``action_id`` is an int 0..162 and
    ``description`` a str or None."""
    return _core._action_json(state, action_id, description)


def information_set_digest(state: Any, player: int) -> str:
    """adapters.search.information_set_digest computed in the core (the same sha256 hex)."""
    return _core._information_set_digest(state, player)


def search(state: Any, search_seed: int, sims: int, rollout: str,
           rollout_rng: Any = None) -> tuple[int, list[int], list[float | None]]:
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
                                                 _generator_state(rollout_rng, "rollout_rng") if random else None)
    if random:
        rollout_rng.state = after
    return action, visits, means


def model_inputs(states: list[State]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[list[int]]]:
    """The feed of a v5 model for ``states`` (engine_native.State objects, each seen by its
    player to move), in one call: ``(obs [n, OBS_DIM], action_features [n, W,
    ACTION_FEATURE_DIM] zero-padded to the widest legal set W, counts [n], legal ids per state)``,
    the same bytes as adapters.onnx_models.build_inputs."""
    return _core._model_inputs(states)


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
