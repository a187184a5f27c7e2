"""Versions of production exports (DESIGN 12.2, extrarlhf/production/versions.py) against a real
PostgreSQL filled by the fixture backend: an identical re-export reuses the latest version (no
new version directory), another window or other rows publish a new one, and the
``<name>.complete`` pointer names the latest complete export: an incomplete one published on
request never moves it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from extrarlhf.core.errors import InvalidArgument
from extrarlhf.datasets.paths import DatasetsDir
from extrarlhf.datasets.pointers import resolve
from extrarlhf.production import gate
from extrarlhf.production.export import export_production_v5_dataset
from extrarlhf.production.fixture import build_fixture
from extrarlhf.production.returnclock import export_returnclock_dataset
from extrarlhf.production.versions import content_digest, latest_complete

SALT = "versions-salt-Xq7Vd2kw9PzL0bMf4RtY8nJc6HsA1eGuT5oW"


@pytest.fixture(scope="module")
def backend(pg_server):
    """A small backend database of this module's own: one test changes its rows."""
    dsn = pg_server.create_database("prod_versions")
    summary = build_fixture(dsn, battles=40, players=16, days=2, seed=11, sessions_per_player=4)
    env = {gate.ENABLE_VAR: "1", gate.DSN_VAR: dsn, gate.SALT_VAR: SALT, gate.KEY_ID_VAR: "rc-versions"}
    return dsn, summary["window"], env


def _versions(root: Path, name: str) -> list[str]:
    return sorted(p.name for p in (root / name).iterdir() if p.name.startswith("v"))


def test_an_identical_re_export_reuses_the_version_and_a_changed_window_does_not(backend, tmp_path):
    _, window, env = backend
    cut = window["end_at"]

    def v5(**kw):
        return export_production_v5_dataset(window["end_at"], name="prod", start_at=window["start_at"],
                                            ingested_before=cut, datasets_dir=tmp_path, environ=env, workers=1, **kw)

    first, again = v5(), v5()
    assert first["reused"] is False and first["dataset_id"] == "prod/v1"
    assert again["reused"] is True and again["dataset_id"] == "prod/v1" and again["version"] == 1
    assert again["published"] and again["row_counts"] == first["row_counts"]
    assert _versions(tmp_path, "prod") == ["v1"] and not [p for p in (tmp_path / "prod").iterdir()
                                                          if p.name.startswith(".tmp-")]
    assert first["latest_complete"]["dataset_id"] == again["latest_complete"]["dataset_id"] == "prod/v1"
    assert resolve(DatasetsDir(tmp_path), "@prod.complete").dataset_id == "prod/v1"

    # the run's own facts differ (snapshot time, created_at), the content does not
    m1 = json.loads((tmp_path / "prod" / "v1" / "manifest.json").read_text())
    assert content_digest({**m1, "created_at": "x", "version": 9, "dataset_id": "prod/v9"}) == content_digest(m1)
    assert content_digest({**m1, "row_counts": {**m1["row_counts"], "battles": 0}}) != content_digest(m1)

    # another window (same rows or not) is another export: a new version, the pointer follows
    later = export_production_v5_dataset(window["end_at"], name="prod", start_at=window["start_at"],
                                         ingested_before="2030-01-01T00:00:00Z", datasets_dir=tmp_path, environ=env,
                                         workers=1)
    assert later["reused"] is False and later["dataset_id"] == "prod/v2"
    assert latest_complete(tmp_path, "prod")["dataset_id"] == "prod/v2"

    # ReturnClock: the same rule
    rc = [export_returnclock_dataset(window["start_at"], window["end_at"], name="rc", ingested_before=cut,
                                     datasets_dir=tmp_path, environ=env) for _ in range(2)]
    assert [r["reused"] for r in rc] == [False, True] and _versions(tmp_path, "rc") == ["v1"]
    assert latest_complete(tmp_path, "rc")["dataset_id"] == "rc/v1"


