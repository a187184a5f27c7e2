"""Cost of the policy ladder; prints one JSON object.

    .venv/bin/python -m benchmarks.ladder [--battles N] [--pairs P] [--workers W]

Collects ``--battles`` greedy-vs-greedy battles, trains two default-size policies (seeds 0
and 1), promotes them in a chain (the first against the first-promotion rule's incumbent,
the second against the first, under a core-only PromotionPolicy with ``min_elo0=-400`` so
that two policies of similar strength make a chain), then times ``policy_ladder``: the first
call measures every rung against both baselines (``--pairs`` pairs each), the second is
served from ``ladder.json`` (no battle played).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from extrarlhf.datasets import materialize_v5_dataset
from extrarlhf.policies.benchmarking import benchmark_models
from extrarlhf.policies.ladder import policy_ladder
from extrarlhf.policies.promotion import PromotionPolicy, current_incumbent, promote_checkpoint
from extrarlhf.runtime.series import run_series
from extrarlhf.training import train_policy


def _elo(figure: dict) -> str | None:
    ci = figure.get("elo_ci95")
    return None if figure.get("elo") is None else f"{figure['elo']:+.0f} [{ci[0]:+.0f}, {ci[1]:+.0f}]"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--battles", type=int, default=100, help="greedy-vs-greedy battles to train on")
    parser.add_argument("--pairs", type=int, default=100, help="ladder pairs against each baseline")
    parser.add_argument("--workers", type=int, default=1, help="ladder worker processes")
    args = parser.parse_args()
    loose = PromotionPolicy(min_elo0=-400.0)
    with tempfile.TemporaryDirectory(prefix="extrarlhf-bench-ladder-") as tmp:
        root = Path(tmp)
        run_series(root / "sessions", "gg", args.battles, p1_model="baseline:greedy", opponent="baseline:greedy",
                   seed=0, max_workers=2)
        materialize_v5_dataset(["gg"], "gg", sessions_dir=root / "sessions", datasets_dir=root / "datasets")
        ck = root / "checkpoints"
        for name, seed in (("first", 0), ("second", 1)):
            train_policy("gg", name, seed, epochs=3, datasets_dir=root / "datasets", checkpoints_dir=ck)
            report = benchmark_models(name, current_incumbent(ck), n_pairs=200, seed=seed, elo0=-400.0,
                                      elo1=-300.0, baseline_pairs=0, checkpoints_dir=ck, policy=loose)
            if not report["passed"]:
                raise SystemExit(f"{name} did not pass its benchmark: {report['verdict']}")
            promote_checkpoint(name, checkpoints_dir=ck, policy=loose)
        t0 = time.perf_counter()
        first = policy_ladder(ck, pairs=args.pairs, max_workers=args.workers)
        measured_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        second = policy_ladder(ck, pairs=args.pairs, max_workers=args.workers)
        cached_s = time.perf_counter() - t0
    print(json.dumps({
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "rungs": len(first["rungs"]), "pairs": args.pairs, "workers": args.workers,
        "first_call": {"seconds": round(measured_s, 2), "measurements": first["measured"],
                       "battles": first["battles_played"],
                       "battles_per_s": round(first["battles_played"] / measured_s, 1),
                       "seconds_per_rung": round(measured_s / max(len(first["rungs"]), 1), 2)},
        "second_call": {"seconds": round(cached_s, 3), "measurements": second["measured"],
                        "cached": second["cached"], "battles": second["battles_played"]},
        "ladder": [{"rung": r["rung"], "name": r["name"], "vs_predecessor": _elo(r["vs_predecessor"]),
                    "cumulative": _elo(r["cumulative"]), "vs_random": _elo(r["vs_baselines"]["baseline:random"]),
                    "vs_greedy": _elo(r["vs_baselines"]["baseline:greedy"])} for r in first["rungs"]],
    }, indent=1))


if __name__ == "__main__":
    main()
