"""Data collection throughput with full V5 traces on disk; prints one JSON object.

    .venv/bin/python -m benchmarks.collect [--battles N]

Figures: greedy-vs-greedy battles/s without traces (in-process duels), with full traces on
1 and 2 worker processes (run_series into a temp sessions dir), the ratio traced/untraced on
one worker, the 2-worker speed-up and bytes per battle. Targets (issue 3): ratio >= 0.5 and
speed-up >= 1.7.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from adapters import make_baseline
from extrarlhf.runtime.duel import play_duel
from extrarlhf.runtime.series import run_series, series_seed


def untraced_rate(n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        play_duel(series_seed(0, i), make_baseline("greedy"), make_baseline("greedy"))
    return n / (time.perf_counter() - start)


def traced_rate(n: int, workers: int, root: Path) -> tuple[float, int]:
    group = f"bench-w{workers}"
    start = time.perf_counter()
    run_series(root, group, n, p1_model="baseline:greedy", opponent="baseline:greedy", seed=0, max_workers=workers)
    rate = n / (time.perf_counter() - start)
    size = sum(f.stat().st_size for f in (root / group / "battles").rglob("*.jsonl*"))  # plain or .zst
    return rate, size // n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--battles", type=int, default=1000,
                        help="battles per figure (enough to amortize the worker start-up)")
    args = parser.parse_args()
    n = args.battles
    with tempfile.TemporaryDirectory(prefix="extrarlhf-bench-") as tmp:
        root = Path(tmp)
        untraced = untraced_rate(n)
        one, bytes_per_battle = traced_rate(n, 1, root)
        two, _ = traced_rate(n, 2, root)
    figures = {
        "benchmark": "collect",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "battles": n,
        "matchup": "baseline:greedy vs baseline:greedy",
        "untraced_battles_per_s": round(untraced, 1),
        "traced_battles_per_s_1_worker": round(one, 1),
        "traced_battles_per_s_2_workers": round(two, 1),
        "traced_over_untraced_1_worker": round(one / untraced, 3),
        "speedup_2_workers": round(two / one, 3),
        "bytes_per_battle": bytes_per_battle,
        "targets": {"traced_over_untraced_1_worker": 0.5, "speedup_2_workers": 1.7},
    }
    figures["targets_met"] = (figures["traced_over_untraced_1_worker"] >= 0.5 and figures["speedup_2_workers"] >= 1.7)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
