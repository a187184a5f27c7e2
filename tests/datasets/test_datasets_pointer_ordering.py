"""Publication and pointer promotion are ordered so that an error return means nothing was
published (issue 14, item 7), and a damaged pointer is reported with its file and field
(item 3).

The issue's case: ``materialize_v5_dataset(promote=p)`` with the pointers folder symlinked
outside returned an error, yet the version was published, and each retry published one more.
Now the pointer's place is checked (confined, writable) before anything is built, and a
pointer write that still fails after the version is in place (the folder swapped for a link
mid-build, a full filesystem) takes the version back: a new version is removed, an overwritten
one is restored byte for byte."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from extrarlhf.core.errors import CorruptRecord
from extrarlhf.datasets import (
    inspect_dataset,
    list_datasets,
    materialize_v5_dataset,
    promote_dataset,
    split_nemesis_training_dataset,
    split_v5_training_dataset,
    validate_dataset,
)
from extrarlhf.datasets.paths import DatasetsDir
from extrarlhf.datasets.pointers import list_pointers, read_pointer
from tests.datasets_helpers import GREEDY, RANDOM, expect_error, shared_sessions, tree_bytes
from tests.core.test_resources import Mounts, fill

OUT = "path_outside_datasets_dir"


@pytest.fixture()
def ds(tmp_path: Path) -> Path:
    """A datasets dir with 'good' v1 (greedy) promoted to 'cur'."""
    datasets = tmp_path / "datasets"
    materialize_v5_dataset([GREEDY], "good", sessions_dir=shared_sessions(), datasets_dir=datasets, promote="cur",
                           workers=1)
    return datasets


@pytest.fixture
def mounts(tmp_path: Path):
    m = Mounts(tmp_path / "unused")
    try:
        yield m
    finally:
        m.unmount_all()


def _state(datasets: Path) -> dict[str, bytes]:
    """Every file under the datasets dir except lock files (a pointer's place is proven
    writable by taking its lock), and the leftovers of publications."""
    state = tree_bytes(datasets)
    leftovers = [p.name for p in datasets.rglob(".*") if p.name.startswith((".tmp-", ".old-", ".trash-"))]
    assert not leftovers, leftovers
    return state


def _link_pointers_out(datasets: Path, outside: Path) -> None:
    shutil.move(str(datasets / "pointers"), str(outside / "pointers"))
    os.symlink(outside / "pointers", datasets / "pointers")


def _publishers(sessions: Path, datasets: Path) -> dict:
    return {
        "materialize": lambda **kw: materialize_v5_dataset([RANDOM], "good", sessions_dir=sessions,
                                                           datasets_dir=datasets, workers=1, **kw),
        "split_v5": lambda **kw: split_v5_training_dataset("good/v1", name="good-split", datasets_dir=datasets, **kw),
        "split_nemesis": lambda **kw: split_nemesis_training_dataset("good/v1", "lite", name="good-nl",
                                                                     datasets_dir=datasets, **kw),
    }


@pytest.mark.parametrize("publisher", ["materialize", "split_v5", "split_nemesis"])
def test_a_pointers_folder_linked_outside_publishes_nothing_however_often_it_is_retried(
        ds: Path, tmp_path: Path, publisher: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    _link_pointers_out(ds, outside)
    before, outside_before = _state(ds), tree_bytes(outside)
    publish = _publishers(shared_sessions(), ds)[publisher]
    for _ in range(3):  # each retry used to publish one more version
        err = expect_error(OUT, publish, promote="cur")
        assert "resolves outside" in str(err) and "pointers" in str(err)
        assert _state(ds) == before and tree_bytes(outside) == outside_before
    assert [d["name"] for d in list_datasets(datasets_dir=ds)["datasets"]] == ["good"]
    # without a pointer the same publication works: only the pointer's place was wrong
    assert publish()["version"] == (2 if publisher == "materialize" else 1)


def test_a_pointer_swapped_for_a_link_during_the_build_takes_the_new_version_back(ds: Path, tmp_path: Path) -> None:
    """The pointer's place was fine when checked and is not when written: the version that was
    already in place is removed again before the error is returned."""
    outside = tmp_path / "outside"
    outside.mkdir()
    before = _state(ds)
    seen: list[int] = []

    def swap(done: int, total: int) -> None:  # a real folder replaced by a link while the data is built
        if not seen:
            _link_pointers_out(ds, outside)
        seen.append(done)

    err = expect_error(OUT, materialize_v5_dataset, [RANDOM], "good", sessions_dir=shared_sessions(),
                       datasets_dir=ds, promote="cur", workers=1, progress=swap)
    assert seen and "resolves outside" in str(err)
    (ds / "pointers").unlink()
    shutil.move(str(outside / "pointers"), str(ds / "pointers"))
    assert _state(ds) == before  # no v2, no leftover, the pointer untouched
    assert DatasetsDir(ds).versions("good") == [1]


def test_an_overwrite_whose_pointer_fails_restores_the_old_version(ds: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    before = _state(ds)
    seen: list[int] = []

    def swap(done: int, total: int) -> None:
        if not seen:
            _link_pointers_out(ds, outside)
        seen.append(done)

    expect_error(OUT, materialize_v5_dataset, [RANDOM], "good", sessions_dir=shared_sessions(), datasets_dir=ds,
                 version=1, overwrite=True, promote="cur", workers=1, progress=swap)
    (ds / "pointers").unlink()
    shutil.move(str(outside / "pointers"), str(ds / "pointers"))
    assert _state(ds) == before  # v1 is the greedy data again, byte for byte, and 'cur' still matches it
    assert validate_dataset("@cur", datasets_dir=ds)["valid"]


def test_a_full_pointers_filesystem_publishes_nothing(ds: Path, mounts: Mounts) -> None:
    """A real full filesystem under the pointers folder: its lock file can still be created (an
    inode, no data), the pointer itself cannot be written, and the published version is taken
    back (a new one removed, an overwritten one restored)."""
    saved = {p.name: p.read_bytes() for p in (ds / "pointers").iterdir() if p.suffix == ".json"}
    shutil.rmtree(ds / "pointers")
    mounts.base = ds
    pointers = mounts.tmpfs("pointers", "64k")
    for name, data in saved.items():
        (pointers / name).write_bytes(data)
    fill(pointers)
    before = _state(ds)
    err = expect_error("disk_full", materialize_v5_dataset, [RANDOM], "good", sessions_dir=shared_sessions(),
                       datasets_dir=ds, promote="cur", workers=1)
    assert str(pointers) in str(err)
    assert _state(ds) == before and DatasetsDir(ds).versions("good") == [1]
    expect_error("disk_full", materialize_v5_dataset, [RANDOM], "good", sessions_dir=shared_sessions(),
                 datasets_dir=ds, version=1, overwrite=True, promote="cur", workers=1)
    assert _state(ds) == before
    (pointers / "filler.bin").unlink()
    result = materialize_v5_dataset([RANDOM], "good", sessions_dir=shared_sessions(), datasets_dir=ds,
                                    promote="cur", workers=1)
    assert result["version"] == 2 and result["pointer"]["dataset_id"] == "good/v2"


def test_a_read_only_pointers_folder_is_refused_before_anything_is_built(ds: Path, mounts: Mounts) -> None:
    saved = {p.name: p.read_bytes() for p in (ds / "pointers").iterdir() if p.suffix == ".json"}
    shutil.rmtree(ds / "pointers")
    mounts.base = ds
    pointers = mounts.tmpfs("pointers", "1m")
    for name, data in saved.items():
        (pointers / name).write_bytes(data)
    mounts.read_only(pointers)
    before = _state(ds)
    progressed: list[int] = []
    err = expect_error("read_only", materialize_v5_dataset, [RANDOM], "good", sessions_dir=shared_sessions(),
                       datasets_dir=ds, promote="cur", workers=1, progress=lambda d, t: progressed.append(d))
    assert str(pointers) in str(err) and progressed == []  # refused before the build started
    assert _state(ds) == before


# ------------------------------------------------------------------ damaged pointers (item 3)
@pytest.mark.parametrize("field,edit", [
    ("dataset_id", lambda doc: doc.pop("dataset_id")),
    ("dataset_id", lambda doc: doc.update(dataset_id=7)),
    ("dataset_id", lambda doc: doc.update(dataset_id="../../etc")),
    ("manifest_sha256", lambda doc: doc.pop("manifest_sha256")),
    ("version", lambda doc: doc.update(version=9)),
])
def test_a_pointer_missing_a_field_is_named(ds: Path, field: str, edit) -> None:
    """A pointer without dataset_id gave internal_error with nothing named."""
    path = ds / "pointers" / "cur.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    for reader in (lambda: read_pointer(DatasetsDir(ds), "cur"), lambda: inspect_dataset("@cur", datasets_dir=ds),
                   lambda: validate_dataset("@cur", datasets_dir=ds)):
        with pytest.raises(CorruptRecord) as info:
            reader()
        assert info.value.code == "corrupt_record"
        assert info.value.details["path"] == str(path.resolve()) and info.value.details["field"] == field
        assert "cur.json" in str(info.value) and repr(field) in str(info.value)
    listed = list_pointers(DatasetsDir(ds))
    assert listed == [{"pointer": "cur", "error": {"code": "corrupt_record", "message": listed[0]["error"]["message"],
                                                   "details": listed[0]["error"]["details"]}}]
    assert listed[0]["error"]["details"]["field"] == field
    # re-pointing it replaces the damaged document (that is its repair)
    assert promote_dataset("good/v1", "cur", datasets_dir=ds)["previous"] is None
    assert read_pointer(DatasetsDir(ds), "cur")["dataset_id"] == "good/v1"
