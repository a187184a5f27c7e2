"""The dataset format version (manifest ``schema_version``): format 2 stores decks as fixed-size
lists; a version of format 1 (an earlier ExtraRLHF) is refused by every reader with what changed
and how to rebuild it, never read as if it were current, and rebuilding it works."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import engine
from extrarlhf.datasets import (
    materialize_v5_dataset,
    split_v5_training_dataset,
    validate_dataset,
    write_dataset_card,
)
from extrarlhf.datasets.tables import DATASET_SCHEMA_VERSION, FORMAT_CHANGES, SCHEMAS
from tests.datasets_helpers import GREEDY, expect_error, read_manifest, shared_sessions, write_manifest

LENIENT = {"min_v5_battles": 1, "min_v5_decisions": 1}


def _format_1(root: Path) -> Path:
    """A real version made to look like format 1: its manifest says so and its decks are
    variable-length lists, as an earlier ExtraRLHF wrote them."""
    materialize_v5_dataset([GREEDY], "old", sessions_dir=shared_sessions(), datasets_dir=root)
    folder = root / "old" / "v1"
    battles = pq.read_table(folder / "battles.parquet")
    for name in ("p1_deck", "p2_deck"):
        index = battles.schema.get_field_index(name)
        field = pa.field(name, pa.list_(pa.field("element", pa.int16())), nullable=False)
        battles = battles.set_column(index, field, battles.column(name).cast(field.type))
    pq.write_table(battles, folder / "battles.parquet")
    manifest = read_manifest(folder)
    manifest["schema_version"] = 1
    write_manifest(folder, manifest)
    return folder


def test_format_2_decks_are_fixed_size() -> None:
    assert DATASET_SCHEMA_VERSION == 2 and set(FORMAT_CHANGES) == {2}
    for table in ("battles", "timestamp_inputs"):
        for name in ("p1_deck", "p2_deck"):
            typ = SCHEMAS[table].field(name).type
            assert pa.types.is_fixed_size_list(typ) and typ.list_size == engine.DECK_SIZE, (table, name)


def test_a_format_1_version_is_refused_with_how_to_rebuild_it(tmp_path: Path) -> None:
    root = tmp_path / "datasets"
    folder = _format_1(root)
    report = validate_dataset("old/v1", datasets_dir=root)
    assert not report["valid"]
    [failure] = [f for f in report["failures"] if f["code"] == "manifest_unreadable"]
    assert "dataset format 1 was written by an earlier ExtraRLHF; this one reads format 2" in failure["message"]
    assert "fixed_size_list<int16>[30]" in failure["message"] and "Rebuild it" in failure["message"]
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    error = expect_error("unsupported_schema", split_v5_training_dataset, "old", datasets_dir=root, policy=LENIENT)
    assert "dataset format 1" in str(error)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # nothing touched
    assert not (root / "old-v5split").exists() or not any((root / "old-v5split").glob("v*"))
    # the card names it without describing it; rebuilding (overwrite) gives a format-2 version
    assert write_dataset_card("old", datasets_dir=root)["unreadable"].keys() == {1}
    rebuilt = materialize_v5_dataset([GREEDY], "old", sessions_dir=shared_sessions(), datasets_dir=root, version=1,
                                     overwrite=True)
    assert rebuilt["replaced"] and rebuilt["card"]["error"] is None
    assert json.loads((folder / "manifest.json").read_text())["schema_version"] == 2
    assert validate_dataset("old/v1", datasets_dir=root)["valid"]
    assert write_dataset_card("old", datasets_dir=root)["unreadable"] == {}


@pytest.mark.parametrize("version", [0, 3, "2", True])
def test_other_versions_keep_the_generic_refusal(tmp_path: Path, version) -> None:
    root = tmp_path / "datasets"
    materialize_v5_dataset([GREEDY], "x", sessions_dir=shared_sessions(), datasets_dir=root)
    manifest = read_manifest(root / "x" / "v1")
    manifest["schema_version"] = version
    write_manifest(root / "x" / "v1", manifest)
    [failure] = [f for f in validate_dataset("x/v1", datasets_dir=root)["failures"] if f["code"] == "manifest_unreadable"]
    assert "is not supported" in failure["message"] and "earlier ExtraRLHF" not in failure["message"]
