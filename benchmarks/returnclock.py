"""ReturnClock export benchmark (issue 15): prints JSON.

``python -m benchmarks.returnclock --sessions 100000 [--sessions 1000000]``: for each size, a
throwaway PostgreSQL is filled with COPY (players with a few sessions each, some overlaps, open
sessions and treatments), then

- the export runs in a child process (its peak RSS is measured there: ``VmHWM``; not
  ``ru_maxrss``, which Linux carries over exec from the forked parent);
- the same session rows are computed by the export's single SQL query and written to a file
  with COPY (``copy_from_query``), the ``\\copy`` baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone

import asyncpg

from extrarlhf.production.localdb import ThrowawayPostgres
from extrarlhf.production.returnclock import SESSIONS_SQL
from extrarlhf.production.schema import DDL

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
SALT = "benchmark-salt-0123456789abcdef-0123456789"


def _rows(n: int, seed: int = 1):
    rng = random.Random(seed)
    sessions, treatments = [], []
    p = 0
    while len(sessions) < n:
        t = rng.uniform(0, 20 * 24 * 60)
        for j in range(rng.randint(1, 12)):
            length = rng.uniform(0, 90)
            ended = None if rng.random() < 0.01 else T0 + timedelta(minutes=t + length)
            start = T0 + timedelta(minutes=t)
            sessions.append((f"s{p}-{j}", f"player{p}", start, ended, start + timedelta(minutes=length + 1)))
            if rng.random() < 0.1:
                at = start + timedelta(minutes=length + rng.uniform(0, 600))
                treatments.append((f"a{p}-{j}", f"player{p}", "push", at, rng.choice(["sent", "delivered", "failed"]),
                                   at, at))
            t += length + rng.expovariate(1 / 1440) - (5 if rng.random() < 0.05 else 0)
        p += 1
    return sessions[:n], treatments


async def _fill(dsn: str, n: int) -> dict:
    sessions, treatments = _rows(n)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(DDL)
        t = time.perf_counter()
        await conn.copy_records_to_table("player_sessions", records=sessions)
        await conn.copy_records_to_table("return_treatments", records=treatments)
        await conn.execute("ANALYZE")
        return {"sessions": len(sessions), "treatments": len(treatments), "fill_s": round(time.perf_counter() - t, 2)}
    finally:
        await conn.close()


async def _copy_baseline(dsn: str, end_at: datetime) -> dict:
    conn = await asyncpg.connect(dsn)
    size = 0
    with tempfile.TemporaryFile() as out:
        async def sink(chunk: bytes) -> None:
            nonlocal size
            size += len(chunk)
            out.write(chunk)
        t = time.perf_counter()
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            sql = SESSIONS_SQL.replace("$1::timestamptz", f"'{end_at.isoformat()}'::timestamptz") \
                .replace("$2::timestamptz", "'-infinity'::timestamptz").replace("$3::timestamptz", "'infinity'::timestamptz")
            await conn.copy_from_query(sql, output=sink, format="csv")
        seconds = time.perf_counter() - t
    await conn.close()
    return {"copy_s": round(seconds, 2), "copy_bytes": size}


CHILD = r"""
import json, resource, sys, time, tempfile
from extrarlhf.production.returnclock import export_returnclock_dataset
env = json.loads(sys.argv[1])
t = time.perf_counter()
r = export_returnclock_dataset(None, sys.argv[2], name="bench", datasets_dir=tempfile.mkdtemp(), environ=env,
                               row_group_rows=int(sys.argv[3]))
# VmHWM, not ru_maxrss: ru_maxrss survives exec and would report the (forked) parent's peak
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"export_s": round(time.perf_counter() - t, 2), "rows": r["counts"], "complete": r["complete"],
                  "streams": r["streams"], "peak_rss_mb": round(hwm / 1024, 1)}))
"""


ROW_GROUP_ROWS = 65_536


def run(n: int) -> dict:
    with ThrowawayPostgres() as server:
        dsn = server.create_database("bench")
        filled = asyncio.run(_fill(dsn, n))
        end_at = T0 + timedelta(days=40)
        env = {"RLHF_ENABLE_PRODUCTION_DATASETS": "1", "RLHF_PRODUCTION_DSN": dsn, "RETURNCLOCK_DATASET_SALT": SALT,
               "RETURNCLOCK_DATASET_SALT_KEY_ID": "bench"}
        child = subprocess.run([sys.executable, "-c", CHILD, json.dumps(env), end_at.isoformat(), str(ROW_GROUP_ROWS)], check=True,
                               capture_output=True, text=True)
        exported = json.loads(child.stdout.strip().splitlines()[-1])
        baseline = asyncio.run(_copy_baseline(dsn, end_at))
    out = {**filled, **exported, **baseline}
    out["sessions_per_s"] = round(n / exported["export_s"])
    out["export_vs_copy"] = round(baseline["copy_s"] / exported["export_s"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, action="append")
    parser.add_argument("--row-group-rows", type=int, default=ROW_GROUP_ROWS)
    args = parser.parse_args()
    globals()["ROW_GROUP_ROWS"] = args.row_group_rows
    print(json.dumps({str(n): run(n) for n in (args.sessions or [100_000])}, indent=2))


if __name__ == "__main__":
    main()
