"""ReturnClock export benchmark (issue 15): prints one JSON object.

    .venv/bin/python -m benchmarks.returnclock [--sessions 100000 --sessions 1000000] [--repeat 2]

For each size, a throwaway PostgreSQL (extrarlhf/production/localdb.py) is filled by the
fixture backend (``fixture.build_fixture``: at least ``--sessions`` sessions, players with about
10 sessions each, overlaps,
same-instant returns, open and late sessions, treatments with later status updates; the tables
``ANALYZE``d as a live backend's are), then, best of ``--repeat``, interleaved:

- **export**: ``export_returnclock_dataset`` of every session that ended after the first day (a
  million sessions hold more rows than the 1,000,000-row ceiling) in a fresh subprocess, its imports
  done before the clock starts (as in the MCP server or a Dagster process): seconds,
  sessions/s (session rows read: kept + overlapped), the peak RSS of that process (``VmHWM``;
  not ``ru_maxrss``, which Linux carries over exec from a forked parent) and the memory the
  manifest reports having held (``production.memory.measured``);
- **split**: then, in the same process, ``split_returnclock_training_dataset`` of that export:
  seconds, rows per split, what its manifest says it held, the process's peak RSS after it;
- **psql \\copy**: ``psql -c "\\copy (<query>) TO '<file>' CSV"`` with exactly the export's query
  (``returnclock_query.RETURNCLOCK_SQL``, literal parameters, the same planner setting): the
  same rows, computed by the same window functions and join, written to a file by the server's
  COPY and psql alone; seconds include psql's start-up.

``export_vs_copy`` = copy seconds / export seconds (target >= 0.5); ``rss_growth`` = peak RSS of
the largest size over the smallest (target: flat). The load average at start and end is
reported: on a shared machine other work skews every figure. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from extrarlhf.production.fixture import build_fixture
from extrarlhf.production.localdb import ThrowawayPostgres
from extrarlhf.production.returnclock_query import PLANNER_SETTINGS, RETURNCLOCK_SQL

ROOT = Path(__file__).resolve().parents[1]
SALT = "benchmark-salt-Xq7Vd2kw9PzL0bMf4RtY8nJc6HsA1eGuT5oW"
START = datetime(2026, 1, 1, tzinfo=timezone.utc)
DAYS = 30
SESSIONS_PER_PLAYER = 10
FIXTURE_MEAN_SESSIONS = 9.5  # what the fixture draws per player for SESSIONS_PER_PLAYER (measured: 9.56)
CEILING = 1_000_000

CHILD = r"""
import json, sys, tempfile, time
import pandas  # noqa: F401 - pyarrow imports it at its first pa.array (0.5 s): long done in a server process
from extrarlhf.production.returnclock import export_returnclock_dataset, split_returnclock_training_dataset
env, start_at, end_at = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
hwm = lambda: round(next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024, 1)
root = tempfile.mkdtemp()
t = time.perf_counter()
r = export_returnclock_dataset(start_at, end_at, name="bench", datasets_dir=root, environ=env)
seconds, export_peak = time.perf_counter() - t, hwm()
t = time.perf_counter()
split = split_returnclock_training_dataset("bench", datasets_dir=root)
print(json.dumps({"export_s": round(seconds, 3), "complete": r["complete"], "counts": r["counts"],
                  "streams": r["streams"], "memory_held": r["memory"], "peak_rss_mb": export_peak,
                  "split_s": round(time.perf_counter() - t, 3), "split_rows": split["split"]["rows"],
                  "split_memory_held": split["split"]["memory"]["measured"], "peak_rss_after_split_mb": hwm()}))
