"""Cleanup of what dead processes leave behind: ``collect_garbage`` / ``extrarlhf gc`` over
real leftovers (a materialization SIGKILLed mid-publication, crafted folders and files of
dead and live owners), the sweep a publication makes of the other dataset folders, and the
lock-file protocol that makes deleting an unused lock file safe."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from extrarlhf.core.fileio import LockBusy, atomic_write_json, lock_path, locked, remove_unused_lock
from extrarlhf.datasets import materialize_v5_dataset, validate_dataset
from extrarlhf.datasets.paths import DatasetsDir
from extrarlhf.maintenance.cleanup import add_parser, collect_garbage
from tests.datasets_helpers import GREEDY, RANDOM, ROOT, shared_sessions, tree_bytes


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every entry under root (hidden ones and locks included): file bytes, None for folders."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = None if path.is_dir() and not path.is_symlink() else (
            path.read_bytes() if path.is_file() and not path.is_symlink() else b"->")
    return out


def summary(report: dict, key: str, roots: dict[str, Path]) -> set[tuple[str, str, str]]:
    """(root kind, path relative to its root, kind) of each entry of report[key]."""
    out = set()
    for item in report[key]:
        rel = os.path.relpath(item["path"], os.path.realpath(roots[item["root"]]))
        out.add((item["root"], rel, item["kind"]))
    return out


# --------------------------------------------------------------------------- a real SIGKILL
_KILLED_MATERIALIZE = """
import sys, time, pathlib
from extrarlhf.datasets import materialize_v5_dataset

def progress(done, total):  # the Parquet writers are open and hold a row group: stop here
    pathlib.Path(sys.argv[3]).write_text("writing")
    time.sleep(600)

