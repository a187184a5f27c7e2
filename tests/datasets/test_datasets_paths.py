"""Confinement of every dataset path to the datasets dir, for reads and for writes: '..',
absolute paths, symlinks pointing out and a symlinked parent are refused with a clear error,
and nothing outside the datasets dir is read or written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from extrarlhf.datasets import (dataset_readiness, inspect_dataset, list_datasets, materialize_v5_dataset,
                                promote_dataset, split_nemesis_training_dataset, split_v5_training_dataset,
                                validate_dataset)
from extrarlhf.datasets.paths import DatasetsDir, parse_ref, within
from tests.datasets_helpers import GREEDY, expect_error, shared_sessions, tree_bytes

OUT = "path_outside_datasets_dir"


@pytest.fixture()
def dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(datasets dir holding one published dataset 'good' + pointer 'cur', outside dir, sessions)."""
    sessions = shared_sessions()
    datasets = tmp_path / "datasets"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not yours")
    materialize_v5_dataset([GREEDY], "good", sessions_dir=sessions, datasets_dir=datasets, promote="cur")
    return datasets, outside, sessions


def _readers(datasets: Path):
    return [
        ("inspect", lambda ref: inspect_dataset(ref, datasets_dir=datasets)),
        ("validate", lambda ref: validate_dataset(ref, datasets_dir=datasets)),
        ("readiness", lambda ref: dataset_readiness(dataset=ref, datasets_dir=datasets)),
        ("promote", lambda ref: promote_dataset(ref, "p", datasets_dir=datasets)),
        ("split-v5", lambda ref: split_v5_training_dataset(ref, name="s", datasets_dir=datasets)),
        ("split-nemesis", lambda ref: split_nemesis_training_dataset(ref, "lite", name="n", datasets_dir=datasets)),
    ]


@pytest.mark.parametrize("ref", ["../outside", "good/../../outside", "..", "good/v1/../../.."])
def test_dotdot_is_refused_for_every_read(dirs, ref: str) -> None:
    datasets, _, _ = dirs
    for name, read in _readers(datasets):
        err = expect_error(OUT, read, ref)
        assert "'..'" in str(err) and "confined" in str(err), (name, str(err))


def test_absolute_paths_are_refused_for_every_read(dirs) -> None:
    datasets, outside, _ = dirs
    for ref in (str(outside), str(datasets / "good"), "/etc/passwd"):
        for name, read in _readers(datasets):
            err = expect_error(OUT, read, ref)
            assert "absolute" in str(err), (name, str(err))


def test_a_dataset_folder_symlinked_out_is_refused_for_reads_and_writes(dirs) -> None:
    datasets, outside, sessions = dirs
    (outside / "v1").mkdir()
    (outside / "v1" / "manifest.json").write_text("{}")
    os.symlink(outside, datasets / "evil")
    before = tree_bytes(outside)
    for name, read in _readers(datasets):
        for ref in ("evil", "evil/v1"):
            err = expect_error(OUT, read, ref)
            assert "resolves outside the datasets dir" in str(err), (name, str(err))
    # writing through the symlinked parent: materialize and split into "evil"
    err = expect_error(OUT, materialize_v5_dataset, [GREEDY], "evil", sessions_dir=sessions, datasets_dir=datasets)
    assert "through a symlink" in str(err)
    expect_error(OUT, split_v5_training_dataset, "good", name="evil", datasets_dir=datasets)
    assert tree_bytes(outside) == before  # nothing was written (or deleted) outside
    # list_datasets names it as refused and never reads it
    listed = {d["name"]: d for d in list_datasets(datasets_dir=datasets)["datasets"]}
    assert listed["evil"]["error"]["code"] == OUT and "versions" not in listed["evil"]
    assert [v["dataset_id"] for v in listed["good"]["versions"]] == ["good/v1"]