"""


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _literal(t: datetime) -> str:
    return f"'{t.isoformat()}'::timestamptz"


def _inline(start_at: datetime, end_at: datetime) -> str:
    sql = (RETURNCLOCK_SQL.replace("$1::timestamptz", _literal(end_at)).replace("$2::timestamptz", _literal(start_at))
           .replace("$3::timestamptz", "'infinity'::timestamptz").replace("$4", str(CEILING + 1)))
    return " ".join(sql.split())  # \copy takes the query on one line


def _export(env: dict[str, str], start_at: datetime, end_at: datetime) -> dict:
    child = subprocess.run([sys.executable, "-c", CHILD, json.dumps(env), start_at.isoformat(), end_at.isoformat()],
                           cwd=ROOT, check=True, capture_output=True, text=True)
    return json.loads(child.stdout.strip().splitlines()[-1])


def _copy(server: ThrowawayPostgres, db: str, start_at: datetime, end_at: datetime) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.csv"
        os.chmod(tmp, 0o777)
        command = [server.psql_path, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(server.root),
                   "-p", str(server.port), "-U", "postgres", "-d", db,
                   "-c", PLANNER_SETTINGS.replace("SET LOCAL", "SET"),
                   "-c", f"\\copy ({_inline(start_at, end_at)}) TO '{out}' CSV"]
        t = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        seconds = time.perf_counter() - t
        return {"copy_s": round(seconds, 3), "copy_bytes": out.stat().st_size,
                "copy_rows": sum(1 for _ in open(out, "rb"))}


def run(sessions: int, repeat: int) -> dict:
    players = max(1, math.ceil(sessions / FIXTURE_MEAN_SESSIONS))
    with ThrowawayPostgres() as server:
        dsn = server.create_database("bench")
        t = time.perf_counter()
        summary = build_fixture(dsn, battles=0, players=players, days=DAYS, seed=11,
                                sessions_per_player=SESSIONS_PER_PLAYER)
        fill_s = time.perf_counter() - t
        total = summary["counts"]["sessions"]["total"]
        _log(f"returnclock: {total:,} sessions, {summary['counts']['treatments']['total']:,} treatments "
             f"in {fill_s:.1f} s")
        # all but the first day: a fixture of a million sessions holds more rows than the ceiling
        start_at, end_at = START + timedelta(days=1), START + timedelta(days=DAYS + 2)
        env = {"RLHF_ENABLE_PRODUCTION_DATASETS": "1", "RLHF_PRODUCTION_DSN": dsn, "RETURNCLOCK_DATASET_SALT": SALT,
               "RETURNCLOCK_DATASET_SALT_KEY_ID": "bench"}
        exports, copies = [], []
        for i in range(repeat):
            exports.append(_export(env, start_at, end_at))
            copies.append(_copy(server, "bench", start_at, end_at))
            _log(f"returnclock {total:,}: run {i + 1}: export {exports[-1]['export_s']} s, "
                 f"copy {copies[-1]['copy_s']} s")
    export = min(exports, key=lambda e: e["export_s"])
    copy = min(copies, key=lambda c: c["copy_s"])
    rows = export["streams"]["player_sessions"]["rows"]
    return {"fixture_sessions": total, "fixture_treatments": summary["counts"]["treatments"]["total"],
            "fill_s": round(fill_s, 2), "session_rows": rows, "copy_rows": copy["copy_rows"], **export, **copy,
            "export_runs_s": [e["export_s"] for e in exports], "copy_runs_s": [c["copy_s"] for c in copies],
            "sessions_per_s": round(rows / export["export_s"]),
            "export_vs_copy": round(copy["copy_s"] / export["export_s"], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.returnclock")
    parser.add_argument("--sessions", type=int, action="append", help="fixture size (repeatable; default 100,000)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each measure; the best is reported")
    args = parser.parse_args()
    sizes = args.sessions or [100_000]
    load_start = os.getloadavg()
    results = {str(n): run(n, args.repeat) for n in sizes}
    out = {"sizes": results, "cores": os.cpu_count(), "load_average": {"start": load_start, "end": os.getloadavg()}}
    if len(sizes) > 1:
        small, large = results[str(min(sizes))], results[str(max(sizes))]
        out["rss_growth"] = round(large["peak_rss_mb"] / small["peak_rss_mb"], 3)
        out["rss_growth_with_split"] = round(large["peak_rss_after_split_mb"] / small["peak_rss_after_split_mb"], 3)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
