"""Engine throughput on one core; prints one JSON object.

    .venv/bin/python -m benchmarks.engine [--seconds S]

Figures: engine steps/s (legal_actions + apply, random legal choices), random-vs-random and
greedy-vs-greedy full battles/s, clones/s, observations/s, action-feature rows/s and the
serialized state size. Targets from issue 2: >= 20,000 steps/s, >= 300 random battles/s.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import engine
from adapters import make_baseline
from engine import SplitMix64


def _timed(fn, min_seconds: float, clock=time.perf_counter) -> tuple[int, float]:
    """Run ``fn(i)`` (returns a work count) until ``min_seconds`` of ``clock`` have passed
    (``time.process_time``: this process's CPU time, so other processes' load is not counted)."""
    done, i, start = 0, 0, clock()
    while True:
        done += fn(i)
        i += 1
        elapsed = clock() - start
        if elapsed >= min_seconds:
            return done, elapsed


def random_steps(seed: int, new_battle=engine.new_battle) -> int:
    """One random battle (both sides draw from ``SplitMix64(seed)``); ``new_battle`` picks the
    engine (benchmarks/engine_native.py passes the native core's)."""
    state = new_battle(seed)
    rng = SplitMix64(seed)
    steps = 0
    while not state.is_terminal:
        legal = state.legal_actions()
        state.apply(legal[rng.below(len(legal))])
        steps += 1
    return steps


def baseline_battle(name: str, seed: int) -> int:
    state = engine.new_battle(seed)
    policies = (make_baseline(name, 2 * seed), make_baseline(name, 2 * seed + 1))
    while not state.is_terminal:
        state.apply(policies[state.active].act(state))
    return 1


def sample_states(n: int) -> list[engine.State]:
    states, seed = [], 0
    while len(states) < n:
        state = engine.new_battle(seed)
        rng = SplitMix64(seed)
        while not state.is_terminal and len(states) < n:
            states.append(state.clone())
            legal = state.legal_actions()
            state.apply(legal[rng.below(len(legal))])
        seed += 1
    return states


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0, help="minimum time per figure")
    args = parser.parse_args()
    s = args.seconds

    steps, t_steps = _timed(random_steps, s)
    random_battles, t_random = _timed(lambda i: random_steps(10_000 + i) and 1, s)
    greedy_battles, t_greedy = _timed(lambda i: baseline_battle("greedy", i), s)
    states = sample_states(2000)
    clones, t_clone = _timed(lambda i: (states[i % len(states)].clone(), 1)[1], s / 2)
    obs, t_obs = _timed(lambda i: (states[i % len(states)].observation(1 + i % 2), 1)[1], s / 2)
    live = [st for st in states if not st.is_terminal]
    rows, t_feat = _timed(lambda i: len(live[i % len(live)].action_features()), s / 2)
    sizes = [len(st.canonical_json().encode()) for st in states]

    figures = {
        "benchmark": "engine",
        "ruleset": engine.RULESET,
        "engine_version": engine.ENGINE_VERSION,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "steps_per_s": round(steps / t_steps),
        "random_battles_per_s": round(random_battles / t_random, 1),
        "greedy_battles_per_s": round(greedy_battles / t_greedy, 1),
        "clones_per_s": round(clones / t_clone),
        "observations_per_s": round(obs / t_obs),
        "action_feature_rows_per_s": round(rows / t_feat),
        "state_json_bytes": {"mean": round(statistics.mean(sizes)), "max": max(sizes)},
        "targets": {"steps_per_s": 20_000, "random_battles_per_s": 300},
    }
    figures["targets_met"] = (figures["steps_per_s"] >= 20_000 and figures["random_battles_per_s"] >= 300)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
