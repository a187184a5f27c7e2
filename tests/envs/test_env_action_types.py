"""The forms of an action id ``step`` takes (extrarlhf/envs/actions.py), on the Gymnasium
single-seat env (``gym.make("ExtraArena-v1")``), the PettingZoo AEC env and the vector env.

Each accepted form steps exactly as the plain int (observation bytes, reward, termination,
mask and state hash at every step); each refused form raises an IllegalActionError naming
what was got, with the state, the mask and the agent to move unchanged, and the env steps on
exactly as an env that never saw the bad value."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from engine import ACTION_SPACE_SIZE, IllegalActionError
from extrarlhf.envs import ENV_ID, ArenaAECEnv, ArenaVectorEnv
from tests.native_helpers import native_or_none

ACCEPTED: dict[str, Callable[[int], Any]] = {
    "np.int64": np.int64, "np.int32": np.int32, "np.int8": np.int8, "np.uint8": np.uint8,
    "np.uint64": np.uint64,
    "0-d array": np.array,
    "(1,) array": lambda a: np.array([a]),
    "(1,) int32 array": lambda a: np.array([a], np.int32),
    "(1, 1) array": lambda a: np.array([[a]]),
    "(1, 1, 1) uint16 array": lambda a: np.array([[[a]]], np.uint16),
}

ACCEPTED_WORDS = r"action must be an action id 0\.\.162 as a Python int, a numpy integer scalar or a numpy integer array"
REFUSED: list[tuple[str, Any, str]] = [
    ("integral float", 3.0, r"got float 3\.0; floats are refused even when integral"),
    ("np.float32", np.float32(0), r"got a numpy float32 scalar \(np\.float32\(0\.0\)\); floats are refused"),
    ("float array", np.array([0.0]), r"got a numpy array of dtype float64 and shape \(1,\) \(1 element\); floats"),
    ("bool", True, r"got bool True"),
    ("np.bool_", np.bool_(False), r"got a numpy bool scalar"),
    ("bool array", np.array([[True]]), r"got a numpy array of dtype bool and shape \(1, 1\) \(1 element\)"),
    ("string", "0", r"got str '0'"),
    ("None", None, r"got NoneType None; None is only for PettingZoo's done agents"),
    ("two ids", np.array([0, 0]), r"got a numpy array of dtype int64 and shape \(2,\) \(2 elements\)"),
    ("(1, 2) array", np.zeros((1, 2), np.int32), r"got a numpy array of dtype int32 and shape \(1, 2\) \(2 elements\)"),
    ("empty array", np.array([], np.int64), r"shape \(0,\) \(0 elements\)"),
    ("object array", np.array([0], object), r"got a numpy array of dtype object and shape \(1,\)"),
    ("list", [0], r"got list \[0\]; pass the id itself"),
    ("tuple", (0,), r"got tuple \(0,\); pass the id itself"),
]


def _gym(**kwargs: Any) -> gym.Env:
    env = gym.make(ENV_ID, **kwargs)
    env.reset(seed=5)
    return env


def _gym_snapshot(env: gym.Env) -> tuple:
    return env.unwrapped.battle.state_hash(), env.unwrapped.action_masks().tobytes()


def _gym_outcome(result: tuple) -> tuple:
    obs, reward, terminated, truncated, info = result
    return (obs.tobytes(), reward, terminated, truncated, info["action_mask"].tobytes(), info["turn"],
            info["opponent_actions"], info.get("illegal_action"))


def _first_illegal(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask == 0)[0])


@pytest.mark.parametrize("form", list(ACCEPTED.values()), ids=list(ACCEPTED))
def test_gym_accepted_forms_step_as_the_plain_int(form: Callable[[int], Any]) -> None:
    plain, other = _gym(), _gym()
    rng = np.random.default_rng(0)
    for _ in range(25):
        action = int(rng.choice(np.flatnonzero(plain.unwrapped.action_masks())))
        a, b = plain.step(action), other.step(form(action))
        assert _gym_outcome(a) == _gym_outcome(b)
        assert _gym_snapshot(plain) == _gym_snapshot(other)
        if a[2]:
            break


@pytest.mark.parametrize("illegal_action", ["penalize", "raise"])
def test_gym_array_ids_keep_the_illegal_action_modes(illegal_action: str) -> None:
    """An illegal-now id or an id outside 0..162 given as a one-element array: as the plain int."""
    plain, other = _gym(illegal_action=illegal_action), _gym(illegal_action=illegal_action)
    illegal = _first_illegal(plain.unwrapped.action_masks())
    if illegal_action == "penalize":
        a, b = plain.step(illegal), other.step(np.array([illegal]))
        assert b[1] == -1.0 and b[2] is True and "legal" in b[4]["illegal_action"]
        assert _gym_outcome(a) == _gym_outcome(b) and _gym_snapshot(plain) == _gym_snapshot(other)
    else:
        with pytest.raises(IllegalActionError) as plain_error:
            plain.step(illegal)
        before = _gym_snapshot(other)
        with pytest.raises(IllegalActionError) as array_error:
            other.step(np.array([[illegal]], np.int16))
        assert str(array_error.value) == str(plain_error.value) and _gym_snapshot(other) == before
    fresh = _gym(illegal_action=illegal_action)
    before = _gym_snapshot(fresh)
    with pytest.raises(IllegalActionError, match=r"action id 500 is outside the action space 0\.\.162; legal action ids now"):
        fresh.step(np.array([500]))  # not an id at all: raises in both modes, as the int 500 does
    assert _gym_snapshot(fresh) == before


@pytest.mark.parametrize("illegal_action", ["penalize", "raise"])
@pytest.mark.parametrize("name, action, message", REFUSED, ids=[r[0] for r in REFUSED])
def test_gym_refused_forms_raise_saying_what_was_got(name: str, action: Any, message: str,
                                                     illegal_action: str) -> None:
    env, twin = _gym(illegal_action=illegal_action), _gym(illegal_action=illegal_action)
    before = _gym_snapshot(env)
    with pytest.raises(IllegalActionError, match=r"^ArenaGymEnv learner \(player 1\): " + ACCEPTED_WORDS) as error:
        env.step(action)
    assert re.search(message, str(error.value)), str(error.value)
    assert str(error.value).endswith(f"legal action ids now: {env.unwrapped.battle.legal_actions()}")
    assert _gym_snapshot(env) == before
    legal = int(np.flatnonzero(env.unwrapped.action_masks())[0])
    assert _gym_outcome(env.step(legal)) == _gym_outcome(twin.step(legal))  # nothing was lost


def _aec() -> ArenaAECEnv:
    env = ArenaAECEnv()
    env.reset(seed=3)
    return env


def _aec_snapshot(env: ArenaAECEnv) -> tuple:
    observations = tuple(env.observe(agent)[key].tobytes() for agent in env.possible_agents
                         for key in ("observation", "action_mask"))
    return (env.battle.state_hash(), env.agent_selection, observations, dict(env.rewards),
            dict(env._cumulative_rewards), dict(env.terminations))


@pytest.mark.parametrize("form", list(ACCEPTED.values()), ids=list(ACCEPTED))
def test_aec_accepted_forms_step_as_the_plain_int(form: Callable[[int], Any]) -> None:
    plain, other = _aec(), _aec()
    rng = np.random.default_rng(1)
    for _ in range(40):
        if plain.terminations[plain.agent_selection]:
            break
        action = int(rng.choice(np.flatnonzero(plain.observe(plain.agent_selection)["action_mask"])))
        plain.step(action)
        other.step(form(action))
        assert _aec_snapshot(plain) == _aec_snapshot(other)


def test_aec_array_ids_keep_the_illegal_action_rule() -> None:
    plain, other = _aec(), _aec()
    illegal = _first_illegal(plain.observe(plain.agent_selection)["action_mask"])
    with pytest.raises(IllegalActionError) as plain_error:
        plain.step(illegal)
    before = _aec_snapshot(other)
    with pytest.raises(IllegalActionError) as array_error:
        other.step(np.array([illegal], np.uint8))
    assert str(array_error.value) == str(plain_error.value) and "legal" in str(array_error.value)
    with pytest.raises(IllegalActionError, match=r"action id 163 is outside the action space 0\.\.162"):
        other.step(np.array(ACTION_SPACE_SIZE))
    assert _aec_snapshot(other) == before


@pytest.mark.parametrize("name, action, message", REFUSED, ids=[r[0] for r in REFUSED])
def test_aec_refused_forms_raise_saying_what_was_got(name: str, action: Any, message: str) -> None:
    env, twin = _aec(), _aec()
    before = _aec_snapshot(env)
    agent = env.agent_selection
    with pytest.raises(IllegalActionError, match=rf"^{agent} \(player \d\): " + ACCEPTED_WORDS) as error:
        env.step(action)
    assert re.search(message, str(error.value)), str(error.value)
    assert _aec_snapshot(env) == before
    legal = int(np.flatnonzero(env.observe(agent)["action_mask"])[0])
    env.step(legal)
    twin.step(legal)
    assert _aec_snapshot(env) == _aec_snapshot(twin)  # nothing was lost


def test_aec_done_agents_still_step_with_none() -> None:
    env = _aec()
    rng = np.random.default_rng(2)
    while not env.terminations[env.agent_selection]:
        env.step(int(rng.choice(np.flatnonzero(env.observe(env.agent_selection)["action_mask"]))))
    while env.agents:
        env.step(None)
    assert env.agents == []


@pytest.mark.parametrize("engine_name", ["native", "python"])
def test_vector_env_refuses_the_same_forms_before_stepping(monkeypatch: pytest.MonkeyPatch, engine_name: str) -> None:
    """The vector env takes one integer id per battle, of any integer width; floats, bools and
    other shapes raise (a ValueError; IllegalActionError for a non-integer dtype, as the single
    env) naming what was got, and nothing is stepped."""
    if engine_name == "native" and native_or_none() is None:
        pytest.skip("engine_native is not built")
    monkeypatch.setenv("EXTRAARENA_ENGINE", engine_name)

    def fresh() -> ArenaVectorEnv:
        env = ArenaVectorEnv(2, opponent="baseline:greedy")
        env.reset(seed=4)
        assert env.backend == engine_name
        return env

    env, twin = fresh(), fresh()
    before = env.action_masks().tobytes()
    for actions, error, message in [
        (np.zeros(2, np.float64), IllegalActionError, r"integer action ids 0\.\.162 .*got dtype float64"),
        (np.array([True, False]), IllegalActionError, r"integer action ids 0\.\.162 .*got dtype bool"),
        (np.zeros((2, 1), np.int64), ValueError, r"one action id per battle, shape \(2,\); got shape \(2, 1\)"),
        (np.array([0]), ValueError, r"shape \(2,\); got shape \(1,\)"),
    ]:
        with pytest.raises(error, match=message):
            env.step(actions)
        assert env.action_masks().tobytes() == before
    ids = np.array([np.flatnonzero(m)[0] for m in env.action_masks()])
    a, b = env.step(ids.astype(np.uint8)), twin.step(ids)  # any integer width steps as int64
    assert all(np.array_equal(x, y) for x, y in zip(a[:4], b[:4]))
