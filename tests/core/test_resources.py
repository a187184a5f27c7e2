"""Resource failures are clear errors, and failures leak nothing.

* A read-only filesystem (a real tmpfs mounted ``ro``: ``chmod`` does not stop root) and a
  full one (a tiny tmpfs filled up) under the datasets and checkpoints dirs give
  ``read_only`` / ``disk_full`` naming the directory -- from the core (RLHFError), the MCP
  envelope and the CLI -- and leave nothing half-written. ``permission_denied`` (EACCES/EPERM,
  which root never meets on a real directory) is checked on the translation itself.
* Failing materializations, splits and publications do not leak descriptors: the number of
  entries of ``/proc/self/fd`` is the same after 30 failures of each (with the exceptions
  kept alive, as a server's log or a test report keeps them, and the cycle collector off).
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from extrarlhf.checkpoints.registry import CheckpointRegistry
from extrarlhf.core.errors import DiskFull, PermissionDenied, ReadOnlyFilesystem, ResourceError, RLHFError
from extrarlhf.core.fileio import append_line_locked, atomic_write_json, locked, writing
from extrarlhf.datasets import materialize_v5_dataset, promote_dataset
from extrarlhf.datasets.paths import DatasetsDir
from extrarlhf.datasets.publish import publish_version
from extrarlhf.datasets.splits import split_v5_training_dataset
from extrarlhf.datasets.tables import StreamingTable
from extrarlhf.runtime.sessions import SessionStore
from mcp_server.envelope import from_exception
from tests import onnx_factory
from tests.datasets_helpers import GREEDY, RANDOM, copy_sessions, expect_error, shared_sessions
from tests.trace_helpers import read_trace, write_trace


# --------------------------------------------------------------------------- real tmpfs mounts
class Mounts:
    """tmpfs mounts made by one test; every one is unmounted at teardown, whatever happened."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.mounted: list[Path] = []

    def tmpfs(self, name: str, size: str) -> Path:
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root (chmod does not make a directory read-only for root)")
        if shutil.which("mount") is None or shutil.which("umount") is None:
            pytest.skip("mount/umount are not installed")
        path = self.base / name
        path.mkdir(parents=True)
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "none", str(path)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"this sandbox does not permit mounting a tmpfs ({proc.stderr.strip() or proc.returncode}); "
                        f"the read-only and full-filesystem tests need a real one")
        self.mounted.append(path)
        return path

    def read_only(self, path: Path) -> None:
        proc = subprocess.run(["mount", "-o", "remount,ro", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        with pytest.raises(OSError) as info:
            (path / "probe").write_bytes(b"x")
        assert info.value.errno == errno.EROFS

    def unmount_all(self) -> None:
        for path in reversed(self.mounted):
            if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(path)], capture_output=True)
        self.mounted.clear()


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[Mounts]:
    m = Mounts(tmp_path / "mnt")
    try:
        yield m
    finally:
        m.unmount_all()


def fill(folder: Path, leave: int = 0) -> None:
    """Fill the filesystem of ``folder`` up to ``leave`` free bytes (0: completely)."""
    with open(folder / "filler.bin", "wb") as fh:
        while True:
            free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
            if free <= leave:
                break
            try:
                fh.write(b"\0" * min(4096, max(free - leave, 1)))
                fh.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break


