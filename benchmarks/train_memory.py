"""Peak memory of ``train_policy`` against the dataset's size; prints one JSON object.

    .venv/bin/python -m benchmarks.train_memory [--battles N] [--sizes 1,4,16] [--epochs E] [--keep DIR]

Collects ``max(sizes)`` groups of ``--battles`` baseline:greedy vs baseline:random battles
(run_series on the native engine; group ``gK`` has seed ``K``), materializes datasets of the
first 1, 4 and 16 groups (``x1``, ``x4``, ``x16``: the same battles plus more), then trains
the same settings on each in a fresh subprocess and reads that process's peak RSS
(``ru_maxrss`` from ``os.wait4``, one child per size). ``growth_16x_over_1x`` is the
figure of DESIGN 11.1 (target <= 1.3): a trainer that loads the decisions grows with them,
the streaming trainer holds a bounded shuffle buffer. ``import_rss_mb`` is a child that only
imports the trainer (the fixed part: torch, onnxruntime, the engine). ``--keep DIR`` reuses /
keeps the collected data there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from extrarlhf.datasets import materialize_v5_dataset
from extrarlhf.runtime.series import run_series

CHILD = """
import json, sys, time
from extrarlhf.training import train_policy
root, dataset, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = time.perf_counter()
if dataset != "-":
    r = train_policy(dataset, "mem-" + dataset, 0, epochs=epochs, datasets_dir=root + "/datasets",
                     checkpoints_dir=root + "/ck", overwrite=True)
    out = {"train_decisions": r["history"][0]["train_decisions"], "decisions_per_s": r["decisions_per_s_per_epoch"],
           "val_top1": r["final"]["val_top1"]}
else:
    import extrarlhf.training.bc, extrarlhf.training.export, extrarlhf.training.stream  # what training imports
    try:
        import extrarlhf.training.model  # noqa: F401  (torch)
    except ImportError:
        pass
    out = {}
out["seconds"] = round(time.perf_counter() - t, 2)
print(json.dumps(out))
"""


def child_peak(root: Path, dataset: str, epochs: int) -> dict:
    """Run one training in a fresh process; its result and its own peak RSS (MB, os.wait4)."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root), dataset, str(epochs)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    stdout, stderr = child.stdout.read(), child.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"training {dataset} failed:\n{stderr[-3000:]}")
    out = json.loads(stdout.strip().splitlines()[-1])
    out["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)  # KiB on Linux
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--battles", type=int, default=300, help="battles per group (the 1x dataset)")
    parser.add_argument("--sizes", default="1,4,16", help="dataset sizes in groups, smallest first")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--keep", help="collect into (or reuse) this folder instead of a temporary one")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="extrarlhf-bench-mem-") as tmp:
        root = Path(args.keep or tmp)
        t0 = time.perf_counter()
        for k in range(1, max(sizes) + 1):
            run_series(root / "sessions", f"g{k}", args.battles, p1_model="baseline:greedy",
                       opponent="baseline:random", seed=k, max_workers=2)
        collect_s = time.perf_counter() - t0
        rows = {}
        for size in sizes:
            if not (root / "datasets" / f"x{size}").exists():
                materialize_v5_dataset([f"g{k}" for k in range(1, size + 1)], f"x{size}",
                                       sessions_dir=root / "sessions", datasets_dir=root / "datasets")
            manifest = json.loads(next((root / "datasets" / f"x{size}").glob("v*/manifest.json")).read_text())
            rows[size] = manifest["row_counts"]["decisions"]
        runs = {"import": child_peak(root, "-", args.epochs)}
        for size in sizes:
            runs[f"x{size}"] = {"decisions": rows[size], **child_peak(root, f"x{size}", args.epochs)}
    first, last = runs[f"x{sizes[0]}"], runs[f"x{sizes[-1]}"]
    print(json.dumps({
        "benchmark": "train_memory", "python": platform.python_version(), "cpus": os.cpu_count(),
        "data": {"matchup": "baseline:greedy vs baseline:random", "battles_per_group": args.battles,
                 "collect_seconds": round(collect_s, 1)},
        "settings": {"epochs": args.epochs, "hyperparameters": "train_policy defaults"},
        "import_rss_mb": runs["import"]["peak_rss_mb"],
        "runs": {k: v for k, v in runs.items() if k != "import"},
        f"growth_{sizes[-1]}x_over_{sizes[0]}x": round(last["peak_rss_mb"] / first["peak_rss_mb"], 3),
        "target": 1.3,
    }, indent=2))


if __name__ == "__main__":
    main()
