"""Production export: raw read speed, export throughput and memory against a real PostgreSQL;
prints one JSON object.

    .venv/bin/python -m benchmarks.production_export [--battles N] [--quick]

A throwaway PostgreSQL server (extrarlhf/production/localdb.py: initdb into a temp dir, unix
socket only, durability off) is filled by the fixture backend (``fixture.build_fixture``, timed:
seconds, battles/s, rows/s of both tables) with enough engine-played battles for at least
1,000,000 ``battle_actions`` rows (``--battles`` overrides; ``--quick``: 1,500 battles), then
``VACUUM ANALYZE``d (statistics as autovacuum would have them on a real backend).

Windows. The export refuses more than ``reader.MAX_ROWS`` (1,000,000) rows per raw stream, so the
"full" window is the longest one from the fixture's start whose actions fit under that ceiling:
its ``end_at`` is the ``coalesce(finished_at, started_at)`` of the first battle, in that order,
past which the cumulative action count would pass the ceiling (the key the reader's window
condition uses: every battle before it is in, none after). The "small" window is chosen the same
way for ~100,000 action rows (``--quick``: a tenth of the fixture). Both have no ``start_at``.

Figures, for each window:

- **raw read, psql**: ``psql -c "\\copy (<query>) TO '/dev/null'"`` per stream of the reader, with
  exactly the SQL it builds (``reader.Window(...).where("b")``, the column lists
  ``BATTLE_COLUMNS`` / ``ACTION_COLUMNS``, literal timestamps for the parameters), one query per
  stream, no paging; seconds include psql's start-up; best of 2. ``cpu_seconds``: psql's own CPU
  (user + system, from RUSAGE_CHILDREN), best of 2 per stream: the client side, like the export's.
- **raw read, reader**: a ``SnapshotReader`` alone (connect, schema check, exported snapshot,
  count, both keyset-paged streams merged per battle), ``battles()`` iterated and counted, nothing
  else; best of 2, interleaved with psql. ``ratio_reader_vs_psql`` = reader rows/s over psql
  rows/s on the same rows, both streams summed (target >= 0.5 on each window).
- **export**: ``export_production_v5_dataset`` of the window into a temp datasets dir, default
  workers, in a fresh subprocess: seconds, decisions/s, battles/s, rows and pages per stream, and
  its CPU (the exporting process and its worker processes, user + system; the PostgreSQL server's
  CPU is in neither this nor psql's figure): ``cpu_seconds``, ``battles_per_cpu_s``,
  ``cpu_ms_per_battle`` and ``vs_psql_copy``: the export's CPU-s and wall seconds over psql
  ``\\copy``'s for the same rows (both streams of the window), with the CPU per row both ways.
- **memory**: in the same subprocesses, the peak RSS of the exporting process (``ru_maxrss`` of
  RUSAGE_SELF) and of its largest worker process (``VmHWM`` polled from /proc while the workers
  run: RUSAGE_CHILDREN is reported too but cannot tell it, since a vfork+exec child - the
  manifest's ``git rev-parse`` - inherits the parent's high-water mark); ``memory_growth_*`` =
  full/small (target: flat, <= 1.25 as for ``benchmarks.materialize``).

The load average at start and end is reported: on a shared machine other work skews every figure.
Progress goes to stderr; stdout holds only the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SALT = "benchmark-salt-Xq7Vd2kw9PzL0bMf4RtY8nJc6HsA1eGuT5oW"
KEY_ID = "rc-bench-1"
DEFAULT_BATTLES = 15_000  # ~70 actions per battle: a little over 1,000,000 action rows
QUICK_BATTLES = 1_500
SMALL_ACTIONS = 100_000
REPEATS = 2
FIXTURE = {"players": 2_000, "days": 30, "seed": 11}
CHILD_TIMEOUT_S = 3_600  # an export that hangs (a dead pool thread) fails the run instead of stalling it


def log(message: str) -> None:
    print(f"[production_export] {message}", file=sys.stderr, flush=True)


def gate_env(dsn: str) -> dict[str, str]:
    from extrarlhf.production import gate

    return {gate.ENABLE_VAR: "1", gate.DSN_VAR: dsn, gate.SALT_VAR: SALT, gate.KEY_ID_VAR: KEY_ID}


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------------------- child: one export

def _vm_kb(pid: int | str, field: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


class WorkerPeaks:
    """Peak RSS (``VmHWM``) of this process's dataset worker processes, polled from /proc
    while they run (Linux; elsewhere nothing is found). ``RUSAGE_CHILDREN`` cannot tell it:
    a child started by vfork+exec (subprocess does so) inherits the parent's high-water mark,
    so the export's ``git rev-parse`` child alone reports the exporting process's own peak."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval, self.peaks_kb = interval, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="bench-worker-peaks", daemon=True)

    def __enter__(self) -> WorkerPeaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        me = os.getpid()
        while not self._stop.wait(self.interval):
            try:
                tasks = os.listdir(f"/proc/{me}/task")
            except OSError:
                return
            for task in tasks:
                try:
                    with open(f"/proc/{me}/task/{task}/children") as handle:
                        kids = handle.read().split()
                    for kid in kids:
                        with open(f"/proc/{kid}/cmdline", "rb") as handle:
                            if b"extrarlhf.core.procpool_worker" not in handle.read():
                                continue
                        hwm = _vm_kb(kid, "VmHWM")
                        if hwm is not None:
                            self.peaks_kb[kid] = max(self.peaks_kb.get(kid, 0), hwm)
                except OSError:
                    continue  # a process that just ended


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _child_export(end_at: str) -> dict[str, Any]:
    """Export [fixture start, end_at) with default workers; the gate variables come from this
    process's environment (the DSN is never a command-line value)."""
    from extrarlhf.production import gate
    from extrarlhf.production.export import (
        export_production_v5_dataset,  # imported before the clock starts
    )

    environ = {name: os.environ[name] for name in gate.VARIABLES}
    with tempfile.TemporaryDirectory(prefix="bench-prod-ds-") as tmp, WorkerPeaks() as workers:
        cpu0, children0 = time.process_time(), _children_cpu()
        start = time.perf_counter()
        result = export_production_v5_dataset(end_at, name="bench", datasets_dir=tmp, environ=environ)
        seconds = time.perf_counter() - start
        # the workers have been waited for when the export returns: their CPU is in RUSAGE_CHILDREN
        cpu_main, cpu_workers = time.process_time() - cpu0, _children_cpu() - children0
    if not result.get("published"):
        raise SystemExit(f"the export was not published: {result.get('message') or result.get('stop_reason')}")
    return {"seconds": seconds, "cpu_seconds_main": cpu_main, "cpu_seconds_workers": cpu_workers,
            "decisions": result["row_counts"]["decisions"],
            "row_counts": result["row_counts"], "excluded": result["exclusions"]["count"],
            "streams": {name: s["rows"] for name, s in result["streams"].items()},
            "pages": {name: s["pages"] for name, s in result["streams"].items()},
            "peak_rss_mb_main": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "peak_rss_mb_workers": max(workers.peaks_kb.values()) / 1024 if workers.peaks_kb else None,
            "worker_processes_seen": len(workers.peaks_kb),
            "rusage_children_maxrss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def _run_child_export(dsn: str, end_at: datetime) -> dict[str, Any]:
    env = {**os.environ, **gate_env(dsn)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "benchmarks.production_export", "--child", "export", _iso(end_at)],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, check=True, timeout=CHILD_TIMEOUT_S)
    out = json.loads(proc.stdout)
    out["process_seconds"] = time.perf_counter() - start
    return out


