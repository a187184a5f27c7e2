"""Trace retention (extrarlhf/datasets/retention.py): only battles a valid published version
holds are ever compacted or deleted; the catalog, checks and datasets stay as they were."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from extrarlhf.core.errors import RLHFError
from extrarlhf.datasets import materialize_v5_dataset
from extrarlhf.datasets.retention import LOG, prune_traces
from extrarlhf.runtime import ownership, trace_files
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore, check_sessions

ROOT = Path(__file__).resolve().parents[2]


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


@pytest.fixture()
def world(tmp_path: Path) -> tuple[Path, Path]:
    sessions, datasets = tmp_path / "sessions", tmp_path / "datasets"
    run_series(sessions, "plain", 4, seed=1, compact_traces=False)
    run_series(sessions, "packed", 4, seed=2)
    run_series(sessions, "loose", 3, seed=3, compact_traces=False)  # no dataset holds it
    materialize_v5_dataset(["plain", "packed"], "ds", sessions_dir=sessions, datasets_dir=datasets, workers=1)
    return sessions, datasets


def test_compact_keeps_every_reader_whole_and_never_touches_what_no_version_holds(world) -> None:
    sessions, datasets = world
    store = SessionStore(sessions)
    catalogs = {g: (sessions / g / "catalog.jsonl").read_bytes() for g in ("plain", "packed", "loose")}
    plain_bytes = {b.battle_id: trace_files.read(b.path / "v5", "actions.jsonl") for b in store.battles("plain")}
    loose = tree(sessions / "loose")
    result = prune_traces(sessions_dir=sessions, datasets_dir=datasets)
    rows = {r["group"]: r for r in result["groups"]}
    assert (rows["plain"]["action"], rows["plain"]["compacted"], rows["plain"]["datasets"]) == ("compacted", 4, ["ds/v1"])
    assert rows["packed"]["action"] == "already_compact" and rows["loose"]["action"] == "none"
    assert "no valid published dataset version" in rows["loose"]["reason"]
    assert rows["plain"]["bytes_after"] < rows["plain"]["bytes_before"] / 5
    assert result["bytes_freed"] == rows["plain"]["bytes_before"] - rows["plain"]["bytes_after"]
    for b in store.battles("plain"):  # same bytes to readers, now stored compact
        assert trace_files.is_compact(b.path / "v5")
        assert trace_files.read(b.path / "v5", "actions.jsonl") == plain_bytes[b.battle_id]
    assert tree(sessions / "loose") == loose
    assert {g: (sessions / g / "catalog.jsonl").read_bytes() for g in catalogs} == catalogs
    assert check_sessions(sessions) == []
    log = [json.loads(line) for line in (sessions / LOG).read_text().splitlines()]
    assert [(e["group"], e["action"], e["keep"]) for e in log] == [("plain", "compacted", "compact")]


def test_keep_none_deletes_only_groups_published_versions_wholly_hold(world) -> None:
    sessions, datasets = world
    run_series(sessions, "packed", 6, seed=2)  # two battles no version holds yet
    before = tree(sessions)
    dry = prune_traces(sessions_dir=sessions, datasets_dir=datasets, keep="none", dry_run=True)
    assert tree(sessions) == before, "a dry run changed the sessions dir"
    assert {r["group"]: r["action"] for r in dry["groups"]} == {"plain": "deleted", "packed": "already_compact",
                                                                "loose": "none"}
    result = prune_traces(sessions_dir=sessions, datasets_dir=datasets, keep="none")
    rows = {r["group"]: r for r in result["groups"]}
    assert rows["plain"]["action"] == "deleted" and not (sessions / "plain").exists()
    assert rows["packed"]["covered"] == 4 and rows["packed"]["traced"] == 6
    assert "2 traced battles are held by no valid published version" in rows["packed"]["reason"]
    assert SessionStore(sessions).list_groups() == ["loose", "packed"]
    assert [p.name for p in sessions.iterdir() if "pruned" in p.name] == []
    assert check_sessions(sessions) == []
    # the dataset keeps what the deleted group held, and still validates
    from extrarlhf.datasets import validate_dataset

    assert validate_dataset("ds", datasets_dir=datasets)["valid"] is True


def test_a_version_that_does_not_validate_covers_nothing(world) -> None:
    sessions, datasets = world
    battles = datasets / "ds" / "v1" / "battles.parquet"
    battles.write_bytes(battles.read_bytes()[:-100] + b"\0" * 100)
    before = tree(sessions)
    result = prune_traces(sessions_dir=sessions, datasets_dir=datasets, keep="none")
    assert all(r["action"] == "none" for r in result["groups"])
    assert [s["dataset_id"] for s in result["datasets_skipped"]] == ["ds/v1"]
    assert "does not validate" in result["datasets_skipped"][0]["reason"]
    assert tree(sessions) == before


def test_a_group_someone_owns_is_not_deleted(world) -> None:
    sessions, datasets = world
    with ownership.acquire(SessionStore(sessions), "plain", purpose="series", heartbeat=False):
        result = prune_traces(sessions_dir=sessions, datasets_dir=datasets, groups=["plain"], keep="none")
    row = result["groups"][0]
    assert row["action"] == "none" and "not deleted" in row["reason"] and "owned by" in row["reason"]
    assert (sessions / "plain" / "catalog.jsonl").exists()


def test_bad_arguments_are_refused_with_what_to_do(world) -> None:
    sessions, datasets = world
    before = tree(sessions)
    with pytest.raises(RLHFError) as info:
        prune_traces(sessions_dir=sessions, datasets_dir=datasets, keep="all")
    assert info.value.code == "invalid_argument" and "compact" in str(info.value) and "none" in str(info.value)
    with pytest.raises(RLHFError) as info:
        prune_traces(sessions_dir=sessions, datasets_dir=datasets, groups=["nope"])
    assert info.value.code == "not_found" and "nope" in str(info.value)
    assert tree(sessions) == before


def test_the_cli_prunes_and_reports(world) -> None:
    sessions, datasets = world
    proc = subprocess.run([sys.executable, "-m", "extrarlhf", "datasets", "prune-traces", "--sessions-dir",
                           str(sessions), "--datasets-dir", str(datasets), "--keep", "none", "--group", "plain"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "plain: deleted (4 of 4 traced battles held by ds/v1" in proc.stdout
    assert "bytes were freed; log:" in proc.stdout
    assert not (sessions / "plain").exists()


@pytest.mark.anyio
async def test_the_mcp_tool_prunes_within_its_dirs(world, tmp_path: Path) -> None:
    from mcp import Client

    from mcp_server import build_server
    from tests.mcp_helpers import Checked

    sessions, datasets = world
    before = tree(sessions)
    async with Client(build_server(sessions, datasets, tmp_path / "checkpoints")) as client:
        c = Checked(client)
        dry = await c.ok("prune_traces", {"keep": "none", "dry_run": True})
        assert tree(sessions) == before
        assert {r["group"]: r["action"] for r in dry["groups"]} == {"plain": "deleted", "packed": "deleted",
                                                                    "loose": "none"}
        await c.err("prune_traces", {"keep": "everything"}, code="invalid_argument")
        await c.err("prune_traces", {"groups": ["nope"]}, code="not_found")
        done = await c.ok("prune_traces", {"groups": ["plain"]})
    assert done["groups"][0]["action"] == "compacted" and done["bytes_freed"] > 0
    assert done["log"] == str(sessions / LOG)


def test_the_dagster_asset_prunes_one_group_when_launched(world, tmp_path: Path) -> None:
    import dagster as dg

    from extrarlhf_assets.defs.datasets.retention import trace_retention
    from extrarlhf_assets.definitions import defs
    from extrarlhf_assets.resources import DatasetsResource, SessionsResource

    sessions, datasets = world
    # opt-in: no automation, and not part of the campaign loop
    assert trace_retention.automation_conditions_by_key.get(dg.AssetKey("trace_retention")) is None
    assert dg.AssetKey("trace_retention") not in defs.resolve_job_def("campaign_loop").asset_layer.selected_asset_keys
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("session_groups", ["plain", "loose"])
    res = {"sessions": SessionsResource(sessions_dir=str(sessions)),
           "datasets": DatasetsResource(datasets_dir=str(datasets))}

    def launch(group: str, keep: str) -> dict:
        result = dg.materialize([trace_retention], partition_key=group, resources=res, instance=instance,
                                run_config={"ops": {"trace_retention": {"config": {"keep": keep}}}})
        assert result.success
        [event] = result.asset_materializations_for_node("trace_retention")
        return {k: v.value for k, v in event.metadata.items()}

    loose = tree(sessions / "loose")
    meta = launch("loose", "none")
    assert meta["action"] == "none" and "no valid published dataset version" in meta["reason"]
    assert tree(sessions / "loose") == loose
    meta = launch("plain", "none")
    assert (meta["action"], meta["covered_by"], meta["bytes_after"]) == ("deleted", ["ds/v1"], 0)
    assert meta["bytes_before"] > 0 and not (sessions / "plain").exists()