def test_an_incomplete_export_is_a_version_but_never_the_latest_complete(backend, tmp_path):
    _, window, env = backend
    kw = dict(name="day", start_at=window["start_at"], ingested_before=window["end_at"], datasets_dir=tmp_path,
              environ=env, workers=1)
    complete = export_production_v5_dataset(window["end_at"], **kw)
    incomplete = export_production_v5_dataset(window["end_at"], max_rows=5, publish_incomplete=True, **kw)
    assert incomplete["complete"] is False and incomplete["dataset_id"] == "day/v2" and not incomplete["reused"]
    assert incomplete["latest_complete"]["dataset_id"] == complete["dataset_id"] == "day/v1"
    assert latest_complete(tmp_path, "day")["dataset_id"] == "day/v1"
    # a second identical incomplete export reuses v2; the pointer still names v1
    again = export_production_v5_dataset(window["end_at"], max_rows=5, publish_incomplete=True, **kw)
    assert again["reused"] and again["dataset_id"] == "day/v2" and _versions(tmp_path, "day") == ["v1", "v2"]
    assert latest_complete(tmp_path, "day")["dataset_id"] == "day/v1"
    # a complete export again, identical to v1 though v2 is the latest version: v1 is reused
    back = export_production_v5_dataset(window["end_at"], **kw)
    assert (back["reused"], back["dataset_id"]) == (True, "day/v1") and _versions(tmp_path, "day") == ["v1", "v2"]
    # stopped and not published: nothing written, the pointer reported as it is
    stopped = export_production_v5_dataset(window["end_at"], max_rows=5, **kw)
    assert not stopped["published"] and stopped["latest_complete"]["dataset_id"] == "day/v1"
    assert latest_complete(tmp_path, "nothing-yet") is None
    with pytest.raises(InvalidArgument, match="too long"):
        export_production_v5_dataset(window["end_at"], name="n" * 60, datasets_dir=tmp_path, environ=env)


async def _drop_one_finished_battle(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        battle = await conn.fetchval("SELECT battle_id FROM battles WHERE finished_at IS NOT NULL "
                                     "ORDER BY battle_id LIMIT 1")
        await conn.execute("DELETE FROM battle_actions WHERE battle_id = $1", battle)
        await conn.execute("DELETE FROM battles WHERE battle_id = $1", battle)
    finally:
        await conn.close()


def test_changed_rows_publish_a_new_version(backend, tmp_path):
    dsn, window, env = backend
    kw = dict(name="rows", start_at=window["start_at"], ingested_before=window["end_at"], datasets_dir=tmp_path,
              environ=env, workers=1)
    before = export_production_v5_dataset(window["end_at"], **kw)
    asyncio.run(_drop_one_finished_battle(dsn))  # the last test of the module: it changes the backend
    after = export_production_v5_dataset(window["end_at"], **kw)
    assert (before["dataset_id"], after["dataset_id"], after["reused"]) == ("rows/v1", "rows/v2", False)
    assert after["row_counts"]["battles"] + after["exclusions"]["count"] == \
        before["row_counts"]["battles"] + before["exclusions"]["count"] - 1
    assert latest_complete(tmp_path, "rows")["dataset_id"] == "rows/v2"


def test_the_cli_says_reused_and_names_the_latest_complete_export(backend, tmp_path):
    _, window, env = backend
    command = [sys.executable, "-m", "extrarlhf", "production", "export-returnclock", "--start-at",
               window["start_at"], "--end-at", window["end_at"], "--ingested-before", window["end_at"], "--name", "rc",
               "--datasets-dir", str(tmp_path)]
    runs = [subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr[-2000:]
    assert "reused:" not in runs[0].stdout and "latest complete export: rc/v1 (@rc.complete)" in runs[0].stdout
    assert "reused: identical to rc/v1 (no new version written)" in runs[1].stdout
    # the runbook's way to the day's latest complete export
    inspect = subprocess.run([sys.executable, "-m", "extrarlhf", "datasets", "inspect", "@rc.complete",
                              "--datasets-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert inspect.returncode == 0, inspect.stderr[-2000:]
    assert inspect.stdout.startswith("rc/v1 (returnclock_export)") and "complete: True" in inspect.stdout
