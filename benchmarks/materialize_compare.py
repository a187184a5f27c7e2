"""Materialize in this tree against another tree's (e.g. a2150ce, the tree issue 50 measured), the
same teacher battles, interleaved runs; prints one JSON object.

    git worktree add --detach ../ref a2150ce
    .venv/bin/python -m pip install --target /tmp/ref-native ../ref/native   # its own core
    .venv/bin/python -m benchmarks.materialize_compare --ref-tree ../ref --ref-path /tmp/ref-native \
        [--battles 200] [--rounds 2] [--repeat 3]

``--battles`` teacher battles (``search:baseline:greedy?sims=32`` vs ``baseline:greedy``, 2
workers) are collected by this tree into a temp dir, compact as a series stores them, and a copy
is expanded to plain JSONL (the reference reads only plain traces). Each round runs
``materialize_v5_dataset`` with 1 worker in a fresh subprocess: the reference on the plain
group, then this tree on the plain group and on the compact one. Figures: the materializing
process's CPU per battle (``time.process_time``), best of the rounds (with ``--repeat N``, each
process makes one warm-up run and then N, and its best counts), and ``ratio_plain`` /
``ratio_compact`` = reference / this tree. Without ``--ref-tree`` it prints what it needs and
measures nothing (so ``make bench`` passes on a checkout without a reference tree).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GROUP = "teach"


def _child(sessions: str, repeat: int) -> None:
    from extrarlhf.datasets.materialize import materialize_v5_dataset

    def once() -> tuple[float, dict]:
        with tempfile.TemporaryDirectory(prefix="bench-mat-cmp-") as tmp:
            cpu0 = time.process_time()
            result = materialize_v5_dataset([GROUP], "cmp", sessions_dir=sessions, datasets_dir=tmp, workers=1)
            return time.process_time() - cpu0, result

    if repeat > 1:
        once()  # a warm-up run: imports and first-use costs stay out of the best of the repeats
    runs = [once() for _ in range(repeat)]
    cpu, result = min(runs, key=lambda run: run[0])
    print(json.dumps({"cpu_seconds": cpu, "battles": result["row_counts"]["battles"],
                      "decisions": result["row_counts"]["decisions"]}))


def _run(tree: Path, pythonpath: str, sessions: str, repeat: int) -> dict:
    from benchmarks._reference import run_child  # the parent's only: a reference tree's child lacks it

    return run_child(__file__, tree, pythonpath, [sessions, "--repeat", str(repeat)], "materialize")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref-tree", type=Path, help="the reference checkout (e.g. a worktree of a2150ce)")
    parser.add_argument("--ref-path", default="", help="where the reference's engine_native is installed")
    parser.add_argument("--battles", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs in each fresh process, after one warm-up run when more than 1 (the best counts)")
    parser.add_argument("--child", metavar="SESSIONS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.child, args.repeat)
    if args.ref_tree is None:
        print(json.dumps({"benchmark": "materialize_compare", "skipped": "no --ref-tree given: see the module "
                                                                         "docstring for the reference checkout"}))
        return
    from extrarlhf.runtime.series import run_series
    from extrarlhf.runtime.trace_files import expand_battle

    ref_path = os.pathsep.join(p for p in (args.ref_path, str(args.ref_tree.resolve())) if p)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-mat-cmp-") as tmp:
        compact, plain = os.path.join(tmp, "compact"), os.path.join(tmp, "plain")
        run_series(compact, GROUP, args.battles, p1_model="search:baseline:greedy?sims=32",
                   opponent="baseline:greedy", max_workers=2)
        shutil.copytree(compact, plain)
        for battle in sorted(Path(plain, GROUP, "battles").iterdir()):
            expand_battle(battle / "v5", fsync=False)
        runs: dict[str, list[dict]] = {"reference": [], "this_plain": [], "this_compact": []}
        for _ in range(args.rounds):
            runs["reference"].append(_run(args.ref_tree.resolve(), ref_path, plain, args.repeat))
            runs["this_plain"].append(_run(ROOT, str(ROOT), plain, args.repeat))
            runs["this_compact"].append(_run(ROOT, str(ROOT), compact, args.repeat))
    out: dict = {"benchmark": "materialize_compare", "battles": args.battles, "rounds": args.rounds,
                 "repeat": args.repeat,
                 "matchup": "search:baseline:greedy?sims=32 vs baseline:greedy", "ref_tree": str(args.ref_tree),
                 "load_average": [load0, os.getloadavg()]}
    for name, rs in runs.items():
        best = min(r["cpu_seconds"] for r in rs)
        out[name] = {"cpu_ms_per_battle": round(1000 * best / rs[0]["battles"], 3),
                     "all_cpu_ms_per_battle": [round(1000 * r["cpu_seconds"] / r["battles"], 2) for r in rs],
                     "decisions": rs[0]["decisions"]}
    for form in ("plain", "compact"):
        out[f"ratio_{form}"] = round(out["reference"]["cpu_ms_per_battle"] / out[f"this_{form}"]["cpu_ms_per_battle"], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
