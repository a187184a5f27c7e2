"""The env's fast paths give exactly what the reference code gives.

``engine.features.observation`` (one observation, joined from cached bytes: what the envs
call at every step) must be byte-identical to the batch ``observations`` (what traces and
training record), and both to the observations of the implementation before the fast path
(pinned as a sha256 over seeded battles). The Gymnasium env computes the learner's mask once
per decision point: ``info["action_mask"]`` and ``action_masks()`` are that one array.
"""

from __future__ import annotations

import hashlib

import gymnasium as gym
import numpy as np
import pytest

import engine
import extrarlhf.envs  # noqa: F401  (registers ExtraArena-v1)
from adapters import make_baseline
from engine import OBS_DIM, features
from engine.actions import HAND_LIMIT
from extrarlhf.envs import ENV_ID

# sha256 of state.observation(p).tobytes() for p = 1, 2 at every state of the battles below,
# computed with the implementation before the single-observation fast path (8474 observations).
PINNED_DIGEST = "a8b049ac872f88caf5955cca43283e8acb63a313c8010028dfeb1c03d95e0b60"


def _battle_states(seed: int) -> list[engine.State]:
    names = ("random", "greedy") if seed % 3 == 0 else ("random", "random")
    state = engine.new_battle(seed)
    players = [make_baseline(name, seed * 10 + i) for i, name in enumerate(names)]
    states = [state.clone()]
    while not state.is_terminal:
        state.apply(players[state.active].act(state))
        states.append(state.clone())
    return states


def test_single_observation_is_byte_identical_to_the_batch_and_the_pinned_digest() -> None:
    digest, count, full_hands, full_boards = hashlib.sha256(), 0, 0, 0
    for seed in range(60):
        for state in _battle_states(seed):
            batch = features.observations([(state, 1), (state, 2)])
            for p in (1, 2):
                obs = state.observation(p)
                assert obs.dtype == np.float32 and obs.shape == (OBS_DIM,) and obs.flags.writeable
                assert obs.tobytes() == batch[p - 1].tobytes(), (seed, state.turn, p)
                digest.update(obs.tobytes())
                count += 1
            full_hands += any(len(pl.hand) == HAND_LIMIT for pl in state.players)
            full_boards += any(pl.board.count(None) == 0 for pl in state.players)
    assert count == 8474
    assert full_hands and full_boards, "the battles reach a full hand and a full board (the edge rows)"
    assert digest.hexdigest() == PINNED_DIGEST


def test_single_observation_refuses_a_bad_player() -> None:
    state = engine.new_battle(1)
    for bad in (0, 3, None):
        with pytest.raises(ValueError, match="player must be 1 or 2"):
            state.observation(bad)


def test_observations_are_fresh_arrays_a_learner_may_modify() -> None:
    env = gym.make(ENV_ID, opponent="baseline:random")
    first, info = env.reset(seed=3)
    kept = first.copy()
    first[:] = 0.5  # a learner normalizing in place must not change what the env computes next
    state = env.unwrapped.battle
    assert np.array_equal(state.observation(1), kept)
    legal = np.flatnonzero(info["action_mask"])
    second, *_ = env.step(int(legal[0]))
    assert second is not first and np.array_equal(second, env.unwrapped.battle.observation(1))


@pytest.mark.parametrize("observation_mode", ["vector", "dict"])
def test_the_mask_is_computed_once_per_decision_point(observation_mode: str) -> None:
    env = gym.make(ENV_ID, opponent="baseline:random", observation_mode=observation_mode)
    obs, info = env.reset(seed=4)
    rng = np.random.default_rng(4)
    done, steps = False, 0
    while not done:
        mask = env.action_masks()
        assert mask is info["action_mask"], "one array per decision point, not rebuilt per call"
        if observation_mode == "dict":
            assert mask is obs["action_mask"]
        assert np.array_equal(mask, env.unwrapped.battle.legal_action_mask().astype(np.int8))
        obs, _, done, _, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        assert env.action_masks() is not mask, "a new decision point has a new mask"
        steps += 1
    assert steps > 10 and not env.action_masks().any() and env.action_masks() is info["action_mask"]