materialize_v5_dataset([sys.argv[4]], "ds", sessions_dir=sys.argv[1], datasets_dir=sys.argv[2], progress=progress)
"""


def test_gc_cleans_up_after_a_publication_killed_with_sigkill(tmp_path: Path) -> None:
    datasets, marker = tmp_path / "datasets", tmp_path / "marker"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_MATERIALIZE, str(shared_sessions()), str(datasets),
                             str(marker), GREEDY], cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, "the materialization ended before it could be killed"
            assert time.monotonic() < deadline, "the materialization never started writing"
            time.sleep(0.01)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    folder = datasets / "ds"
    temps = [p.name for p in folder.iterdir() if p.name.startswith(".tmp-")]
    assert len(temps) == 1 and temps[0].startswith(f".tmp-v1-{proc.pid}-")
    assert (folder / temps[0] / "decisions.parquet").exists() and (folder / ".publish.lock").exists()
    roots = {"datasets": datasets}

    # a dry run reports and changes nothing
    before = snapshot(datasets)
    dry = collect_garbage(None, datasets, None, dry_run=True)
    assert dry["dry_run"] is True and snapshot(datasets) == before
    expected = {("datasets", f"ds/{temps[0]}", "publication_tmp"), ("datasets", "ds/.publish.lock", "lock")}
    assert summary(dry, "removed", roots) == expected and dry["left"] == [] and dry["errors"] == []

    report = collect_garbage(None, datasets, None)
    assert summary(report, "removed", roots) == expected and report["left"] == [] and report["errors"] == []
    tmp_entry = next(i for i in report["removed"] if i["kind"] == "publication_tmp")
    assert tmp_entry["pid"] == proc.pid and tmp_entry["action"] == "deleted" and str(proc.pid) in tmp_entry["reason"]
    assert report["counts"] == {"removed": 2, "left": 0, "errors": 0}
    assert report["roots"] == {"sessions": None, "datasets": str(datasets.resolve()), "checkpoints": None}
    assert list(folder.iterdir()) == []
    assert collect_garbage(None, datasets, None)["removed"] == []  # idempotent
    result = materialize_v5_dataset([RANDOM], "ds", sessions_dir=shared_sessions(), datasets_dir=datasets)
    assert result["dataset_id"] == "ds/v1" and validate_dataset("ds", datasets_dir=datasets)["valid"] is True


# --------------------------------------------------------------------------- crafted leftovers
def _dir(path: Path, *files: str) -> Path:
    path.mkdir(parents=True)
    for name in files:
        (path / name).write_text("partial")
    return path


def test_gc_removes_what_dead_owners_left_and_reports_what_live_ones_hold(tmp_path: Path) -> None:
    sessions, datasets, checkpoints = tmp_path / "sessions", tmp_path / "datasets", tmp_path / "checkpoints"
    roots = {"sessions": sessions, "datasets": datasets, "checkpoints": checkpoints}
    dead, me = dead_pid(), os.getpid()

    # datasets: an overwrite of d/v1 that did not commit (the old copy aside, a new v1 half in place), a
    # committed overwrite's trash, a live publisher's build; dataset e is being published right now
    materialize_v5_dataset([RANDOM], "d", sessions_dir=shared_sessions(), datasets_dir=datasets)
    original_v1 = tree_bytes(datasets / "d" / "v1")
    shutil.copytree(datasets / "d" / "v1", datasets / "d" / f".old-v1-{dead}-0a1b2c3d")
    (datasets / "d" / "v1" / "manifest.json").write_text("{half")
    _dir(datasets / "d" / f".trash-v1-{dead}-1a1b2c3d", "decisions.parquet")
    _dir(datasets / "d" / f".tmp-v2-{me}-2a1b2c3d", "decisions.parquet")
    _dir(datasets / "e" / f".tmp-v1-{dead}-3a1b2c3d", "decisions.parquet")
    (datasets / "pointers").mkdir()
    (datasets / "pointers" / "cur.json.lock").touch()
    (datasets / "pointers" / f".cur.json.{dead}-abcd1234.tmp").write_text("{")
    outside = _dir(tmp_path / "outside" / f".tmp-v1-{dead}-4a1b2c3d", "x")  # reached only through a symlink
    (datasets / "link").symlink_to(outside.parent)

    # sessions: a battle written by a dead series and one being written now; unused and held locks
    battles = sessions / "g" / "battles"
    _dir(battles / "b000001" / "v5", "actions.jsonl")
    _dir(battles / f".tmp-b000002-{dead}-0badc0de" / "v5", "actions.jsonl")
    _dir(battles / f".tmp-b000003-{me}-0badc0df" / "v5", "actions.jsonl")
    for name in ("catalog.jsonl.lock", "manifest.json.lock", "battles.lock"):
        (sessions / "g" / name).touch()
    (sessions / "g" / "catalog.jsonl").write_text("{}\n")

    # checkpoints: atomic-write temps of a dead and of a live writer, old pid-less ones, locks
    checkpoints.mkdir()
    atomic_write_json(checkpoints / "index.json", {"schema_version": 1, "checkpoints": {}})
    (checkpoints / f".index.json.{dead}-abcd1234.tmp").write_text("{")
    (checkpoints / f".index.json.{me}-abcd1235.tmp").write_text("{")
    (checkpoints / ".promoted.json.k2j3h4g5.tmp").write_text("{")
    os.utime(checkpoints / ".promoted.json.k2j3h4g5.tmp", (time.time() - 7200,) * 2)
    (checkpoints / ".promoted.json.zzzzzzzz.tmp").write_text("{")  # fresh: maybe being written
    (checkpoints / "index.json.lock").touch()
    _dir(checkpoints / "benchmarks")
    (checkpoints / "benchmarks" / "sequence.lock").touch()

    removed = {
        ("datasets", f"d/.old-v1-{dead}-0a1b2c3d", "publication_old"),
        ("datasets", f"d/.trash-v1-{dead}-1a1b2c3d", "publication_trash"),
        ("datasets", "pointers/cur.json.lock", "lock"),
        ("datasets", f"pointers/.cur.json.{dead}-abcd1234.tmp", "temp_file"),
        ("sessions", f"g/battles/.tmp-b000002-{dead}-0badc0de", "temp_dir"),
        ("sessions", "g/catalog.jsonl.lock", "lock"),
        ("sessions", "g/manifest.json.lock", "lock"),
        ("checkpoints", f".index.json.{dead}-abcd1234.tmp", "temp_file"),
        ("checkpoints", ".promoted.json.k2j3h4g5.tmp", "temp_file"),
        ("checkpoints", "index.json.lock", "lock"),
        ("checkpoints", "benchmarks/sequence.lock", "lock"),
    }
    left = {
        ("datasets", f"d/.tmp-v2-{me}-2a1b2c3d", "publication_tmp"),
        ("datasets", f"e/.tmp-v1-{dead}-3a1b2c3d", "publication_tmp"),
        ("datasets", "e/.publish.lock", "lock"),
        ("sessions", f"g/battles/.tmp-b000003-{me}-0badc0df", "temp_dir"),
        ("sessions", "g/battles.lock", "lock"),
        ("checkpoints", f".index.json.{me}-abcd1235.tmp", "temp_file"),
        ("checkpoints", ".promoted.json.zzzzzzzz.tmp", "temp_file"),
    }
    with locked(datasets / "e" / ".publish"), locked(sessions / "g" / "battles"):
        before = snapshot(tmp_path)
        dry = collect_garbage(sessions, datasets, checkpoints, dry_run=True)
        assert snapshot(tmp_path) == before
        report = collect_garbage(sessions, datasets, checkpoints)
    for r in (dry, report):
        assert summary(r, "removed", roots) == removed | {("datasets", "d/.publish.lock", "lock")}
        assert summary(r, "left", roots) == left and r["errors"] == []
    assert {i["action"] for i in report["removed"]} == {"deleted", "restored"}
    restored = [i for i in report["removed"] if i["action"] == "restored"]
    assert len(restored) == 1 and "put back" in restored[0]["reason"] and restored[0]["pid"] == dead
    reasons = {os.path.relpath(i["path"], tmp_path): i["reason"] for i in report["left"]}
    assert reasons[f"datasets/d/.tmp-v2-{me}-2a1b2c3d"] == f"its publisher (pid {me}) is alive"
    assert "publication of this dataset is running" in reasons[f"datasets/e/.tmp-v1-{dead}-3a1b2c3d"]
    assert "held" in reasons["sessions/g/battles.lock"]
    assert "no owner pid recorded" in reasons["checkpoints/.promoted.json.zzzzzzzz.tmp"]

    # the filesystem: the uncommitted overwrite is undone, everything else of the dead is gone
    assert tree_bytes(datasets / "d" / "v1") == original_v1
    assert validate_dataset("d/v1", datasets_dir=datasets)["valid"] is True
    assert sorted(p.name for p in (datasets / "d").iterdir()) == [".card-sizes.json", f".tmp-v2-{me}-2a1b2c3d", "README.md",
                                                                  "v1"]
    assert sorted(p.name for p in battles.iterdir()) == [f".tmp-b000003-{me}-0badc0df", "b000001"]
    assert (battles / "b000001" / "v5" / "actions.jsonl").read_text() == "partial"
    assert sorted(p.name for p in (sessions / "g").iterdir()) == ["battles", "battles.lock", "catalog.jsonl"]
    assert sorted(p.name for p in checkpoints.iterdir()) == [f".index.json.{me}-abcd1235.tmp",
                                                             ".promoted.json.zzzzzzzz.tmp", "benchmarks", "index.json"]
    assert outside.exists()  # a symlink is never followed out of the dirs

    # once the live owners are gone, the rest goes too (the pids in names are the test's own: rename them)
    for path in (datasets / "d" / f".tmp-v2-{me}-2a1b2c3d", battles / f".tmp-b000003-{me}-0badc0df"):
        path.rename(path.with_name(path.name.replace(f"-{me}-", f"-{dead}-")))
    again = collect_garbage(sessions, datasets, checkpoints)
    assert {os.path.relpath(i["path"], tmp_path) for i in again["removed"]} == {
        f"datasets/d/.tmp-v2-{dead}-2a1b2c3d", f"datasets/e/.tmp-v1-{dead}-3a1b2c3d", "datasets/e/.publish.lock",
        f"sessions/g/battles/.tmp-b000003-{dead}-0badc0df", "sessions/g/battles.lock"}
    assert {os.path.relpath(i["path"], tmp_path) for i in again["left"]} == {
        f"checkpoints/.index.json.{me}-abcd1235.tmp", "checkpoints/.promoted.json.zzzzzzzz.tmp"}
    assert DatasetsDir(datasets).versions("d") == [1] and list((datasets / "e").iterdir()) == []


def test_the_next_publication_sweeps_the_other_dataset_folders(tmp_path: Path) -> None:
    datasets, dead = tmp_path / "datasets", dead_pid()
    _dir(datasets / "b" / f".tmp-v1-{dead}-0a1b2c3d", "decisions.parquet")
    (datasets / "b" / ".publish.lock").touch()
    _dir(datasets / "busy" / f".tmp-v1-{dead}-1a1b2c3d", "decisions.parquet")
    with locked(datasets / "busy" / ".publish"):  # a publication of "busy" is running: left alone
        result = materialize_v5_dataset([RANDOM], "a", sessions_dir=shared_sessions(), datasets_dir=datasets)
    assert f"b: removed .tmp-v1-{dead}-0a1b2c3d left by a dead publisher (pid {dead})" in result["recovered"]
    assert list((datasets / "b").iterdir()) == []  # its unused lock file went too
    assert sorted(p.name for p in (datasets / "busy").iterdir()) == [".publish.lock", f".tmp-v1-{dead}-1a1b2c3d"]


# --------------------------------------------------------------------------- the lock-file protocol
def test_an_unused_lock_file_is_removed_and_a_held_one_is_not(tmp_path: Path) -> None:
    target = tmp_path / "index.json"
    with locked(target):
        assert remove_unused_lock(lock_path(target)) is False and lock_path(target).exists()
        with pytest.raises(LockBusy):
            with locked(target, wait=False):
                pass
    # held by another process
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from extrarlhf.core.fileio import locked\n"
                               "with locked(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)",
                               str(target)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert remove_unused_lock(lock_path(target)) is False and lock_path(target).exists()
    finally:
        holder.kill()
        holder.wait()
    assert remove_unused_lock(lock_path(target), dry_run=True) is True and lock_path(target).exists()
    assert remove_unused_lock(lock_path(target)) is True and not lock_path(target).exists()
    assert remove_unused_lock(lock_path(target)) is True  # already gone
    with locked(target, remove=True):
        assert lock_path(target).exists()
    assert not lock_path(target).exists()


def test_a_waiter_on_a_deleted_lock_file_takes_the_new_one(tmp_path: Path) -> None:
    """The holder deletes the lock file while a waiter blocks on it: the waiter, once it gets the
    flock of the deleted file, must notice and lock the file now at the path, so that a third
    taker is excluded (without the check both would think they hold the lock)."""
    target = tmp_path / "x"
    inside, release = threading.Event(), threading.Event()

    def waiter() -> None:
        with locked(target):
            inside.set()
            release.wait(30)

    with locked(target, remove=True):
        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.2)  # the waiter is blocked in flock on the file about to be deleted
        assert not inside.is_set()
    assert inside.wait(10)
    try:
        with pytest.raises(LockBusy):  # the waiter holds the lock of the file at the path
            with locked(target, wait=False):
                pass
        assert remove_unused_lock(lock_path(target)) is False
    finally:
        release.set()
        thread.join(10)
    with locked(target, wait=False):
        pass


# --------------------------------------------------------------------------- the command
def test_the_gc_command(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    datasets, dead = tmp_path / "datasets", dead_pid()
    _dir(datasets / "d" / f".tmp-v1-{dead}-0a1b2c3d", "decisions.parquet")
    parser = argparse.ArgumentParser(prog="extrarlhf")
    add_parser(parser.add_subparsers(dest="command", required=True))
    common = ["--sessions-dir", str(tmp_path / "none"), "--datasets-dir", str(datasets), "--checkpoints-dir",
              str(tmp_path / "none")]

    args = parser.parse_args(["gc", "--dry-run", *common])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert f"would remove: {datasets.resolve() / 'd' / f'.tmp-v1-{dead}-0a1b2c3d'} (left by a dead publisher " \
           f"(pid {dead}))" in out
    assert f"dry run: 1 would be removed, 0 left, 0 errors; walked datasets {datasets.resolve()}" in out
    assert (datasets / "d" / f".tmp-v1-{dead}-0a1b2c3d").exists()

    args = parser.parse_args(["gc", "--json", *common])
    assert args.func(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(i["kind"], i["action"]) for i in report["removed"]] == [("publication_tmp", "deleted")]
    assert list((datasets / "d").iterdir()) == []

    args = parser.parse_args(["gc", *common])
    assert args.func(args) == 0
    assert capsys.readouterr().out.strip() == f"0 removed, 0 left, 0 errors; walked datasets {datasets.resolve()}"
