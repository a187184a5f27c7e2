"""Issue 48 (DESIGN 16.1): every surface that steps battles one at a time steps a state on the
native core when the backend is native (the Gymnasium single env, the PettingZoo AEC env, the
duel and match loops behind series, benchmarks, MCP and arena play, the production replay), and
on the Python engine when EXTRAARENA_ENGINE=python. What they produce is the same either way
(the differential suites and the trace tests run on both backends)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

import engine
from adapters.baselines import GreedyPolicy, RandomPolicy
from engine import backend
from engine.native_state import NativeState
from extrarlhf.envs import ENV_ID, aec
from extrarlhf.runtime.duel import play_duel
from extrarlhf.runtime.match import start_match
from extrarlhf.runtime.sessions import SessionStore
from tests.native_helpers import require_native

require_native()


@pytest.fixture(params=["native", "python"])
def backend_name(request, monkeypatch) -> str:
    monkeypatch.setenv("EXTRAARENA_ENGINE", request.param)
    return request.param


def on_core(state: engine.State, name: str) -> bool:
    assert isinstance(state, engine.State)
    return isinstance(state, NativeState) == (name == "native")


def test_the_envs_and_the_loops_step_the_backends_state(backend_name, tmp_path: Path):
    assert backend.name() == backend_name
    env = gym.make(ENV_ID, opponent="baseline:greedy")
    env.reset(seed=4)
    env.step(0)
    assert on_core(env.unwrapped._state, backend_name)
    pz = aec.env()
    pz.reset(seed=4)
    assert on_core(pz.unwrapped.battle, backend_name)
    assert on_core(engine.new_battle(4), backend_name)
    assert on_core(engine.State.from_dict(engine.new_battle(4).to_dict()), backend_name)
    assert on_core(engine.new_battle(4).clone(), backend_name)
    match = start_match(SessionStore(tmp_path / "sessions"), "g", "llm", seed=4)
    assert on_core(match.state, backend_name)
    result = play_duel(9, GreedyPolicy(), RandomPolicy(3))
    assert result.winner is not None


def test_a_duel_is_the_same_battle_on_both_backends(monkeypatch):
    results = {}
    for name in ("python", "native"):
        monkeypatch.setenv("EXTRAARENA_ENGINE", name)
        results[name] = [play_duel(seed, GreedyPolicy(), RandomPolicy(seed)) for seed in range(6)]
    assert results["python"] == results["native"]
