"""Trainer equivalence: val/test top-1 and training decisions/s of ``train_policy`` on one
teacher dataset and seed; prints one JSON object.

    .venv/bin/python -m benchmarks.train_equivalence [--battles 300] [--keep DIR]

Collects ``--battles`` battles of the improvement loop's teacher
(``search:baseline:greedy?sims=32`` as player 1 against ``baseline:greedy``, seed 7, the native
engine), materializes them, then trains with the defaults twice: as the loop does (imitate
``search``, target ``search_values``, batch 128) and imitating every decision's choice with
batch 256. ``train_policy``'s signature is the same before and after the PyTorch trainer, so
the script measures the numpy trainer too when run on an older checkout, e.g.
``git worktree add /tmp/old 3866373 && (cd /tmp/old && PYTHONPATH=/tmp/old python -m
benchmarks.train_equivalence --keep /tmp/eq)`` (the same ``--keep`` folder reuses the data).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

from extrarlhf.datasets import materialize_v5_dataset
from extrarlhf.runtime.series import run_series
from extrarlhf.training import train_policy

TEACHER = "search:baseline:greedy?sims=32"
RUNS = (("search", "search_values", 128), ("all", "choice", 256))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--battles", type=int, default=300)
    parser.add_argument("--keep", help="collect into (or reuse) this folder instead of a temporary one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="extrarlhf-bench-eq-") as tmp:
        root = Path(args.keep or tmp)
        run_series(root / "sessions", "teach", args.battles, p1_model=TEACHER, opponent="baseline:greedy", seed=7)
        if not (root / "datasets" / "teach").exists():
            materialize_v5_dataset(["teach"], "teach", sessions_dir=root / "sessions", datasets_dir=root / "datasets")
        runs = {}
        for imitate, target, batch in RUNS:
            t0 = time.perf_counter()
            r = train_policy("teach", f"eq-{imitate}", 0, imitate=imitate, target=target, batch_size=batch,
                             datasets_dir=root / "datasets", checkpoints_dir=Path(tmp) / "ck", overwrite=True)
            rates = r["decisions_per_s_per_epoch"]
            runs[f"{imitate}/{target}/batch{batch}"] = {
                "val_top1": r["final"]["val_top1"], "test_top1": r["final"]["test_top1"],
                "val_loss": r["final"]["val_loss"], "test_loss": r["final"]["test_loss"],
                "train_decisions": r["history"][0]["train_decisions"], "decisions_per_s_per_epoch": rates,
                "decisions_per_s_median": statistics.median(rates), "wall_seconds": round(time.perf_counter() - t0, 2),
                "weights_hash": r["weights_hash"],
                "trainer": "torch" if "device" in r["hyperparameters"] else "numpy"}  # device came with torch
    print(json.dumps({"benchmark": "train_equivalence", "python": platform.python_version(),
                      "data": {"teacher": TEACHER, "opponent": "baseline:greedy", "battles": args.battles, "seed": 7},
                      "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