# ---------------------------------------------------------------------------- the database

async def _fetchval(dsn: str, sql: str, *args: Any) -> Any:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


def window_end_for_actions(dsn: str, actions: int) -> datetime | None:
    """The ``end_at`` of the longest window from the fixture's start holding at most ``actions``
    action rows (None: the whole fixture fits)."""
    key = "coalesce(b.finished_at, b.started_at)"
    sql = (f"SELECT key FROM (SELECT {key} AS key, sum(coalesce(c.n, 0)) OVER (ORDER BY {key}, b.battle_id) AS cum "
           f"FROM battles b LEFT JOIN (SELECT battle_id, count(*) AS n FROM battle_actions GROUP BY battle_id) c "
           f"ON c.battle_id = b.battle_id) s WHERE cum > $1 ORDER BY cum LIMIT 1")
    return asyncio.run(_fetchval(dsn, sql, actions))


def window_counts(dsn: str, window: Any) -> dict[str, int]:
    cond, args = window.where("b")
    battles = asyncio.run(_fetchval(dsn, f"SELECT count(*) FROM battles b WHERE {cond}", *args))
    actions = asyncio.run(_fetchval(dsn, f"SELECT count(*) FROM battle_actions a JOIN battles b "
                                         f"ON b.battle_id = a.battle_id WHERE {cond}", *args))
    return {"battles": battles, "battle_actions": actions}