def listing(root: Path) -> dict[str, int]:
    """Every entry under root (hidden ones and locks included) with its size (-1 for folders)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = -1
        for name in filenames:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = os.path.getsize(path)
    return out


def half_written(root: Path) -> list[str]:
    """Temp files and folders of unfinished writes under root."""
    return sorted(p for p in listing(root)
                  if any(part.startswith((".tmp-", ".old-", ".trash-")) or part.endswith(".tmp")
                         for part in Path(p).parts))


def capture(fn, *args, **kwargs) -> BaseException:
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    return info.value


def envelope_error(tool: str, exc: BaseException) -> dict:
    result = from_exception(tool, exc)
    assert result.is_error
    return result.structured_content["error"]


# --------------------------------------------------------------------------- the translation
@pytest.mark.parametrize("code, cls, err", [("disk_full", DiskFull, errno.ENOSPC), ("disk_full", DiskFull, errno.EDQUOT),
                                            ("read_only", ReadOnlyFilesystem, errno.EROFS),
                                            ("permission_denied", PermissionDenied, errno.EACCES),
                                            ("permission_denied", PermissionDenied, errno.EPERM)])
def test_writing_translates_resource_errors_naming_the_directory(tmp_path: Path, code, cls, err) -> None:
    folder = tmp_path / "datasets"
    with pytest.raises(cls) as info:
        with writing(folder, "publishing dataset 'x'"):
            raise OSError(err, os.strerror(err))
    exc = info.value
    assert isinstance(exc, ResourceError) and isinstance(exc, RLHFError) and exc.code == code
    assert str(folder) in str(exc) and "publishing dataset 'x'" in str(exc)
    assert exc.details == {"directory": str(folder), "errno": errno.errorcode[err]}
    assert isinstance(exc.__cause__, OSError)
    # the MCP envelope passes it on with its code and directory, never as internal_error
    error = envelope_error("materialize_v5_dataset", exc)
    assert error["code"] == code and error["details"]["directory"] == str(folder)
    # an OSError some writer did not translate is mapped by the envelope as well
    raw = OSError(err, os.strerror(err), str(folder / "index.json"))
    error = envelope_error("register_checkpoint", raw)
    assert error["code"] == code and str(folder) in error["message"]


def test_other_errors_pass_through_and_the_innermost_translation_wins(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        with writing(tmp_path, "x"):
            raise FileNotFoundError(errno.ENOENT, "gone")
    with pytest.raises(DiskFull) as info:
        with writing(tmp_path, "outer"), writing(tmp_path / "inner", "inner work"):
            raise OSError(errno.ENOSPC, "full")
    assert str(tmp_path / "inner") in str(info.value) and "inner work" in str(info.value)
    # a file outside the directory (a source that could not be read) is named by its own directory
    with pytest.raises(PermissionDenied) as info:
        with writing(tmp_path / "datasets", "publishing"):
            raise PermissionError(errno.EACCES, "denied", "/elsewhere/sessions/g/catalog.jsonl")
    assert info.value.directory == "/elsewhere/sessions/g"
    assert envelope_error("x", RuntimeError("boom"))["code"] == "internal_error"


# --------------------------------------------------------------------------- read-only datasets dir
def test_materialize_into_a_read_only_datasets_dir(mounts: Mounts, capsys: pytest.CaptureFixture) -> None:
    from extrarlhf.cli import main

    root = mounts.tmpfs("datasets", "8m")
    materialize_v5_dataset([RANDOM], "d", sessions_dir=shared_sessions(), datasets_dir=root, promote="cur")
    mounts.read_only(root)
    before = listing(root)

    # an existing dataset folder: the folder being written is named
    err = expect_error("read_only", materialize_v5_dataset, [RANDOM], "d", sessions_dir=shared_sessions(),
                       datasets_dir=root)
    assert isinstance(err, ReadOnlyFilesystem) and err.details["directory"] == str(root / "d")
    assert f"{root / 'd'} is on a read-only filesystem" in str(err) and "remount" in str(err)
    # a new dataset: the datasets dir itself is named
    err = expect_error("read_only", materialize_v5_dataset, [RANDOM], "new", sessions_dir=shared_sessions(),
                       datasets_dir=root)
    assert err.details["directory"] == str(root)
    # promoting a pointer writes in the pointers folder
    err = expect_error("read_only", promote_dataset, "d/v1", "other", datasets_dir=root)
    assert err.details["directory"] == str(root / "pointers")
    assert envelope_error("materialize_v5_dataset", err)["code"] == "read_only"

    # the CLI prints the code and the directory, no traceback
    code = main(["datasets", "materialize", "--group", RANDOM, "--name", "d", "--sessions-dir", str(shared_sessions()),
                 "--datasets-dir", str(root)])
    printed = capsys.readouterr().err
    assert code == 2 and printed.startswith("error [read_only]: ") and str(root / "d") in printed
    assert "Traceback" not in printed
    assert listing(root) == before  # nothing was written, nothing half-written is left


@pytest.mark.anyio
async def test_the_mcp_tools_report_read_only_not_internal_error(mounts: Mounts, tmp_path: Path) -> None:
    from mcp import Client

    from mcp_server import build_server
    from tests.mcp_helpers import Checked

    datasets = mounts.tmpfs("datasets", "1m")
    checkpoints = mounts.tmpfs("checkpoints", "1m")
    model = onnx_factory.save(onnx_factory.v5_model(), checkpoints / "m.onnx")  # a path the server may read
    mounts.read_only(datasets)
    mounts.read_only(checkpoints)
    server = build_server(shared_sessions(), datasets, checkpoints)
    async with Client(server) as client:
        c = Checked(client)
        error = await c.err("materialize_v5_dataset", {"groups": [RANDOM], "name": "d"}, code="read_only")
        assert str(datasets) in error["message"]
        error = await c.err("register_checkpoint", {"name": "m", "path": str(model)}, code="read_only")
        assert str(checkpoints) in error["message"]
    assert listing(datasets) == {} and list(listing(checkpoints)) == ["m.onnx"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


# --------------------------------------------------------------------------- full datasets dir
def test_materialize_into_a_full_datasets_dir(mounts: Mounts) -> None:
    root = mounts.tmpfs("datasets", "64k")
    (root / "t").mkdir()
    fill(root, leave=8192)
    fds = len(os.listdir("/proc/self/fd"))
    errors = []
    for _ in range(5):
        err = expect_error("disk_full", materialize_v5_dataset, [GREEDY], "t", sessions_dir=shared_sessions(),
                           datasets_dir=root)
        errors.append(err)
    assert isinstance(err, DiskFull) and err.details["directory"] == str(root / "t")
    assert f"no space left on the filesystem of {root / 't'}" in str(err) and "free space" in str(err)
    assert envelope_error("materialize_v5_dataset", err)["code"] == "disk_full"
    assert half_written(root) == [] and sorted(p.name for p in (root / "t").iterdir()) == [".publish.lock"]
    assert len(os.listdir("/proc/self/fd")) == fds  # no descriptor to a deleted Parquet file
    # with the filler gone the space is all back: no deleted temp file is still held open
    (root / "filler.bin").unlink()
    st = os.statvfs(root)
    assert st.f_bfree == st.f_blocks


# --------------------------------------------------------------------------- checkpoints dir
def test_checkpoint_registry_and_promotion_on_a_read_only_dir(mounts: Mounts, tmp_path: Path) -> None:
    from extrarlhf.policies.promotion import promote_checkpoint, rollback_promotion

    root = mounts.tmpfs("checkpoints", "2m")
    model = onnx_factory.save(onnx_factory.v5_model(), tmp_path / "m.onnx")
    CheckpointRegistry(root).register("a", model, "v5")
    mounts.read_only(root)
    before = listing(root)

    for fn in (lambda: promote_checkpoint("a", checkpoints_dir=root, require_current_incumbent=False),
               lambda: rollback_promotion(checkpoints_dir=root)):
        err = capture(fn)
        assert isinstance(err, ReadOnlyFilesystem), repr(err)
        assert err.details["directory"] == str(root) and str(root) in str(err)
    # registering writes the model and the index: whatever layer reports it, the caller sees read_only
    err = capture(CheckpointRegistry(root).register, "b", model, "v5")
    error = envelope_error("register_checkpoint", err)
    assert error["code"] == "read_only" and str(root) in error["message"]
    assert listing(root) == before


def test_checkpoint_writes_on_a_full_dir(mounts: Mounts, tmp_path: Path) -> None:
    from extrarlhf.policies.benchmarking import benchmark_models

    root = mounts.tmpfs("checkpoints", "1m")
    small = onnx_factory.save(onnx_factory.v5_model(), tmp_path / "small.onnx")
    big = onnx_factory.save(onnx_factory.mlp_v5(width=256), tmp_path / "big.onnx")
    CheckpointRegistry(root).register("a", small, "v5")
    fill(root)
    before = listing(root)

    err = capture(CheckpointRegistry(root).register, "big", big, "v5")
    assert envelope_error("register_checkpoint", err)["code"] == "disk_full"
    if isinstance(err, ResourceError):  # translated where the model is copied (checkpoints.py), the root is named
        assert err.details["directory"] == str(root) and str(root) in str(err)
    assert [c["name"] for c in CheckpointRegistry(root).list()] == ["a"]

    # a benchmark report is written atomically into <checkpoints>/benchmarks
    err = expect_error("disk_full", benchmark_models, "a", "baseline:greedy", n_pairs=1, baseline_pairs=0,
                       checkpoints_dir=root)
    assert err.details["directory"] == str(root / "benchmarks")
    after = listing(root)
    assert half_written(root) == []
    assert {k: v for k, v in after.items() if not k.startswith("benchmarks")} == before
    assert [k for k in after if k.startswith("benchmarks/") and not k.endswith(".lock")] == []


# --------------------------------------------------------------------------- fileio on real filesystems
def test_atomic_writes_appends_and_locks_on_full_and_read_only_filesystems(mounts: Mounts) -> None:
    full = mounts.tmpfs("full", "64k")
    atomic_write_json(full / "doc.json", {"v": 1})
    (full / "log.jsonl").write_text("{}\n")
    fill(full)
    err = expect_error("disk_full", atomic_write_json, full / "doc.json", {"v": "x" * 10000})
    assert err.details["directory"] == str(full) and "doc.json" in str(err)
    expect_error("disk_full", append_line_locked, full / "log.jsonl", json.dumps({"x": "y" * 8000}))
    assert json.loads((full / "doc.json").read_text()) == {"v": 1} and (full / "log.jsonl").read_text() == "{}\n"
    assert half_written(full) == []

    ro = mounts.tmpfs("ro", "64k")
    atomic_write_json(ro / "doc.json", {"v": 1})
    mounts.read_only(ro)
    err = expect_error("read_only", atomic_write_json, ro / "doc.json", {"v": 2})
    assert err.details["directory"] == str(ro)
    with pytest.raises(ReadOnlyFilesystem) as info:
        with locked(ro / "doc.json"):
            pass
    assert "doc.json.lock" in str(info.value)
    assert sorted(listing(ro)) == ["doc.json"]


# --------------------------------------------------------------------------- descriptor leaks
def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


@contextlib.contextmanager
def no_descriptor_growth() -> Iterator[list]:
    """Yields a list to keep the failures' exceptions alive (tracebacks hold the builds' frames);
    the cycle collector is off, so only explicit closing can release a descriptor."""
    kept: list = []
    gc.collect()
    gc.disable()
    try:
        before = fd_count()
        yield kept
        after = fd_count()
        leaked = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                  if os.path.exists(f"/proc/self/fd/{fd}") and "deleted" in os.readlink(f"/proc/self/fd/{fd}")]
        assert after == before, f"{after - before} descriptors leaked, e.g. {leaked[:5]}"
    finally:
        gc.enable()
        kept.clear()


def test_failing_materializations_leak_no_descriptor(tmp_path: Path) -> None:
    sessions = copy_sessions(tmp_path / "sessions")
    victim = list(SessionStore(sessions).battles(GREEDY))[3]
    write_trace(victim.path, "actions.jsonl",  # no longer its catalog digest
                read_trace(victim.path, "actions.jsonl").replace(b'"turn":1,', b'"turn":2,', 1))
    datasets = tmp_path / "datasets"
    with no_descriptor_growth() as kept:
        for i in range(30):
            kept.append(expect_error("integrity_error", materialize_v5_dataset, [GREEDY], "t", sessions_dir=sessions,
                                     datasets_dir=datasets, workers=1 + i % 2))
    assert sorted(p.name for p in (datasets / "t").iterdir()) == [".publish.lock"]


def test_failing_splits_and_publications_leak_no_descriptor(tmp_path: Path) -> None:
    datasets = tmp_path / "datasets"
    materialize_v5_dataset([GREEDY], "g", sessions_dir=shared_sessions(), datasets_dir=datasets)

    def cancel(done: int, total: int) -> None:
        raise RLHFError("cancelled by the client", "cancelled")

    def leaky_build(folder: Path, dataset_id: str, version: int) -> dict:
        StreamingTable(folder / "decisions.parquet", "decisions", 100)  # never closed by anyone
        raise RuntimeError("a build that fails with its writer open")

    with no_descriptor_growth() as kept:
        for _ in range(30):  # mid-build: the split writers are open when it fails
            kept.append(expect_error("cancelled", split_v5_training_dataset, "g", datasets_dir=datasets,
                                     progress=cancel))
        for _ in range(30):  # a materialization stopped mid-build
            kept.append(expect_error("cancelled", materialize_v5_dataset, [GREEDY], "g", sessions_dir=shared_sessions(),
                                     datasets_dir=datasets, progress=cancel))
        for _ in range(30):  # publication itself releases writers no error path closed
            with pytest.raises(RuntimeError) as info:
                publish_version(DatasetsDir(datasets), "leaky", leaky_build)
            kept.append(info.value)
    assert half_written(datasets) == []
    assert DatasetsDir(datasets).versions("g") == [1] and DatasetsDir(datasets).versions("leaky") == []
