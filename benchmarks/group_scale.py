"""How a session group's tools scale with its size; prints one JSON object.

    .venv/bin/python -m benchmarks.group_scale [--sizes 1000,10000] [--workers 1] [--dir DIR] [--plain-traces]
                                               [--p1 SPEC] [--opponent SPEC]
                                               [--steps collect,resume_noop,...] [--synthetic-from SESSIONS]

One group (by default ``baseline:greedy`` vs ``baseline:random``, the cheapest battles, as issue 50 allows
for size figures) grows through ``--sizes``: each size is reached by resuming the same series.
At each size, every step runs in a fresh subprocess (so its peak RSS is its own) and reports
wall seconds, CPU seconds (the process and its worker processes) and peak RSS:

- ``collect``: the series resumed from the previous size to this one (``max_workers``);
- ``resume_noop``: the same call again with nothing left to play (reconcile + catalog fold);
- ``list_sessions``: the MCP tool's core (``list_groups``, each group's manifest and ``summary.json``);
- ``inspect_session``: manifest, summary and the first catalog page (the MCP tool's core);
- ``check``: ``check_sessions`` with every trace file's sha256, on up to 4 processes as ``extrarlhf check``;
- ``check_catalog``: ``check_sessions(hashes=False)``: the catalog and the trace folders, not the files;
- ``materialize``: ``materialize_v5_dataset`` of the whole group (default workers).

plus the group's disk bytes (all files) and per battle, and the bytes of the blocks the file system
allocates to them (``du``'s figure: whole blocks per file and folder). ``--steps`` runs some of the steps only
(default: all but ``check_catalog``), on a group in ``--dir`` that already has the size when
``collect`` is left out.

``--synthetic-from SESSIONS`` (one size, a new ``--dir``) first makes a synthetic group of that
size for the steps that read the catalog and the trace folders but not the traces
(``resume_noop``, ``list_sessions``, ``inspect_session``, ``check_catalog``): the ``scale`` group of
SESSIONS (made by this script; its size must divide the size asked) repeated under new indexes
and battle ids, its catalog lines otherwise as they are, each final battle's folder a symlink to
one of 100 real trace folders hard-linked into ``<dir>/sessions/.real``. Its catalog, fold and
folder listing are those of a real group of that size; its traces are not (``check`` with
hashes would report every battle, and materialize would read 100 traces over and over). ``--dir`` keeps the sessions and
datasets (default: a temp dir removed at the end). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GROUP = "scale"
STEPS = ("collect", "resume_noop", "list_sessions", "inspect_session", "check", "materialize")


def _cpu() -> float:
    self_, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return self_.ru_utime + self_.ru_stime + kids.ru_utime + kids.ru_stime


def _step(kind: str, sessions: str, datasets: str, n: int, workers: int, compact: bool, p1: str,
          opponent: str) -> dict[str, Any]:
    from extrarlhf.runtime.series import run_series
    from extrarlhf.runtime.sessions import SessionStore, check_sessions

    store = SessionStore(sessions)
    cpu0, t0 = _cpu(), time.perf_counter()
    out: dict[str, Any] = {}
    if kind in ("collect", "resume_noop"):
        result = run_series(sessions, GROUP, n, p1_model=p1, opponent=opponent, seed=0,
                            max_workers=workers, compact_traces=compact)
        out["ran"] = result["ran"]
    elif kind == "list_sessions":  # as the MCP tool: each group's manifest and summary.json
        rows = [(store.read_manifest(g), store.read_summary(g)["battles"]) for g in store.list_groups()]
        out["battles"] = sum(n for _, n in rows)
    elif kind == "inspect_session":  # as the MCP tool: the catalog's index (or its fold), one page read, the summary
        store.read_manifest(GROUP)
        view = store.catalog_view(GROUP)
        out.update(catalog_total=len(view.keys), indexed=view.indexed, page=len(view.entries(0, 10)))
        store.compute_summary(GROUP)
    elif kind in ("check", "check_catalog"):
        # as `extrarlhf check` runs it: the traces' hashes on up to 4 processes (workers=None)
        out["problems"] = len(check_sessions(sessions, hashes=kind == "check", workers=None))
    elif kind == "materialize":
        from extrarlhf.datasets.materialize import materialize_v5_dataset

        result = materialize_v5_dataset([GROUP], GROUP, sessions_dir=sessions, datasets_dir=datasets, overwrite=True,
                                        version=1)
        out["decisions"] = result["row_counts"]["decisions"]
    out.update(seconds=round(time.perf_counter() - t0, 3), cpu_seconds=round(_cpu() - cpu0, 3),
               peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
               peak_rss_mb_workers=round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1))
    return out


def _run(kind: str, sessions: Path, datasets: Path, n: int, workers: int, compact: bool, p1: str,
         opponent: str) -> dict[str, Any]:
    """One step in a fresh process; ``process_cpu_seconds``: that process and every process it
    waited for (its workers), start-up and imports included."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    before = kids.ru_utime + kids.ru_stime
    proc = subprocess.run([sys.executable, "-m", "benchmarks.group_scale", "--child", kind, str(sessions),
                           str(datasets), str(n), str(workers), "1" if compact else "0", p1, opponent],
                          cwd=ROOT, stdout=subprocess.PIPE, text=True, check=True)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {**json.loads(proc.stdout), "process_cpu_seconds": round(kids.ru_utime + kids.ru_stime - before, 3)}