def test_a_version_folder_symlinked_out_is_refused(dirs) -> None:
    datasets, outside, _ = dirs
    (outside / "copy").mkdir()
    (outside / "copy" / "manifest.json").write_text("{}")
    os.symlink(outside / "copy", datasets / "good" / "v2")
    for name, read in _readers(datasets):
        err = expect_error(OUT, read, "good/v2")
        assert "resolves outside" in str(err), name
    # "good" means its latest version, v2 here: refused too, never silently v1
    expect_error(OUT, inspect_dataset, "good", datasets_dir=datasets)


def test_a_symlinked_pointers_dir_is_refused_for_reads_and_writes(dirs) -> None:
    datasets, outside, _ = dirs
    pointers = datasets / "pointers"
    (outside / "pointers").mkdir()
    (outside / "pointers" / "cur.json").write_text((pointers / "cur.json").read_text())
    for child in pointers.iterdir():
        child.unlink()
    pointers.rmdir()
    os.symlink(outside / "pointers", pointers)
    before = tree_bytes(outside)
    err = expect_error(OUT, promote_dataset, "good", "cur", datasets_dir=datasets)  # write
    assert "resolves outside" in str(err)
    expect_error(OUT, inspect_dataset, "@cur", datasets_dir=datasets)  # read
    expect_error(OUT, materialize_v5_dataset, [GREEDY], "good", sessions_dir=shared_sessions(),
                 datasets_dir=datasets, promote="cur")
    assert tree_bytes(outside) == before


def test_a_pointer_file_symlinked_out_is_refused(dirs) -> None:
    datasets, outside, _ = dirs
    target = outside / "p.json"
    target.write_text((datasets / "pointers" / "cur.json").read_text())
    os.symlink(target, datasets / "pointers" / "evil.json")
    before = target.read_bytes()
    expect_error(OUT, validate_dataset, "@evil", datasets_dir=datasets)
    expect_error(OUT, promote_dataset, "good", "evil", datasets_dir=datasets)
    assert target.read_bytes() == before


def test_prefix_of_the_datasets_dir_is_not_inside(tmp_path: Path) -> None:
    """/x/datasets2 starts with /x/datasets but is outside: the check uses a separator boundary."""
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets2" / "v1").mkdir(parents=True)
    os.symlink(tmp_path / "datasets2", tmp_path / "datasets" / "sneaky")
    d = DatasetsDir(tmp_path / "datasets")
    expect_error(OUT, d.resolve, "sneaky/v1")
    assert not within(str(tmp_path / "datasets2"), str(tmp_path / "datasets"))
    assert within(str(tmp_path / "datasets" / "a"), str(tmp_path / "datasets"))


def test_links_that_stay_inside_and_a_linked_root_are_allowed(dirs, tmp_path: Path) -> None:
    datasets, _, _ = dirs
    os.symlink(datasets / "good", datasets / "alias")  # inside -> inside: fine (like the reference server)
    assert inspect_dataset("alias/v1", datasets_dir=datasets)["manifest"]["dataset_id"] == "good/v1"
    link = tmp_path / "linked-root"
    os.symlink(datasets, link)  # the configured datasets dir itself may be a link
    assert validate_dataset("good", datasets_dir=link)["valid"] is True


def test_names_and_refs_are_simple(dirs) -> None:
    datasets, _, sessions = dirs
    for bad in ("a/b", "", "pointers", "-x", "a b", "x\x00"):
        err = expect_error("invalid_argument", materialize_v5_dataset, [GREEDY], bad, sessions_dir=sessions,
                           datasets_dir=datasets)
        assert "dataset name" in str(err) or "must be" in str(err), bad
    expect_error("invalid_argument", parse_ref, "good/v1/decisions.parquet")
    expect_error("invalid_argument", parse_ref, "good/latest")
    expect_error("invalid_argument", promote_dataset, "good", "../p", datasets_dir=datasets)
    assert repr(parse_ref("good/v3")) == "good/v3" and parse_ref("@cur").pointer == "cur"
