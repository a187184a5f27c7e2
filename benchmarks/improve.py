"""The search teacher against baseline:greedy; prints one JSON object.

    .venv/bin/python -m benchmarks.improve [--pairs N] [--sims S] [--rollout SPEC] [--workers W]

Figures:

* the search actor ``search:<rollout>?sims=S`` (default ``search:baseline:greedy?sims=32``)
  against ``baseline:greedy`` over ``N`` paired battles with seats swapped, played by
  ``benchmark_models`` itself (the same code path as the MCP tool; no early stop, no baseline
  side matches): W/D/L, score with its 95% interval, Elo with its interval, battles/s;
* ``search_decisions_per_s``: the search's decisions per second on one core, over real
  mid-battle states (greedy self-play positions), one decision at a time.

Target from issue 18: score >= 0.70 over 400 pairs.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time

import engine
from adapters import GreedyPolicy
from extrarlhf.benchmarking import benchmark_models
from extrarlhf.runtime.actors import resolve_actor

TARGET_SCORE = 0.70


def greedy_states(n: int) -> list[engine.State]:
    """Mid-battle states of greedy self-play with more than one legal action."""
    states: list[engine.State] = []
    seed, greedy = 0, GreedyPolicy()
    while len(states) < n:
        state = engine.new_battle(seed)
        while not state.is_terminal and len(states) < n:
            if len(state.legal_actions()) > 1:
                states.append(state.clone())
            state.apply(greedy.act(state))
        seed += 1
    return states


def decisions_per_s(spec: str, checkpoints_dir: str, n: int) -> float:
    states = greedy_states(n)
    actor = resolve_actor(spec, "model", checkpoints_dir)
    policy = actor.make_policy(0)
    start = time.perf_counter()
    for state in states:
        policy.decide(state)
    return round(n / (time.perf_counter() - start), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=400, help="paired battles (each seed played from both seats)")
    parser.add_argument("--sims", type=int, default=32)
    parser.add_argument("--rollout", default="baseline:greedy", help="rollout policy: a baseline or checkpoint spec")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--decision-states", type=int, default=200, help="states timed for decisions/s")
    parser.add_argument("--checkpoints", default=None, help="checkpoints dir (for a checkpoint rollout policy)")
    args = parser.parse_args()
    spec = f"search:{args.rollout}?sims={args.sims}"
    with tempfile.TemporaryDirectory() as tmp:
        checkpoints_dir = args.checkpoints or tmp
        speed = decisions_per_s(spec, checkpoints_dir, args.decision_states)
        report = benchmark_models(spec, "baseline:greedy", n_pairs=args.pairs, seed=args.seed, baseline_pairs=0,
                                  stop_early=False, max_workers=args.workers, checkpoints_dir=checkpoints_dir,
                                  write=False)
    match = report["match"]
    print(json.dumps({
        "benchmark": "improve", "python": platform.python_version(), "machine": platform.machine(),
        "candidate": spec, "incumbent": "baseline:greedy", "pairs": args.pairs, "seed": args.seed,
        "valid": report["valid"], "invalid_reasons": report["invalid_reasons"],
        "wins": match.get("wins"), "draws": match.get("draws"), "losses": match.get("losses"),
        "score": match["score"], "score_ci95": match["score_ci95"], "elo": match["elo"], "elo_ci95": match["elo_ci95"],
        "battles_per_s": report["battles_per_s"], "workers": report["settings"]["max_workers"],
        "search_decisions_per_s": speed,
        "target_score": TARGET_SCORE, "target_met": bool(match["score"] is not None and match["score"] >= TARGET_SCORE
                                                         and args.pairs >= 400),
    }, indent=2))


if __name__ == "__main__":
    main()