# ---------------------------------------------------------------------------- raw reads

def stream_queries(window: Any) -> dict[str, str]:
    """The reader's two stream queries (reader.SnapshotReader._make_streams) without paging,
    literal timestamps in place of the parameters."""
    from extrarlhf.production.reader import ACTION_COLUMNS, BATTLE_COLUMNS

    cond, args = window.where("b")
    n = len(args)
    battles = f"SELECT {', '.join(f'b.{c}' for c in BATTLE_COLUMNS)} FROM battles b WHERE {cond}"
    actions = (f"SELECT {', '.join(f'a.{c}' for c in ACTION_COLUMNS)} FROM battle_actions a "
               f"JOIN battles b ON b.battle_id = a.battle_id WHERE {cond}")
    if window.ingested_before is not None:
        actions += f" AND a.ingested_at < ${n}"
    queries = {"battles": f"{battles} ORDER BY b.battle_id",
               "battle_actions": f"{actions} ORDER BY a.battle_id, a.seq"}
    for i in range(n, 0, -1):  # $10 before $1
        literal = f"'{args[i - 1].isoformat()}'::timestamptz"
        queries = {k: q.replace(f"${i}", literal) for k, q in queries.items()}
    return queries


def psql_copy(pg: Any, dbname: str, query: str) -> tuple[float, float]:
    """(seconds, psql's CPU seconds) of one ``\\copy``."""
    command = [pg.psql_path, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(pg.root), "-p", str(pg.port),
               "-U", "postgres", "-d", dbname, "-c", f"\\copy ({query}) TO '/dev/null'"]
    cpu0 = _children_cpu()
    start = time.perf_counter()
    subprocess.run(command, cwd=pg.root, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, _children_cpu() - cpu0


def reader_pass(env: dict[str, str], window: Any) -> dict[str, Any]:
    from extrarlhf.production.gate import open_gate
    from extrarlhf.production.reader import SnapshotReader

    access = open_gate(env)
    start = time.perf_counter()
    battles = actions = 0
    with SnapshotReader(access, window) as reader:
        reader.start()
        for _, mine in reader.battles():
            battles += 1
            actions += len(mine)
        seconds = time.perf_counter() - start
        streams = reader.stream_report()
    return {"seconds": seconds, "battles": battles, "actions": actions,
            "streams": {name: s["rows"] for name, s in streams.items()},
            "pages": {name: s["pages"] for name, s in streams.items()},
            "ceiling": next((name for name, s in streams.items() if s["ceiling_hit"]), None)}


# ---------------------------------------------------------------------------- main

def raw_reads(pg: Any, dbname: str, env: dict[str, str], window: Any, counts: dict[str, int],
              label: str) -> dict[str, Any]:
    """psql COPY vs the reader on one window, interleaved (background load hits both alike),
    best of ``REPEATS`` each."""
    queries = stream_queries(window)
    psql_runs: dict[str, list[float]] = {"battles": [], "battle_actions": []}
    psql_cpu: dict[str, list[float]] = {"battles": [], "battle_actions": []}
    reader_runs = []
    for r in range(REPEATS):
        for stream, query in queries.items():
            seconds, cpu = psql_copy(pg, dbname, query)
            psql_runs[stream].append(seconds)
            psql_cpu[stream].append(cpu)
        log(f"{label} window, psql pass {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in psql_runs.items()))
        reader_runs.append(reader_pass(env, window))
        log(f"{label} window, reader pass {r + 1}: {reader_runs[-1]['seconds']:.2f} s, {reader_runs[-1]['streams']}")
    psql_best = {k: min(v) for k, v in psql_runs.items()}
    psql_rows = counts["battles"] + counts["battle_actions"]
    psql_rate = psql_rows / sum(psql_best.values())
    best = min(reader_runs, key=lambda r: r["seconds"])
    reader_rows = sum(best["streams"].values())
    reader_rate = reader_rows / best["seconds"]
    return {
        "psql_copy": {"seconds": {k: round(v, 3) for k, v in psql_best.items()}, "rows": psql_rows,
                      "cpu_seconds": {k: round(min(v), 4) for k, v in psql_cpu.items()},
                      "cpu_seconds_total": round(sum(min(v) for v in psql_cpu.values()), 4),
                      "rows_per_s": round(psql_rate, 1),
                      "rows_per_s_by_stream": {k: round(counts[k] / v, 1) for k, v in psql_best.items()},
                      "all_seconds": {k: [round(x, 3) for x in v] for k, v in psql_runs.items()}},
        "reader": {"seconds": round(best["seconds"], 3), "rows": reader_rows, "streams": best["streams"],
                   "pages": best["pages"], "battles_yielded": best["battles"], "ceiling": best["ceiling"],
                   "rows_per_s": round(reader_rate, 1), "all_seconds": [round(r["seconds"], 3) for r in reader_runs]},
        "ratio_reader_vs_psql": round(reader_rate / psql_rate, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--battles", type=int, default=None,
                        help=f"fixture battles (default {DEFAULT_BATTLES:,}: over 1,000,000 action rows)")
    parser.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK_BATTLES:,} battles")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, end_at = args.child
        assert kind == "export", kind
        print(json.dumps(_child_export(end_at)))
        return

    from extrarlhf.core.progress import ProgressLine
    from extrarlhf.production.fixture import build_fixture
    from extrarlhf.production.localdb import ThrowawayPostgres
    from extrarlhf.production.reader import MAX_ROWS, Window

    n_battles = args.battles or (QUICK_BATTLES if args.quick else DEFAULT_BATTLES)
    load_start = [round(x, 2) for x in os.getloadavg()]  # other work on the machine skews every figure
    with ThrowawayPostgres() as pg:
        dbname = "bench_production"
        dsn = pg.create_database(dbname)
        env = gate_env(dsn)
        server_version = pg.psql(dbname, "SHOW server_version").strip()

        log(f"building the fixture: {n_battles:,} battles")
        start = time.perf_counter()
        summary = build_fixture(dsn, battles=n_battles, progress=ProgressLine("fixture"), **FIXTURE)
        fixture_s = time.perf_counter() - start
        counts = summary["counts"]
        total_rows = counts["battles"] + counts["actions"]
        log(f"fixture: {counts['battles']:,} battles, {counts['actions']:,} actions in {fixture_s:.1f} s")
        if args.battles is None and not args.quick and counts["actions"] < 1_000_000:
            log(f"warning: only {counts['actions']:,} action rows (< 1,000,000); pass a larger --battles")
        pg.psql(dbname, "VACUUM ANALYZE battles, battle_actions")  # as autovacuum would have

        start_at = datetime.fromisoformat(summary["window"]["start_at"])
        fixture_end = datetime.fromisoformat(summary["window"]["end_at"])
        full_end = window_end_for_actions(dsn, MAX_ROWS) or fixture_end
        small_target = min(SMALL_ACTIONS, counts["actions"] // 10) if args.quick or counts["actions"] < 500_000 \
            else SMALL_ACTIONS
        small_end = window_end_for_actions(dsn, small_target) or fixture_end
        # start_at None, as an export with no start: the same rows as [fixture start, end)
        full, small = Window(None, full_end, None), Window(None, small_end, None)
        full_counts, small_counts = window_counts(dsn, full), window_counts(dsn, small)
        log(f"full window [{_iso(start_at)}, {_iso(full_end)}): {full_counts}; "
            f"small window [.., {_iso(small_end)}): {small_counts}")

        raw = {"full_window": raw_reads(pg, dbname, env, full, full_counts, "full"),
               "small_window": raw_reads(pg, dbname, env, small, small_counts, "small")}

        log("export of the full window (fresh process)")
        export_full = _run_child_export(dsn, full_end)
        log(f"export full: {export_full['seconds']:.1f} s, {export_full['decisions']:,} decisions, "
            f"CPU {export_full['cpu_seconds_main'] + export_full['cpu_seconds_workers']:.1f} s")
        log("export of the small window (fresh process)")
        export_small = _run_child_export(dsn, small_end)
        log(f"export small: {export_small['seconds']:.1f} s, {export_small['decisions']:,} decisions")

    def export_figures(run: dict[str, Any], psql: dict[str, Any]) -> dict[str, Any]:
        battles = run["streams"]["battles"]
        rows = sum(run["streams"].values())
        cpu = run["cpu_seconds_main"] + run["cpu_seconds_workers"]
        psql_cpu, psql_s = psql["cpu_seconds_total"], sum(psql["seconds"].values())
        return {"seconds": round(run["seconds"], 2), "process_seconds": round(run["process_seconds"], 2),
                "cpu_seconds": round(cpu, 2), "cpu_seconds_main": round(run["cpu_seconds_main"], 2),
                "cpu_seconds_workers": round(run["cpu_seconds_workers"], 2),
                "battles_per_cpu_s": round(battles / cpu, 1), "cpu_ms_per_battle": round(1000 * cpu / battles, 3),
                "vs_psql_copy": {"rows": rows, "psql_rows": psql["rows"], "psql_cpu_seconds": psql_cpu,
                                 "psql_seconds": round(psql_s, 3),
                                 "cpu_us_per_row_export": round(1e6 * cpu / rows, 2),
                                 "cpu_us_per_row_psql": round(1e6 * psql_cpu / psql["rows"], 3),
                                 "cpu_ratio": round(cpu / psql_cpu, 1) if psql_cpu else None,
                                 "wall_ratio": round(run["seconds"] / psql_s, 1)},
                "streams": run["streams"], "pages": run["pages"], "decisions": run["decisions"],
                "excluded_battles": run["excluded"], "row_counts": run["row_counts"],
                "decisions_per_s": round(run["decisions"] / run["seconds"], 1),
                "battles_per_s": round(battles / run["seconds"], 1),
                "action_rows_per_s": round(run["streams"]["battle_actions"] / run["seconds"], 1),
                "peak_rss_mb_main": round(run["peak_rss_mb_main"], 1),
                "peak_rss_mb_workers": None if run["peak_rss_mb_workers"] is None else round(run["peak_rss_mb_workers"], 1),
                "worker_processes_seen": run["worker_processes_seen"],
                "rusage_children_maxrss_mb": round(run["rusage_children_maxrss_mb"], 1)}

    figures = {
        "benchmark": "production_export",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "postgres": server_version,
        "quick": bool(args.quick),
        "fixture": {"battles": counts["battles"], "actions": counts["actions"], **FIXTURE,
                    "window": summary["window"], "seconds": round(fixture_s, 1),
                    "battles_per_s": round(counts["battles"] / fixture_s, 1),
                    "rows_per_s": round(total_rows / fixture_s, 1),
                    "action_rows_per_s": round(counts["actions"] / fixture_s, 1)},
        "max_rows_per_stream": MAX_ROWS,
        "full_window": {"start_at": _iso(start_at), "end_at": _iso(full_end), **full_counts},
        "small_window": {"start_at": _iso(start_at), "end_at": _iso(small_end), **small_counts},
        "raw_read": raw,
        "ratio_reader_vs_psql": raw["full_window"]["ratio_reader_vs_psql"],
        "ratio_reader_vs_psql_small_window": raw["small_window"]["ratio_reader_vs_psql"],
        "export_full": export_figures(export_full, raw["full_window"]["psql_copy"]),
        "export_small": export_figures(export_small, raw["small_window"]["psql_copy"]),
        "export_battles_per_cpu_s": None,  # filled below from export_full
        "export_cpu_vs_psql_copy": None,
        "memory_growth_main": round(export_full["peak_rss_mb_main"] / export_small["peak_rss_mb_main"], 3),
        "memory_growth_workers": round(export_full["peak_rss_mb_workers"] / export_small["peak_rss_mb_workers"], 3)
        if export_full["peak_rss_mb_workers"] and export_small["peak_rss_mb_workers"] else None,
        "load_average": {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]},
        "targets": {"ratio_reader_vs_psql": 0.5, "ratio_reader_vs_psql_small_window": 0.5, "memory_growth_max": 1.25},
    }
    figures["export_battles_per_cpu_s"] = figures["export_full"]["battles_per_cpu_s"]
    figures["export_cpu_vs_psql_copy"] = figures["export_full"]["vs_psql_copy"]["cpu_ratio"]
    figures["targets_met"] = (figures["ratio_reader_vs_psql"] >= 0.5
                              and figures["ratio_reader_vs_psql_small_window"] >= 0.5
                              and figures["memory_growth_main"] <= 1.25)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
