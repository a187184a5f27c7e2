"""The native core's policy half (issue 26, DESIGN 16): ``engine_native.from_state``, the
greedy and random baselines and the search actor over a baseline, against the Python
reference (adapters/baselines.py, adapters/search.py) decision by decision.

Skipped only when engine_native is not built; under `make test` (RLHF_REQUIRE_NATIVE=1) a
missing build is a failure. Bigger runs: benchmarks/engine_native.py --verify-greedy/--verify-search."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine
from engine import SplitMix64

try:
    import engine_native
except ImportError as exc:
    if os.environ.get("RLHF_REQUIRE_NATIVE") == "1":
        raise RuntimeError(f"RLHF_REQUIRE_NATIVE=1 (make test) but engine_native is not importable ({exc}); "
                           "run `make setup` and read .venv/native-build.log") from None
    pytest.skip(f"engine_native is not built ({exc}); `make setup` builds it (needs a C++ compiler)",
                allow_module_level=True)


def continue_both(py: engine.State, seed: int, where: str) -> int:
    """Converts ``py`` with from_state, then plays both to the end with the same seeded random
    actions: identical legal actions, events and state hashes at every step. Returns the steps."""
    nat = engine_native.from_state(py)
    assert nat.to_dict() == py.to_dict() and nat.state_hash() == py.state_hash(), f"{where}: from_state differs"
    assert nat.last_events == []
    rng, steps = SplitMix64(seed), 0
    while not py.is_terminal:
        legal = py.legal_actions()
        assert nat.legal_actions() == legal, f"{where} +{steps}: legal actions differ"
        action = legal[rng.below(len(legal))]
        assert nat.apply(action) == py.apply(action), f"{where} +{steps}: events differ"
        assert nat.state_hash() == py.state_hash(), f"{where} +{steps}: state hashes differ"
        steps += 1
    assert (nat.is_terminal, nat.winner, nat.end_reason, nat.turn) == (True, py.winner, py.end_reason, py.turn)
    return steps


# ------------------------------------------------------------------ from_state
def test_from_state_along_random_battles_continues_identically():
    """States taken at every stage of 150 random battles (the opening, the middle, the last
    move, the end), each converted and played on to the end on both engines."""
    rng, steps = SplitMix64(26), 0
    for seed in range(150):
        py = engine.new_battle(seed)
        cut = rng.below(120)
        for _ in range(cut):
            if py.is_terminal:
                break
            legal = py.legal_actions()
            py.apply(legal[rng.below(len(legal))])
        steps += continue_both(py, seed, f"seed {seed} after {cut} steps")
    assert steps > 3000


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(-2**70, 2**70), p1=st.integers(0, 2**64 - 1), start=st.sampled_from([None, 1, 2]),
       cut=st.integers(0, 150))
def test_hypothesis_from_state_keeps_seed_decks_and_generator(seed, p1, start, cut):
    py = engine.new_battle(seed, engine.random_deck(SplitMix64(p1)), None, start)
    rng = SplitMix64(p1)
    for _ in range(cut):
        if py.is_terminal:
            break
        legal = py.legal_actions()
        py.apply(legal[rng.below(len(legal))])
    nat = engine_native.from_state(py)
    assert (nat.seed, nat.decks, nat.starting_player, nat.next_uid) == \
        (py.seed, tuple(map(tuple, py.decks)), py.starting_player, py.next_uid)
    continue_both(py, p1, f"seed {seed}")


def test_from_state_refuses_what_the_core_cannot_hold_and_non_states():
    data = engine.new_battle(3).to_dict()
    data["players"][0]["hero_health"] = -2**60  # from_dict has no lower bound on hero health
    extreme = engine.State.from_dict(data)
    with pytest.raises(engine.StateFormatError, match="outside the native engine core's range"):
        engine_native.from_state(extreme)
    with pytest.raises(TypeError, match="needs an engine.State, got dict"):
        engine_native.from_state(data)
    with pytest.raises(TypeError, match="needs an engine.State, got State"):
        engine_native.from_state(engine_native.new_battle(1))
