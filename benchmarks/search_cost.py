"""What a decision of each actor costs in CPU time (process time, so a machine shared with other
work changes it far less than wall time); prints one JSON object.

    .venv/bin/python -m benchmarks.search_cost --checkpoints DIR 'search:baseline:greedy?sims=32' \
        'search:<checkpoint>?sims=32&guide=mix' <checkpoint>

Per spec: ``decisions_per_cpu_s``, one decision at a time over ``--states`` greedy self-play
states (the best of three passes, after one warm-up decision), and ``benchmark_cpu_s``, the CPU
seconds of ``benchmark_models`` against ``baseline:greedy`` over ``--pairs`` pairs (one worker:
the battles side by side, so a guided search batches its network runs across them), with its
W-D-L. ``core`` says which engine_native ran (a core built with ``State.greedy_until`` plays the
guided search's rollouts itself).
"""

from __future__ import annotations

import argparse
import json
import time

import engine
from benchmarks.improve import greedy_states
from extrarlhf.policies.benchmarking import benchmark_models
from extrarlhf.runtime.actors import resolve_actor


def measure(spec: str, checkpoints: str, states: list[engine.State], pairs: int, seed: int) -> dict:
    policy = resolve_actor(spec, "model", checkpoints).make_policy(0)
    policy.decide(states[0])  # warm-up: sessions, the value graph
    passes = []
    for _ in range(3):
        started = time.process_time()
        for state in states:
            policy.decide(state)
        passes.append(time.process_time() - started)
    started = time.process_time()
    report = benchmark_models(spec, "baseline:greedy", n_pairs=pairs, seed=seed, baseline_pairs=0, stop_early=False,
                              checkpoints_dir=checkpoints, write=False)
    m = report["match"]
    return {"decisions_per_cpu_s": round(len(states) / min(passes), 1),
            "benchmark_cpu_s": round(time.process_time() - started, 2), "pairs": pairs,
            "wins": m["wins"], "draws": m["draws"], "losses": m["losses"], "valid": report["valid"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("specs", nargs="+", help="actor specs to measure")
    parser.add_argument("--checkpoints", default="checkpoints", help="checkpoint registry the specs resolve in")
    parser.add_argument("--states", type=int, default=200, help="states timed one decision at a time")
    parser.add_argument("--pairs", type=int, default=50, help="pairs of the timed benchmark against greedy")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    core = engine.backend.native()
    states = greedy_states(args.states)
    out = {"benchmark": "search_cost", "backend": engine.backend.name(),
           "core_has_greedy_until": bool(core is not None and hasattr(engine.new_battle(0)._core, "greedy_until")),
           "specs": {spec: measure(spec, args.checkpoints, states, args.pairs, args.seed) for spec in args.specs}}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
