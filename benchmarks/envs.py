"""Gymnasium env throughput on one core, beside the raw engine; prints one JSON object.

    .venv/bin/python -m benchmarks.envs [--seconds S] [--rounds R]

The learner is a masked random agent (a legal id of ``info["action_mask"]`` drawn with the
engine's ``SplitMix64``, as the raw engine figure draws its actions); the
opponent is ``baseline:random`` or ``baseline:greedy``. Per configuration: ``env_steps_per_s``
(learner ``step`` calls, resets included in the time) and ``engine_actions_per_s`` (every
engine action the env applied: the learner's and the opponent's). The raw engine figure is
``benchmarks.engine``'s: random legal actions applied with ``legal_actions`` + ``apply``.
These figures are on the Python engine (``EXTRAARENA_ENGINE=python``), where issue 19 set its
target: the env at least 0.5x the raw engine with the random opponent, compared
action for action (``ratio_engine_actions``); ``ratio_env_steps`` compares learner steps with
raw engine steps, which charges the env for the opponent's actions too. The raw engine and the
envs are measured in interleaved rounds (each ratio against its own round's raw figure) and
the medians are reported, so a load change on a shared machine does not land on one side only;
every rate is per second of this process's CPU time (``time.process_time``), so the time other
processes hold the cores is not charged to either side.

``backends`` (issue 48): the Gymnasium single env and the PettingZoo AEC env (``aec.env()``, the
learner as player 1 drawing from the mask, ``GreedyPolicy`` moving for player 2 through the
env's ``step``) against ``baseline:greedy``, learner steps per CPU-second with
``EXTRAARENA_ENGINE=python`` and ``=native`` in interleaved rounds, and their ratio (target >= 4).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from typing import Callable

import gymnasium as gym

import extrarlhf.envs  # noqa: F401  (registers ExtraArena-v1)
from adapters.baselines import GreedyPolicy
from benchmarks.engine import _timed, random_steps
from benchmarks.engine_native import backend
from engine import SplitMix64
from engine import backend as engine_backend
from extrarlhf.envs import ENV_ID, aec


def _cpu_timed(fn: Callable[[int], int], min_seconds: float) -> tuple[int, float]:
    """``benchmarks.engine._timed`` on this process's CPU time."""
    return _timed(fn, min_seconds, time.process_time)


def _env_run(env: gym.Env, seconds: float) -> dict[str, float]:
    rng = SplitMix64(0)
    counts = {"steps": 0, "actions": 0}

    def episode(i: int) -> int:
        _, info = env.reset(seed=i)
        counts["actions"] += len(info["opponent_actions"])
        done = False
        while not done:
            legal = info["action_mask"].nonzero()[0]  # np.flatnonzero costs about 3x more on 163 values
            _, _, done, _, info = env.step(int(legal[rng.below(len(legal))]))
            counts["steps"] += 1
            counts["actions"] += 1 + len(info["opponent_actions"])
        return 1

    episodes, elapsed = _cpu_timed(episode, seconds)
    return {"episodes_per_s": episodes / elapsed, "env_steps_per_s": counts["steps"] / elapsed,
            "engine_actions_per_s": counts["actions"] / elapsed}


def _aec_vs_greedy(seconds: float) -> float:
    """Learner (player 1) steps per CPU-second of aec.env() with GreedyPolicy as player 2."""
    env, greedy, rng = aec.env(), GreedyPolicy(), SplitMix64(0)
    steps = {"n": 0}

    def episode(i: int) -> int:
        env.reset(seed=i)
        for agent in env.agent_iter():
            obs, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
            elif agent == "player_2":
                env.step(greedy.act(env.unwrapped.battle))
            else:
                legal = obs["action_mask"].nonzero()[0]
                env.step(int(legal[rng.below(len(legal))]))
                steps["n"] += 1
        return 1

    _, elapsed = _cpu_timed(episode, seconds)
    return steps["n"] / elapsed


def _backends(seconds: float, rounds: int) -> dict:
    """The single env and the AEC env vs greedy on both backends, interleaved; medians and ratios."""
    runs: dict[str, dict[str, list[float]]] = {k: {"python": [], "native": []} for k in ("gym_single", "aec")}
    for _ in range(rounds):
        for name in ("python", "native"):
            with backend(name):
                env = gym.make(ENV_ID, opponent="baseline:greedy")
                runs["gym_single"][name].append(_env_run(env, seconds)["env_steps_per_s"])
                runs["aec"][name].append(_aec_vs_greedy(seconds))
    out = {}
    for key, by in runs.items():
        python, native = statistics.median(by["python"]), statistics.median(by["native"])
        out[f"{key}_vs_greedy"] = {"python_learner_steps_per_cpu_s": round(python),
                                   "native_learner_steps_per_cpu_s": round(native),
                                   "ratio_native_vs_python": round(native / python, 2)}
    out["target"] = "ratio_native_vs_python >= 4 for both"
    out["target_met"] = all(v["ratio_native_vs_python"] >= 4 for k, v in out.items() if k.endswith("_vs_greedy"))
    return out


CONFIGS = {
    "random_opponent": dict(opponent="baseline:random"),
    "greedy_opponent": dict(opponent="baseline:greedy"),
    "random_opponent_dict_observation": dict(opponent="baseline:random", observation_mode="dict"),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0, help="minimum CPU time per figure and round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of (raw engine, each env); figures and ratios are the medians over them")
    args = parser.parse_args()
    envs = {name: gym.make(ENV_ID, **kwargs) for name, kwargs in CONFIGS.items()}
    raws: list[float] = []
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in CONFIGS}
    for _ in range(args.rounds):  # interleaved, so a load change on a shared machine hits both sides
        with backend("python"):  # issue 19's target is the env against the raw Python engine
            steps, t_steps = _cpu_timed(random_steps, args.seconds)
        raws.append(steps / t_steps)
        for name, env in envs.items():
            with backend("python"):
                result = _env_run(env, args.seconds)
            result["ratio_engine_actions"] = result["engine_actions_per_s"] / raws[-1]
            result["ratio_env_steps"] = result["env_steps_per_s"] / raws[-1]
            runs[name].append(result)
    figures: dict = {"benchmark": "envs", "python": platform.python_version(), "machine": platform.machine(),
                     "rounds": args.rounds, "raw_engine_steps_per_s": round(statistics.median(raws)),
                     "env": "gym.make('ExtraArena-v1', ...) with its wrappers",
                     "engine_backend": "python (issue 19's target; the native backend is in 'backends')"}
    for name, results in runs.items():
        figures[name] = {key: round(statistics.median(r[key] for r in results), 3 if key.startswith("ratio") else 1)
                         for key in results[0]}
    figures["target"] = "random_opponent.ratio_engine_actions >= 0.5"
    figures["target_met"] = figures["random_opponent"]["ratio_engine_actions"] >= 0.5
    if engine_backend.load_native() is not None:
        figures["backends"] = _backends(args.seconds, args.rounds)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
