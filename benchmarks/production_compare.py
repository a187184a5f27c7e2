"""The production V5 export of this tree against another tree's (e.g. a2150ce, before issue 48),
the same fixture database, interleaved runs; prints one JSON object.

    git worktree add --detach ../ref a2150ce
    .venv/bin/python -m pip install --target /tmp/ref-native ../ref/native   # its own core
    .venv/bin/python -m benchmarks.production_compare --ref-tree ../ref --ref-path /tmp/ref-native \
        [--battles 1000] [--rounds 3]

A throwaway PostgreSQL (extrarlhf/production/localdb.py) is filled by the fixture backend with
``--battles`` battles; each round runs ``export_production_v5_dataset`` of the whole fixture
with 1 worker in a fresh subprocess of each tree (``PYTHONPATH`` = ``--ref-path`` then the tree
for the reference, this tree for this one), reference first. Figures: the exporting process's
CPU per battle (``time.process_time``: the PostgreSQL server's CPU is in neither), best of the
rounds, and ``ratio`` = reference / this tree. Without ``--ref-tree`` it prints what it needs
and measures nothing (so ``make bench`` passes on a checkout without a reference tree).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SALT = "benchmark-salt-Xq7Vd2kw9PzL0bMf4RtY8nJc6HsA1eGuT5oW"


def _child() -> None:
    from extrarlhf.production.export import export_production_v5_dataset

    environ = json.loads(os.environ["PRODUCTION_COMPARE_GATE"])
    with tempfile.TemporaryDirectory(prefix="bench-prod-cmp-") as tmp:
        cpu0 = time.process_time()
        result = export_production_v5_dataset("2100-01-01T00:00:00Z", name="cmp", datasets_dir=tmp, environ=environ,
                                              workers=1)
        cpu = time.process_time() - cpu0
    print(json.dumps({"cpu_seconds": cpu, "battles": result["row_counts"]["production_battles"],
                      "decisions": result["row_counts"]["decisions"]}))


def _run(tree: Path, pythonpath: str, gate: str) -> dict:
    from benchmarks._reference import run_child  # the parent's only: a reference tree's child lacks it

    return run_child(__file__, tree, pythonpath, [], "the export", {"PRODUCTION_COMPARE_GATE": gate})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref-tree", type=Path, help="the reference checkout (e.g. a worktree of a2150ce)")
    parser.add_argument("--ref-path", default="", help="where the reference's engine_native is installed")
    parser.add_argument("--battles", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child()
    if args.ref_tree is None:
        print(json.dumps({"benchmark": "production_compare", "skipped": "no --ref-tree given: see the module "
                                                                        "docstring for the reference checkout"}))
        return
    from extrarlhf.production import gate
    from extrarlhf.production.fixture import build_fixture
    from extrarlhf.production.localdb import ThrowawayPostgres

    ref_path = os.pathsep.join(p for p in (args.ref_path, str(args.ref_tree.resolve())) if p)
    trees = {"reference": (args.ref_tree.resolve(), ref_path), "this": (ROOT, str(ROOT))}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    load0 = os.getloadavg()
    with ThrowawayPostgres() as pg:
        dsn = pg.create_database("prod")
        build_fixture(dsn, battles=args.battles, players=200, days=30, seed=11)
        gate_json = json.dumps({gate.ENABLE_VAR: "1", gate.DSN_VAR: dsn, gate.SALT_VAR: SALT,
                                gate.KEY_ID_VAR: "bench-cmp"})
        for _ in range(args.rounds):
            for name, (tree, path) in trees.items():
                runs[name].append(_run(tree, path, gate_json))
    out: dict = {"benchmark": "production_compare", "battles": args.battles, "rounds": args.rounds,
                 "ref_tree": str(args.ref_tree), "load_average": [load0, os.getloadavg()]}
    for name, rs in runs.items():
        best = min(r["cpu_seconds"] for r in rs)
        out[name] = {"cpu_ms_per_battle": round(1000 * best / rs[0]["battles"], 3),
                     "battles_per_cpu_s": round(rs[0]["battles"] / best, 1),
                     "all_cpu_ms_per_battle": [round(1000 * r["cpu_seconds"] / r["battles"], 2) for r in rs],
                     "decisions": rs[0]["decisions"]}
    out["ratio"] = round(out["reference"]["cpu_ms_per_battle"] / out["this"]["cpu_ms_per_battle"], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