def _synthesize(source: Path, sessions: Path, battles: int) -> None:
    """The synthetic group of ``--synthetic-from`` (see the module docstring)."""
    import orjson

    from extrarlhf.runtime.sessions import battle_id_for

    src = source / GROUP
    lines = (src / "catalog.jsonl").read_bytes().splitlines()
    size = len({orjson.loads(raw)["battle_id"] for raw in lines})
    if battles % size:
        raise SystemExit(f"{battles} battles is not a multiple of the {size} battles of {src}")
    group = sessions / GROUP
    (group / "battles").mkdir(parents=True)  # fails on an existing group: nothing is overwritten
    shutil.copy(src / "manifest.json", group / "manifest.json")
    names = sorted(os.listdir(src / "battles"))[:100]
    for name in names:
        (sessions / ".real" / name / "v5").mkdir(parents=True)
        for file in os.listdir(src / "battles" / name / "v5"):
            os.link(src / "battles" / name / "v5" / file, sessions / ".real" / name / "v5" / file)
    with open(group / "catalog.jsonl", "wb") as out:
        for rep in range(battles // size):
            for raw in lines:
                entry = orjson.loads(raw)
                entry["index"] += rep * size
                entry["battle_id"] = battle_id_for(GROUP, entry["index"], entry["seed"])
                out.write(orjson.dumps(entry) + b"\n")
                if entry["status"] != "started":
                    target = f"../../.real/{names[entry['index'] % len(names)]}"
                    os.symlink(target, group / "battles" / entry["battle_id"])


def _disk(path: Path) -> tuple[int, int]:
    """(file bytes, bytes of the blocks allocated to files and folders) under ``path``, links not
    followed; walked folder by folder (``Path.rglob`` held 2.6 GB at 10^6 battles)."""
    size = blocks = 0
    stack = [str(path)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                blocks += info.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    size += info.st_size
    return size, blocks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000", help="group sizes, increasing, comma-separated")
    parser.add_argument("--workers", type=int, default=1,
                        help="series workers (default 1: in process, so the CPU figures hold all the work; more "
                             "workers are not counted in the CPU figures)")
    parser.add_argument("--dir", default=None, help="keep the sessions and datasets here (default: a temp dir)")
    parser.add_argument("--p1", default="baseline:greedy", help="the group's p1 (default: %(default)s)")
    parser.add_argument("--opponent", default="baseline:random", help="its opponent (default: %(default)s)")
    parser.add_argument("--plain-traces", action="store_true", help="collect plain .jsonl (default: compact)")
    parser.add_argument("--steps", default=",".join(STEPS), help="the steps to run, comma-separated (default: %(default)s; "
                        "also check_catalog)")
    parser.add_argument("--synthetic-from", default=None,
                        help="make a synthetic group of the one size from this sessions dir's group (see above)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--synthesize", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.synthesize:
        source, sessions, n = args.synthesize
        _synthesize(Path(source), Path(sessions), int(n))
        return
    if args.child:
        kind, sessions, datasets, n, workers, compact, p1, opponent = args.child
        print(json.dumps(_step(kind, sessions, datasets, int(n), int(workers), compact == "1", p1, opponent)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    steps = args.steps.split(",")
    unknown = sorted(set(steps) - {*STEPS, "check_catalog"})
    if unknown:
        parser.error(f"unknown steps {unknown}")
    tmp = None if args.dir else tempfile.TemporaryDirectory(prefix="bench-scale-")
    base = Path(args.dir or tmp.name)  # type: ignore[union-attr]
    sessions, datasets = base / "sessions", base / "datasets"
    if args.synthetic_from:
        if len(sizes) != 1:
            parser.error("--synthetic-from makes a group of one size: give one --sizes")
        print(f"[group_scale] a synthetic group of {sizes[0]:,} battles", file=sys.stderr, flush=True)
        # in a child process: Linux keeps a process's peak RSS across exec, so what this one held
        # would show in the peak of every step started from it
        subprocess.run([sys.executable, "-m", "benchmarks.group_scale", "--synthesize", args.synthetic_from,
                        str(sessions), str(sizes[0])], cwd=ROOT, check=True)
    rows = []
    try:
        for n in sizes:
            row: dict[str, Any] = {"battles": n}
            for kind in steps:
                print(f"[group_scale] {n:,} battles: {kind}", file=sys.stderr, flush=True)
                row[kind] = _run(kind, sessions, datasets, n, args.workers, not args.plain_traces, args.p1,
                                 args.opponent)
                print(f"[group_scale] {n:,} battles: {kind} {json.dumps(row[kind])}", file=sys.stderr, flush=True)
            row["group_disk_bytes"], row["group_disk_blocks_bytes"] = _disk(sessions / GROUP)
            row["group_disk_bytes_per_battle"] = row["group_disk_bytes"] // n
            row["group_disk_blocks_bytes_per_battle"] = row["group_disk_blocks_bytes"] // n
            if "materialize" in steps:
                row["dataset_disk_bytes"] = _disk(datasets / GROUP / "v1")[0]
            rows.append(row)
            print(f"[group_scale] {json.dumps(row)}", file=sys.stderr, flush=True)
    finally:
        if tmp is not None:
            tmp.cleanup()
    print(json.dumps({"benchmark": "group_scale", "python": platform.python_version(), "cpus": os.cpu_count(),
                      "matchup": f"{args.p1} vs {args.opponent}", "workers": args.workers,
                      "traces": "plain" if args.plain_traces else "compact", "load_average": os.getloadavg(),
                      "sizes": rows}, indent=2))


if __name__ == "__main__":
    main()
