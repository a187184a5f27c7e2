"""The session-group sensor's cost does not grow with unchanged groups (only catalogs whose
stat changed are read), and each tick requests a bounded number of runs (issue 16, item 10).
Timings are in benchmarks/dagster_runs.py; here, what is read and requested."""

import json
import os
import shutil

import dagster as dg
import pytest

from extrarlhf.runtime.series import run_series
from extrarlhf_assets.defs.collection import sensors
from extrarlhf_assets.resources import SessionsResource


@pytest.fixture
def many_groups(tmp_path):
    """A real group ("seed") and 29 copies of it under one sessions dir."""
    root = tmp_path / "sessions"
    run_series(root, "seed", 2, seed=1, checkpoints_dir=tmp_path / "checkpoints")
    for i in range(29):
        shutil.copytree(root / "seed", root / f"copy-{i:02d}")
    return tmp_path


@pytest.fixture
def reads(monkeypatch):
    """The groups whose catalog the sensor reads (a counter around the real function)."""
    seen: list[str] = []
    real = sensors._finished_digest

    def counted(sessions, group):
        seen.append(group)
        return real(sessions, group)

    monkeypatch.setattr(sensors, "_finished_digest", counted)
    return seen


def _tick(instance, sessions, cursor):
    ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"sessions": sessions})
    return sensors.session_groups_sensor(ctx)


def test_unchanged_groups_are_not_read_again(many_groups, reads):
    sessions = SessionsResource(sessions_dir=str(many_groups / "sessions"), settle_seconds=0, max_runs_per_tick=100)
    instance = dg.DagsterInstance.ephemeral()
    first = _tick(instance, sessions, None)
    assert len(first.run_requests) == 30 and len(reads) == 30

    reads.clear()
    quiet = _tick(instance, sessions, first.cursor)
    assert quiet.run_requests == [] and reads == []  # 30 unchanged groups: not one catalog read

    catalog = many_groups / "sessions" / "copy-07" / "catalog.jsonl"
    later = catalog.stat().st_mtime_ns - 5 * 10**9
    os.utime(catalog, ns=(later, later))  # looks changed, same content
    touched = _tick(instance, sessions, quiet.cursor)
    assert reads == ["copy-07"] and touched.run_requests == []  # read once, same digest: no run

    reads.clear()
    run_series(many_groups / "sessions", "seed", 4, seed=1, checkpoints_dir=many_groups / "checkpoints")
    grown = _tick(instance, sessions, touched.cursor)
    assert reads == ["seed"] and [r.partition_key for r in grown.run_requests] == ["seed"]
    assert [k for r in grown.dynamic_partitions_requests for k in r.partition_keys] == ["seed"]


def test_run_requests_per_tick_are_bounded(many_groups, reads):
    sessions = SessionsResource(sessions_dir=str(many_groups / "sessions"), settle_seconds=0, max_runs_per_tick=12)
    instance = dg.DagsterInstance.ephemeral()
    cursor, per_tick, requested = None, [], []
    for _ in range(5):
        result = _tick(instance, sessions, cursor)
        cursor = result.cursor
        per_tick.append(len(result.run_requests))
        keys = [r.partition_key for r in result.run_requests]
        added = [k for req in result.dynamic_partitions_requests for k in req.partition_keys]
        assert sorted(added) == sorted(keys)  # partitions are added with their runs, not all at once
        instance.add_dynamic_partitions("session_groups", added)
        requested += keys
    assert per_tick == [12, 12, 6, 0, 0]
    assert len(requested) == len(set(requested)) == 30
    assert len(reads) == 30  # each group read once, the leftovers only on the tick that requested them


def test_an_older_cursor_is_understood(many_groups, reads):
    """Cursors written before the stat cursor ({group: digest}) still prevent re-requests."""
    sessions = SessionsResource(sessions_dir=str(many_groups / "sessions"), settle_seconds=0, max_runs_per_tick=100)
    instance = dg.DagsterInstance.ephemeral()
    digest = sensors.catalog_digest(many_groups / "sessions" / "seed")
    legacy = json.dumps({g.name: digest for g in (many_groups / "sessions").iterdir() if g.is_dir()})
    result = _tick(instance, sessions, legacy)
    assert result.run_requests == [] and len(reads) == 30
    cursor = json.loads(result.cursor)
    assert set(cursor["seed"]) == {"m", "s", "d"} and cursor["seed"]["d"] == digest
