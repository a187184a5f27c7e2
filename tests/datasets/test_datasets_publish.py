"""Publication: fresh versions, overwrite semantics with rollback, recovery after a crash at
any step, pointer promotion, and a real SIGKILL in the middle of a materialization."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from extrarlhf.datasets import inspect_dataset, list_datasets, materialize_v5_dataset, promote_dataset, \
    validate_dataset
from extrarlhf.datasets.paths import DatasetsDir
from extrarlhf.datasets.publish import publish_version, recover
from extrarlhf.datasets.validate import validate_dir
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore
from tests.datasets_helpers import GREEDY, RANDOM, ROOT, copy_sessions, expect_error, shared_sessions, tree_bytes


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith((".tmp-", ".old-", ".trash-")))


@pytest.fixture()
def ds(tmp_path: Path) -> Path:
    datasets = tmp_path / "datasets"
    materialize_v5_dataset([RANDOM], "d", sessions_dir=shared_sessions(), datasets_dir=datasets, promote="cur")
    return datasets


def test_versions_are_fresh_and_an_existing_target_is_refused(ds: Path) -> None:
    before = tree_bytes(ds)
    err = expect_error("dataset_exists", materialize_v5_dataset, [GREEDY], "d", sessions_dir=shared_sessions(),
                       datasets_dir=ds, version=1)
    assert "d/v1 already exists" in str(err) and "overwrite" in str(err)
    assert tree_bytes(ds) == before
    second = materialize_v5_dataset([GREEDY], "d", sessions_dir=shared_sessions(), datasets_dir=ds)
    assert second["dataset_id"] == "d/v2" and second["replaced"] is False
    assert DatasetsDir(ds).versions("d") == [1, 2]
    assert {k: v for k, v in tree_bytes(ds).items() if k.startswith("d/v1/")} == \
        {k: v for k, v in before.items() if k.startswith("d/v1/")}
    assert inspect_dataset("d", datasets_dir=ds)["dataset_id"] == "d/v2"  # NAME is the latest version
    chosen = materialize_v5_dataset([GREEDY], "d", sessions_dir=shared_sessions(), datasets_dir=ds, version=7)
    assert chosen["dataset_id"] == "d/v7" and DatasetsDir(ds).versions("d") == [1, 2, 7]


def test_overwrite_replaces_a_version_completely(ds: Path) -> None:
    old_rows = json.loads((ds / "d" / "v1" / "manifest.json").read_text())["row_counts"]
    result = materialize_v5_dataset([GREEDY], "d", sessions_dir=shared_sessions(), datasets_dir=ds, version=1,
                                    overwrite=True)
    assert result["replaced"] is True and result["dataset_id"] == "d/v1"
    assert result["row_counts"]["battles"] == 24 != old_rows["battles"]
    assert validate_dataset("d/v1", datasets_dir=ds)["valid"] is True
    assert leftovers(ds / "d") == []
    # the pointer promoted for the old content is now stale: it fails closed
    assert inspect_dataset("d/v1", datasets_dir=ds)["pointers"] == [
        {"pointer": "cur", "promoted_at": json.loads((ds / "pointers" / "cur.json").read_text())["promoted_at"],
         "stale": True}]
    err = expect_error("stale_pointer", promote_dataset, "@cur", "x", datasets_dir=ds)
    assert "overwritten after it was promoted" in str(err)


def test_a_failing_overwrite_keeps_the_old_version(ds: Path, tmp_path: Path) -> None:
    sessions = copy_sessions(tmp_path / "sessions")
    victim = list(SessionStore(sessions).battles(GREEDY))[20]  # late: part of the new version is written first
    (victim.path / "v5" / "meta.jsonl").write_text("{}\n")
    before = tree_bytes(ds)
    expect_error("integrity_error", materialize_v5_dataset, [GREEDY], "d", sessions_dir=sessions, datasets_dir=ds,
                 version=1, overwrite=True)
    assert tree_bytes(ds) == before and leftovers(ds / "d") == []
    assert validate_dataset("@cur", datasets_dir=ds)["valid"] is True


def _copy_build(source: Path, corrupt: bool = False):
    def build(folder: Path, dataset_id: str, version: int) -> dict:
        for f in source.iterdir():
            shutil.copy(f, folder / f.name)
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["dataset_id"], manifest["version"] = dataset_id, version
        (folder / "manifest.json").write_text(json.dumps(manifest))
        if corrupt:
            with open(folder / "turns.parquet", "ab") as handle:
                handle.write(b"garbage")
        return {"built": True}
    return build


def test_validation_failure_before_publication_rolls_back(ds: Path) -> None:
    dirs = DatasetsDir(ds)
    source = ds / "d" / "v1"
    before = tree_bytes(ds)
    err = expect_error("validation_failed", publish_version, dirs, "d", _copy_build(source, corrupt=True), version=1,
                       overwrite=True, validate=validate_dir)
    assert {f["code"] for f in err.failures} >= {"file_hash_mismatch"}
    assert tree_bytes(ds) == before and leftovers(ds / "d") == []
    ok = publish_version(dirs, "d", _copy_build(source), validate=validate_dir)
    assert ok["built"] is True and ok["dataset_id"] == "d/v2" and validate_dataset("d/v2", datasets_dir=ds)["valid"]

    def explode(folder: Path, dataset_id: str, version: int) -> dict:
        (folder / "partial.parquet").write_bytes(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        publish_version(dirs, "d", explode, version=2, overwrite=True)
    assert leftovers(ds / "d") == [] and validate_dataset("d/v2", datasets_dir=ds)["valid"] is True


def test_recovery_after_a_crash_between_the_two_renames(ds: Path) -> None:
    """Killed after moving v1 aside and before moving the new one in: v1 is restored."""
    folder = ds / "d"
    original = tree_bytes(folder / "v1")
    pid = dead_pid()
    os.rename(folder / "v1", folder / f".old-v1-{pid}-0000aaaa")
    (folder / f".tmp-v1-{pid}-0000bbbb").mkdir()
    (folder / f".tmp-v1-{pid}-0000bbbb" / "decisions.parquet").write_bytes(b"half")
    listed = list_datasets(datasets_dir=ds)["datasets"][0]
    assert listed["versions"] == [] and {i["kind"] for i in listed["incomplete"]} == {"old", "tmp"}
    assert not any(i["owner_alive"] for i in listed["incomplete"])
    result = materialize_v5_dataset([GREEDY], "d", sessions_dir=shared_sessions(), datasets_dir=ds)
    assert result["dataset_id"] == "d/v2"
    assert any("restored v1" in line for line in result["recovered"])
    assert tree_bytes(folder / "v1") == original and leftovers(folder) == []
    assert validate_dataset("@cur", datasets_dir=ds)["valid"] is True  # the pointer's manifest is back


def test_recovery_of_an_uncommitted_and_of_a_committed_overwrite(ds: Path, tmp_path: Path) -> None:
    folder = ds / "d"
    original = tree_bytes(folder / "v1")
    pid = dead_pid()
    # uncommitted: the old copy still sits in .old-, a new v1 is in place -> the old one wins
    shutil.copytree(folder / "v1", folder / f".old-v1-{pid}-0000cccc")
    (folder / "v1" / "manifest.json").write_text("{}")
    # committed: only the .trash- copy of an old version remains -> deleted
    shutil.copytree(folder / "v1", folder / f".trash-v1-{pid}-0000dddd")
    live = folder / f".tmp-v9-{os.getpid()}-0000eeee"  # a live publisher's temp is left alone
    live.mkdir()
    done = recover(folder)
    assert len(done) == 2 and any("restored v1" in d for d in done)
    assert tree_bytes(folder / "v1") == original
    assert leftovers(folder) == [live.name]


def test_promotion(ds: Path) -> None:
    second = materialize_v5_dataset([GREEDY], "d", sessions_dir=shared_sessions(), datasets_dir=ds)
    result = promote_dataset(second["dataset_id"], "cur", datasets_dir=ds)
    assert result["dataset_id"] == "d/v2" and result["previous"] == "d/v1"
    doc = json.loads((ds / "pointers" / "cur.json").read_text())
    assert doc == {k: v for k, v in result.items() if k != "path"}
    assert sorted(p.name for p in (ds / "pointers").iterdir()) == ["cur.json", "cur.json.lock"]  # no temp left
    assert inspect_dataset("@cur", datasets_dir=ds)["dataset_id"] == "d/v2"
    assert promote_dataset("@cur", "prod", datasets_dir=ds)["dataset_id"] == "d/v2"
    expect_error("not_found", promote_dataset, "d/v9", "cur", datasets_dir=ds)
    expect_error("not_found", inspect_dataset, "@nope", datasets_dir=ds)
    assert json.loads((ds / "pointers" / "cur.json").read_text())["dataset_id"] == "d/v2"


# --------------------------------------------------------------------------- SIGKILL mid-materialization
@pytest.fixture(scope="module")
def many_battles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sessions = tmp_path_factory.mktemp("kill") / "sessions"
    run_series(sessions, "many", 260, p1_model="baseline:greedy", opponent="baseline:greedy", seed=3,
               max_workers=2)
    return sessions


@pytest.mark.parametrize("workers", [1, 2])
def test_sigkill_mid_materialization_leaves_no_half_dataset_and_the_pointer_unchanged(
        many_battles: Path, tmp_path: Path, workers: int) -> None:
    datasets = tmp_path / "datasets"
    materialize_v5_dataset([RANDOM], "ds", sessions_dir=shared_sessions(), datasets_dir=datasets, promote="cur")
    pointer = (datasets / "pointers" / "cur.json").read_bytes()
    v1 = tree_bytes(datasets / "ds" / "v1")
    log = open(tmp_path / "materialize.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "extrarlhf", "datasets", "materialize", "--group", "many", "--name", "ds",
         "--promote", "cur", "--workers", str(workers), "--sessions-dir", str(many_battles),
         "--datasets-dir", str(datasets)],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until the new version is half written
            assert proc.poll() is None, "materialize finished before it could be killed"
            temps = list((datasets / "ds").glob(".tmp-v2-*/decisions.parquet"))
            if temps and temps[0].stat().st_size > 0:
                break
            time.sleep(0.005)
        else:
            raise AssertionError("no half-written version appeared")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        log.close()
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "materialize.log").read_text()

    # neither a half dataset nor a changed pointer is visible
    assert DatasetsDir(datasets).versions("ds") == [1]
    assert not (datasets / "ds" / "v2").exists()
    assert (datasets / "pointers" / "cur.json").read_bytes() == pointer
    assert tree_bytes(datasets / "ds" / "v1") == v1
    assert inspect_dataset("@cur", datasets_dir=datasets)["dataset_id"] == "ds/v1"
    assert validate_dataset("ds", datasets_dir=datasets)["valid"] is True
    listed = list_datasets(datasets_dir=datasets)["datasets"][0]
    assert [v["dataset_id"] for v in listed["versions"]] == ["ds/v1"]
    assert [(i["kind"], i["owner_alive"]) for i in listed["incomplete"]] == [("tmp", False)]

    # the next publication cleans up and completes
    result = materialize_v5_dataset(["many"], "ds", sessions_dir=many_battles, datasets_dir=datasets, promote="cur")
    assert result["dataset_id"] == "ds/v2" and result["row_counts"]["battles"] == 260
    assert any("removed .tmp-v2-" in line for line in result["recovered"])
    assert leftovers(datasets / "ds") == []
    assert json.loads((datasets / "pointers" / "cur.json").read_text())["dataset_id"] == "ds/v2"
