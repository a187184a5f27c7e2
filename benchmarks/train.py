"""Training and benchmark throughput, and the issue-7 acceptance figures; prints one JSON object.

    .venv/bin/python -m benchmarks.train [--battles N] [--pairs P] [--acceptance-pairs Q]

1. collects ``--battles`` greedy-vs-greedy battles (run_series, 2 workers) and materializes
   them (materialize_v5_dataset);
2. trains the default policy (train_policy): training decisions/s per epoch (imitated
   decisions with a choice, i.e. the ones that carry a gradient), val/test top-1;
3. benchmark throughput, model vs model (the trained policy against a second one trained
   with another seed), every pair played (no early stop), batched ONNX inference, at 1 and
   2 worker processes; plus the same battles with batch size 1 (one battle at a time) for
   comparison;
4. acceptance (issue 7): the trained policy against baseline:random and baseline:greedy on
   ``--acceptance-pairs`` pairs each: win rate >= 0.90 and score >= 0.40.
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
from extrarlhf.policies.benchmarking import benchmark_models, pair_jobs, play_battles, side_plan
from extrarlhf.runtime.series import run_series
from extrarlhf.training import train_policy


def unbatched_rate(checkpoints: Path, pairs: int) -> float:
    """Battles/s when each battle is played alone (a session.run per decision)."""
    ck = str(checkpoints.absolute())
    sides = {s: side_plan(s, ck) for s in ("bc", "bc-seed1")}
    jobs = pair_jobs("bc", "bc-seed1", "unbatched", 0, range(pairs))
    start = time.perf_counter()
    for job in jobs:
        play_battles(sides, [job])
    return len(jobs) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--battles", type=int, default=400, help="greedy-vs-greedy battles to train on")
    parser.add_argument("--pairs", type=int, default=300, help="pairs of the model-vs-model throughput runs")
    parser.add_argument("--acceptance-pairs", type=int, default=200, help="pairs against each baseline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="extrarlhf-bench-train-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        run_series(root / "sessions", "gg", args.battles, p1_model="baseline:greedy", opponent="baseline:greedy",
                   seed=0, max_workers=2)
        collect_s = time.perf_counter() - t0
        made = materialize_v5_dataset(["gg"], "gg", sessions_dir=root / "sessions", datasets_dir=root / "datasets")
        ck = root / "checkpoints"
        trained = train_policy("gg", "bc", 0, datasets_dir=root / "datasets", checkpoints_dir=ck)
        train_policy("gg", "bc-seed1", 1, datasets_dir=root / "datasets", checkpoints_dir=ck)
        throughput = {}
        for workers in (1, 2):
            report = benchmark_models("bc", "bc-seed1", n_pairs=args.pairs, baseline_pairs=0, stop_early=False,
                                      max_workers=workers, checkpoints_dir=ck, write=False)
            throughput[f"battles_per_s_{workers}_worker{'s' if workers > 1 else ''}"] = report["battles_per_s"]
            throughput[f"battles_{workers}"] = report["battles_played"]
        throughput["battles_per_s_unbatched_1_worker"] = round(unbatched_rate(ck, min(args.pairs, 25)), 1)
        vs_random = benchmark_models("bc", "baseline:random", n_pairs=args.acceptance_pairs, baseline_pairs=0,
                                     stop_early=False, seed=11, max_workers=2, checkpoints_dir=ck, write=False)
        vs_greedy = benchmark_models("bc", "baseline:greedy", n_pairs=args.acceptance_pairs, baseline_pairs=0,
                                     stop_early=False, seed=12, max_workers=2, checkpoints_dir=ck, write=False)
    final = trained["final"]
    figures = {
        "benchmark": "train",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "data": {"matchup": "baseline:greedy vs baseline:greedy", "battles": made["row_counts"]["battles"],
                 "decisions": made["row_counts"]["decisions"], "collect_seconds": round(collect_s, 2),
                 "train_split": trained["data"]["train"]},
        "training": {"hyperparameters": trained["hyperparameters"],
                     "decisions_per_s_per_epoch": trained["decisions_per_s_per_epoch"],
                     "seconds": trained["seconds"], "val_top1": final["val_top1"], "test_top1": final.get("test_top1"),
                     "note": "decisions = imitated decisions with more than one legal action, one torch thread"},
        "benchmark_throughput": {"matchup": "bc vs bc-seed1 (both v5 ONNX, batched inference)",
                                 "pairs": args.pairs, **throughput,
                                 "speedup_2_workers": round(throughput["battles_per_s_2_workers"]
                                                            / throughput["battles_per_s_1_worker"], 3)},
        "acceptance": {"pairs_each": args.acceptance_pairs,
                       "win_rate_vs_random": vs_random["match"]["win_rate"],
                       "score_vs_greedy": round(vs_greedy["match"]["score"], 4),
                       "elo_vs_greedy": round(vs_greedy["match"]["elo"], 1),
                       "elo_ci95_vs_greedy": [round(x, 1) for x in vs_greedy["match"]["elo_ci95"]],
                       "targets": {"win_rate_vs_random": 0.9, "score_vs_greedy": 0.4}},
    }
    figures["acceptance"]["targets_met"] = (figures["acceptance"]["win_rate_vs_random"] >= 0.9
                                            and figures["acceptance"]["score_vs_greedy"] >= 0.4)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
