"""The native core's observation and action features (native/src/features.cc) against
engine/features.py: the same float32 bytes on every state of 300 random and 12 greedy
battles, for both players and every action id; and engine.features on the native backend
(which converts the state and computes in the core) gives the Python bytes too.

Skipped only when engine_native is not built; under `make test` (RLHF_REQUIRE_NATIVE=1) a
missing build is a failure."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import reference
from adapters.baselines import GreedyPolicy
from extrarlhf.datasets.battles import _legal_lists  # how materialize reads replay_features' legal sets
from engine import ACTION_FEATURE_DIM, ACTION_SPACE_SIZE, OBS_DIM, SplitMix64, features
from tests.native_helpers import require_native

engine_native = require_native()

ALL_IDS = list(range(ACTION_SPACE_SIZE))


@pytest.fixture
def python_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference: engine.features computes in Python."""
    monkeypatch.setenv("EXTRAARENA_ENGINE", "python")


def _check_state(py: engine.State, nat, all_ids: bool) -> int:
    for player in (1, 2):
        expected = features.observation(py, player)
        got = nat.observation(player)
        assert got.dtype == np.float32 and got.shape == (OBS_DIM,)
        assert got.tobytes() == expected.tobytes(), (py.state_hash(), player, np.flatnonzero(got != expected)[:5])
    ids = ALL_IDS if all_ids else py.legal_actions()
    expected = features.action_features(py, ids)
    got = nat.action_features(ids)
    assert got.shape == (len(ids), ACTION_FEATURE_DIM) and got.tobytes() == expected.tobytes(), \
        (py.state_hash(), np.argwhere(got != expected)[:5])
    if not py.is_terminal:
        assert nat.action_features().tobytes() == features.action_features(py, py.legal_actions()).tobytes()
    return 2 + len(ids)


def test_random_battles_identical_feature_bytes(python_engine: None) -> None:
    checked = 0
    for seed in range(300):
        py, nat, rng = reference.new_battle(seed), engine_native.new_battle(seed), SplitMix64(seed)
        step = 0
        while True:
            checked += _check_state(py, nat, all_ids=step % 10 == 0 or py.is_terminal)
            if py.is_terminal:
                break
            legal = py.legal_actions()
            action = legal[rng.below(len(legal))]
            py.apply(action)
            nat.apply(action)
            step += 1
    assert checked > 300 * 100


def test_greedy_battles_identical_feature_bytes(python_engine: None) -> None:
    policy = GreedyPolicy()
    for seed in range(12):
        py, nat = reference.new_battle(1000 + seed), engine_native.new_battle(1000 + seed)
        while not py.is_terminal:
            _check_state(py, nat, all_ids=False)
            action = policy.act(py)
            py.apply(action)
            nat.apply(action)
        _check_state(py, nat, all_ids=True)


def test_engine_features_on_the_native_backend_match_python(monkeypatch: pytest.MonkeyPatch) -> None:
    states = []
    for seed in range(20):
        s, rng = reference.new_battle(seed), SplitMix64(seed)
        while not s.is_terminal:
            states.append(s.clone())
            legal = s.legal_actions()
            s.apply(legal[rng.below(len(legal))])
    items = [(s, 1 + k % 2) for k, s in enumerate(states)]

    def run() -> tuple[bytes, list[bytes], list[bytes]]:
        return (features.observations(items).tobytes(), [s.observation(p).tobytes() for s, p in items],
                [s.action_features().tobytes() for s in states])

    monkeypatch.setenv("EXTRAARENA_ENGINE", "python")
    expected = run()
    monkeypatch.setenv("EXTRAARENA_ENGINE", "native")
    assert engine.backend.native() is engine_native
    assert run() == expected


def test_engine_features_take_native_states_on_the_native_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    py, nat = reference.new_battle(6), engine_native.new_battle(6)
    monkeypatch.setenv("EXTRAARENA_ENGINE", "native")
    got = features.observations([(nat, 1), (nat, 2)]).tobytes(), features.action_features(nat, [0, 5]).tobytes()
    monkeypatch.setenv("EXTRAARENA_ENGINE", "python")
    assert got == (features.observations([(py, 1), (py, 2)]).tobytes(), features.action_features(py, [0, 5]).tobytes())


def test_a_state_beyond_the_core_falls_back_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    data = reference.new_battle(3).to_dict()
    data["players"][0]["fatigue"] = 2 ** 60  # valid for the Python engine, beyond the core's range
    state = reference.from_dict(data)
    monkeypatch.setenv("EXTRAARENA_ENGINE", "python")
    expected = (features.observations([(state, 1)]).tobytes(), state.action_features(ALL_IDS).tobytes())
    monkeypatch.setenv("EXTRAARENA_ENGINE", "native")
    assert (features.observations([(state, 1)]).tobytes(), state.action_features(ALL_IDS).tobytes()) == expected


@pytest.mark.parametrize("player", [0, 3, None, "1"])
def test_bad_player_is_refused_with_the_reference_message(player: object) -> None:
    nat, py = engine_native.new_battle(1), reference.new_battle(1)
    with pytest.raises(ValueError) as native_error:
        nat.observation(player)
    with pytest.raises(ValueError) as python_error:
        features.observation(py, player)
    assert str(native_error.value) == str(python_error.value) == f"player must be 1 or 2, got {player!r}"


@pytest.mark.parametrize("ids", [[-1], [163], [0, "2"], [1.5]])
def test_bad_action_ids_are_refused(ids: list) -> None:
    nat = engine_native.new_battle(1)
    with pytest.raises(ValueError, match=r"action_features: .* is not an action id \(an integer 0\.\.162\)"):
        nat.action_features(ids)
    assert nat.action_features(np.array([0, 162])).shape == (2, ACTION_FEATURE_DIM)  # numpy ids are fine


def test_replay_features_is_the_step_by_step_replay_in_one_call(python_engine: None) -> None:
    """State.replay_features (materialize's replay): the legal sets and the feature bytes of
    the Python engine stepping the same actions, the final state's hash, the start left as it
    was; it stops before an action that is not legal there, and a non-int ends it the same way."""
    for seed in range(40):
        py, rng = reference.new_battle(seed), SplitMix64(seed)
        start = engine_native.new_battle(seed)
        actions, legal, parts = [], [], []
        while not py.is_terminal:
            ids = py.legal_actions()
            legal.append(ids)
            parts.append(features.action_features(py, ids).tobytes())
            actions.append(ids[rng.below(len(ids))])
            py.apply(actions[-1])
        before = start.state_hash()
        data, offsets, ids, after = start.replay_features(actions)
        assert _legal_lists((offsets, ids)) == legal and data == b"".join(parts) and after.state_hash() == py.state_hash()
        assert start.state_hash() == before and start.version == 0
        cut = len(actions) // 2
        illegal = next(a for a in range(ACTION_SPACE_SIZE) if a not in legal[cut])
        for bad in (illegal, -1, ACTION_SPACE_SIZE, True, 2.0, np.int64(actions[cut])):
            data, offsets, ids, after = start.replay_features(actions[:cut] + [bad] + actions[cut + 1:])
            assert _legal_lists((offsets, ids)) == legal[:cut] and data == b"".join(parts[:cut]), bad
    with pytest.raises(TypeError, match="actions must be a list"):
        start.replay_features((0, 1))
