"""Gymnasium env throughput on one core, beside the raw engine; prints one JSON object.

    .venv/bin/python -m benchmarks.envs [--seconds S]

The learner is a masked random agent (a legal id of ``info["action_mask"]`` drawn with the
engine's ``SplitMix64``, as the raw engine figure draws its actions); the
opponent is ``baseline:random`` or ``baseline:greedy``. Per configuration: ``env_steps_per_s``
(learner ``step`` calls, resets included in the time) and ``engine_actions_per_s`` (every
engine action the env applied: the learner's and the opponent's). The raw engine figure is
``benchmarks.engine``'s: random legal actions applied with ``legal_actions`` + ``apply``.
Issue 19's target: the env at least 0.5x the raw engine with the random opponent, compared
action for action (``ratio_engine_actions``); ``ratio_env_steps`` compares learner steps with
raw engine steps, which charges the env for the opponent's actions too.
"""

from __future__ import annotations

import argparse
import json
import platform

import gymnasium as gym
import numpy as np

import extrarlhf.envs  # noqa: F401  (registers ExtraArena-v1)
from benchmarks.engine import _timed, random_steps
from engine import SplitMix64
from extrarlhf.envs import ENV_ID


def _env_run(env: gym.Env, seconds: float) -> dict[str, float]:
    rng = SplitMix64(0)
    counts = {"steps": 0, "actions": 0}

    def episode(i: int) -> int:
        _, info = env.reset(seed=i)
        counts["actions"] += len(info["opponent_actions"])
        done = False
        while not done:
            legal = np.flatnonzero(info["action_mask"])
            _, _, done, _, info = env.step(int(legal[rng.below(len(legal))]))
            counts["steps"] += 1
            counts["actions"] += 1 + len(info["opponent_actions"])
        return 1

    episodes, elapsed = _timed(episode, seconds)
    return {"episodes_per_s": round(episodes / elapsed, 1), "env_steps_per_s": round(counts["steps"] / elapsed),
            "engine_actions_per_s": round(counts["actions"] / elapsed)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0, help="minimum time per figure")
    args = parser.parse_args()
    steps, t_steps = _timed(random_steps, args.seconds)
    raw = round(steps / t_steps)
    configs = {
        "random_opponent": dict(opponent="baseline:random"),
        "greedy_opponent": dict(opponent="baseline:greedy"),
        "random_opponent_dict_observation": dict(opponent="baseline:random", observation_mode="dict"),
    }
    figures: dict = {"benchmark": "envs", "python": platform.python_version(), "machine": platform.machine(),
                     "raw_engine_steps_per_s": raw, "env": "gym.make('ExtraArena-v1', ...) with its wrappers"}
    for name, kwargs in configs.items():
        result = _env_run(gym.make(ENV_ID, **kwargs), args.seconds)
        result["ratio_engine_actions"] = round(result["engine_actions_per_s"] / raw, 3)
        result["ratio_env_steps"] = round(result["env_steps_per_s"] / raw, 3)
        figures[name] = result
    figures["target"] = "random_opponent.ratio_engine_actions >= 0.5"
    figures["target_met"] = figures["random_opponent"]["ratio_engine_actions"] >= 0.5
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
