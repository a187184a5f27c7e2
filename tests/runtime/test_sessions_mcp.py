"""The session hardening of issue 14 as MCP clients see it (in process, ``Client(server)``):
list_sessions lists every readable group and reports each unreadable one with its error;
inspect_session names the damaged line and field; series_status shows the series that owns
a group; run_series and start_battle are refused with group_busy while another owner runs;
finish_battle / abandon_battle of a match whose group vanished write nothing."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from mcp import Client

from extrarlhf.runtime import ownership
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore
from mcp_server import build_server
from tests.mcp_helpers import Checked

SPECS = {"p1_model": "baseline:random", "opponent": "baseline:random"}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    return {"sessions": tmp_path / "sessions", "datasets": tmp_path / "datasets",
            "checkpoints": tmp_path / "checkpoints"}


@pytest.mark.anyio
async def test_list_sessions_reports_each_bad_group_and_still_lists_the_others(dirs, tmp_path):
    root = dirs["sessions"]
    for group in ("a-good", "b-summary", "c-manifest", "d-catalog", "f-good"):
        run_series(root, group, 2, **SPECS)
    summary = json.loads((root / "b-summary" / "summary.json").read_text())
    del summary["results"]  # issue 14: a summary missing a key failed the whole list with internal_error
    (root / "b-summary" / "summary.json").write_text(json.dumps(summary))
    manifest = json.loads((root / "c-manifest" / "manifest.json").read_text())
    manifest["configuration"]["opponent"] = "baseline:random"  # an object became text
    (root / "c-manifest" / "manifest.json").write_text(json.dumps(manifest))
    run_series(tmp_path / "elsewhere", "e-link", 1, **SPECS)
    (root / "e-link").symlink_to(tmp_path / "elsewhere" / "e-link", target_is_directory=True)
    async with Client(build_server(root, dirs["datasets"], dirs["checkpoints"])) as client:
        c = Checked(client)
        listed = await c.ok("list_sessions")
        rows = {row["group"]: row for row in listed["groups"]}
        assert sorted(rows) == ["a-good", "b-summary", "c-manifest", "d-catalog", "e-link", "f-good"]
        for good in ("a-good", "d-catalog", "f-good"):
            assert "error" not in rows[good] and rows[good]["battles"] == 2 and rows[good]["by_status"]["finished"] == 2
        assert rows["b-summary"]["error"]["code"] == "corrupt_record"
        assert rows["b-summary"]["error"]["details"] == {"path": str(root / "b-summary" / "summary.json"),
                                                         "line": None, "field": "results"}
        assert rows["c-manifest"]["error"]["details"]["field"] == "configuration.opponent"
        assert "must be an object" in rows["c-manifest"]["error"]["message"]
        assert rows["e-link"]["error"]["code"] == "path_outside_sessions_dir"
        assert all("internal_error" not in json.dumps(row) for row in rows.values())

        # a damaged catalog line: inspect_session names file, line and field
        lines = (root / "d-catalog" / "catalog.jsonl").read_text().splitlines()
        entry = json.loads(lines[2])
        entry["status"] = "complete"
        lines[2] = json.dumps(entry)
        (root / "d-catalog" / "catalog.jsonl").write_text("\n".join(lines) + "\n")
        error = await c.err("inspect_session", {"group": "d-catalog"}, "corrupt_record")
        assert error["details"] == {"path": str(root / "d-catalog" / "catalog.jsonl"), "line": 3, "field": "status"}
        assert "'complete'" in error["message"] and "not one of started, finished, abandoned, crashed" in \
            error["message"]
        await c.err("series_status", {"group": "d-catalog"}, "corrupt_record")
        row = {r["group"]: r for r in (await c.ok("list_sessions"))["groups"]}["d-catalog"]
        assert "error" not in row  # summary.json is still readable: the list shows its headline numbers

        # the resume through MCP repairs it from the intact trace and plays nothing again
        result = await c.ok("run_series", {"group": "d-catalog", "n_battles": 2, **SPECS})
        assert (result["ran"], result["repaired"]) == (0, 1)
        page = await c.ok("inspect_session", {"group": "d-catalog"})
        assert [e["status"] for e in page["catalog"]] == ["finished", "finished"]


@pytest.mark.anyio
async def test_a_group_owned_by_a_series_refuses_other_writers_and_series_status_names_the_owner(dirs):
    root = dirs["sessions"]
    run_series(root, "camp", 1, **SPECS)
    async with Client(build_server(root, dirs["datasets"], dirs["checkpoints"])) as client:
        c = Checked(client)
        status = await c.ok("series_status", {"group": "camp"})
        assert status["running"] is False and status["owner"] is None
        with ownership.acquire(SessionStore(root), "camp", codename="Holder"):
            status = await c.ok("series_status", {"group": "camp"})
            assert status["running"] is True
            assert status["owner"]["owner_pid"] == os.getpid() and status["owner"]["codename"] == "Holder"
            assert "token" not in status["owner"]
            error = await c.err("run_series", {"group": "camp", "n_battles": 3, **SPECS}, "group_busy")
            assert f"pid {os.getpid()}" in error["message"] and "codename Holder" in error["message"]
            assert error["details"]["owner"]["codename"] == "Holder"
            await c.err("start_battle", {"p1_actor_type": "llm", "group": "camp"}, "group_busy")
        result = await c.ok("run_series", {"group": "camp", "n_battles": 3, **SPECS})
        assert result["ran"] == 2


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["finish_battle", "abandon_battle"])
async def test_finish_or_abandon_after_the_sessions_dir_vanished_writes_nothing(dirs, tool):
    root = dirs["sessions"]
    async with Client(build_server(root, dirs["datasets"], dirs["checkpoints"])) as client:
        c = Checked(client)
        started = await c.ok("start_battle", {"p1_actor_type": "rl", "p1_model": "baseline:random",
                                              "opponent": "baseline:random", "group": "gone"})
        assert started["done"]
        shutil.rmtree(root)
        error = await c.err(tool, {"match_id": started["match_id"]}, "group_missing")
        assert "nothing was written" in error["message"] and str(root) in error["message"]
        assert not root.exists()  # no trace written where nothing can see it
        matches = await c.ok("list_matches")
        assert [m["match_id"] for m in matches["matches"]] == [started["match_id"]]  # still live: retry later
