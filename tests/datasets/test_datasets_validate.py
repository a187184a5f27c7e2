"""validate_dataset reports each failure specifically: one tampering at a time, each found with
its own code and context, and nothing else reported."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from extrarlhf.datasets import materialize_v5_dataset, promote_dataset, validate_dataset
from extrarlhf.datasets.validate import MAX_PER_CODE
from tests.datasets_helpers import (GREEDY, HUMAN, expect_error, read_manifest, rewrite_table, set_cell,
                                    shared_sessions, write_manifest)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    datasets = tmp_path_factory.mktemp("val") / "datasets"
    materialize_v5_dataset([GREEDY, HUMAN], "d", sessions_dir=shared_sessions(), datasets_dir=datasets)
    return datasets


@pytest.fixture()
def ds(pristine: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A private copy: (datasets dir, version folder)."""
    datasets = tmp_path / "datasets"
    shutil.copytree(pristine, datasets)
    return datasets, datasets / "d" / "v1"


def codes(datasets: Path, ref: str = "d") -> dict[str, int]:
    return validate_dataset(ref, datasets_dir=datasets)["failure_codes"]


def test_pristine_is_valid(ds) -> None:
    datasets, _ = ds
    report = validate_dataset("d/v1", datasets_dir=datasets)
    assert report["valid"] is True and report["failures"] == [] and report["failure_codes"] == {}
    assert report["dataset_id"] == "d/v1" and report["kind"] == "v5_decisions"


def test_a_changed_file_hash(ds) -> None:
    datasets, folder = ds
    table = pq.read_table(folder / "turns.parquet")
    pq.write_table(table, folder / "turns.parquet", compression="snappy")  # same rows, other bytes
    report = validate_dataset("d", datasets_dir=datasets)
    assert report["valid"] is False and report["failure_codes"] == {"file_hash_mismatch": 1}
    failure = report["failures"][0]
    assert failure["file"] == "turns.parquet" and failure["expected"] != failure["actual"]
    assert "turns.parquet" in failure["message"]


def test_a_wrong_row_count(ds) -> None:
    datasets, folder = ds
    manifest = read_manifest(folder)
    manifest["tables"]["battles"]["rows"] += 1
    manifest["row_counts"]["battles"] += 1
    write_manifest(folder, manifest)
    report = validate_dataset("d", datasets_dir=datasets)
    assert report["failure_codes"] == {"row_count_mismatch": 1}
    f = report["failures"][0]
    assert f["table"] == "battles" and f["actual"] == f["expected"] - 1


def test_an_illegal_chosen_action(ds) -> None:
    datasets, folder = ds
    first = pq.read_table(folder / "decisions.parquet").slice(0, 1).to_pylist()[0]
    illegal = next(a for a in range(163) if a not in first["legal_action_ids"])
    rewrite_table(folder, "decisions", lambda t: set_cell(t, "action_id", 0, illegal))
    report = validate_dataset("d", datasets_dir=datasets)
    assert report["failure_codes"] == {"chosen_action_not_legal": 1}
    f = report["failures"][0]
    assert (f["battle_id"], f["decision_index"]) == (first["battle_id"], 0)
    assert f"chosen action {illegal} is not among the legal actions" in f["message"]


def test_an_action_index_that_points_elsewhere(ds) -> None:
    datasets, folder = ds
    rows = pq.read_table(folder / "decisions.parquet", columns=["legal_action_ids", "action_index"]).to_pylist()
    row = next(i for i, r in enumerate(rows) if len(r["legal_action_ids"]) > 1)
    wrong = (rows[row]["action_index"] + 1) % len(rows[row]["legal_action_ids"])
    rewrite_table(folder, "decisions", lambda t: set_cell(t, "action_index", row, wrong))
    assert codes(datasets) == {"action_index_mismatch": 1}


def test_a_degraded_battle_in_the_training_tables(ds) -> None:
    datasets, folder = ds
    rewrite_table(folder, "battles", lambda t: set_cell(t, "degraded", 2, True))
    report = validate_dataset("d", datasets_dir=datasets)
    assert report["failure_codes"] == {"degraded_battle_in_training_table": 1}
    battle = pq.read_table(folder / "battles.parquet").column("battle_id")[2].as_py()
    assert report["failures"][0]["battle_id"] == battle


def test_an_unfinished_or_peeked_or_excluded_battle(ds) -> None:
    datasets, folder = ds
    rewrite_table(folder, "battles", lambda t: set_cell(set_cell(t, "status", 0, "abandoned"),
                                                        "omniscient_peeks", 1, 2))
    excluded = pq.read_table(folder / "excluded.parquet")
    battle = pq.read_table(folder / "battles.parquet").column("battle_id")[3].as_py()
    rewrite_table(folder, "excluded", lambda t: set_cell(t, "battle_id", 0, battle))
    assert excluded.num_rows == 4
    assert codes(datasets) == {"unfinished_battle_in_training_table": 1, "peeked_battle_in_training_table": 1,
                               "excluded_battle_in_training_table": 1}


def test_a_gap_in_decision_indexes(ds) -> None:
    datasets, folder = ds

    def drop_row_5(t: pa.Table) -> pa.Table:
        mask = pa.array([i != 5 for i in range(t.num_rows)])
        return t.filter(mask)

    rewrite_table(folder, "decisions", drop_row_5)
    report = validate_dataset("d", datasets_dir=datasets)
    assert report["failure_codes"] == {"battle_rows_mismatch": 1, "decision_index_not_contiguous": 1}
    gap = next(f for f in report["failures"] if f["code"] == "decision_index_not_contiguous")
    assert gap["decision_index"] == 6 and "where 5 was expected" in gap["message"]


def test_a_battle_split_in_two_runs(ds) -> None:
    datasets, folder = ds

    def move_first_row_to_the_end(t: pa.Table) -> pa.Table:
        return pa.concat_tables([t.slice(1), t.slice(0, 1)])

    rewrite_table(folder, "decisions", move_first_row_to_the_end)
    found = codes(datasets)
    assert set(found) == {"decision_index_not_contiguous"} and found["decision_index_not_contiguous"] >= 2


def test_a_schema_change(ds) -> None:
    datasets, folder = ds
    rewrite_table(folder, "battles", lambda t: t.set_column(t.schema.get_field_index("turns"), "turns",
                                                            pc.cast(t.column("turns"), pa.int64())))
    report = validate_dataset("d", datasets_dir=datasets)
    assert report["failure_codes"] == {"schema_mismatch": 1}
    assert "turns: int64 instead of int16" in report["failures"][0]["message"]


def test_missing_and_unexpected_files(ds) -> None:
    datasets, folder = ds
    (folder / "excluded.parquet").unlink()
    (folder / "notes.txt").write_text("hello")
    report = validate_dataset("d", datasets_dir=datasets)
    assert report["failure_codes"] == {"file_missing": 1, "unexpected_file": 1}
    assert {f["file"] for f in report["failures"]} == {"excluded.parquet", "notes.txt"}


def test_an_unreadable_manifest_and_a_renamed_version(ds) -> None:
    datasets, folder = ds
    shutil.copytree(folder, folder.parent / "v2")
    assert codes(datasets, "d/v2") == {"dataset_id_mismatch": 1}
    (folder / "manifest.json").write_text("{not json")
    report = validate_dataset("d/v1", datasets_dir=datasets)
    assert report["failure_codes"] == {"manifest_unreadable": 1} and "not valid JSON" in report["failures"][0]["message"]
    manifest = read_manifest(folder.parent / "v2")
    manifest["schema_version"] = 99
    write_manifest(folder.parent / "v2", manifest)
    report = validate_dataset("d/v2", datasets_dir=datasets)
    assert report["failure_codes"] == {"manifest_unreadable": 1} and "schema_version 99" in report["failures"][0]["message"]


def test_many_failures_are_capped_per_code_with_a_count(ds) -> None:
    datasets, folder = ds
    n = pq.ParquetFile(folder / "decisions.parquet").metadata.num_rows
    rewrite_table(folder, "decisions", lambda t: t.set_column(
        t.schema.get_field_index("obs_version"), t.schema.field("obs_version"), pa.array([99] * n, pa.int16())))
    report = validate_dataset("d", datasets_dir=datasets)
    assert report["failure_codes"] == {"obs_version_mismatch": n}
    listed = [f for f in report["failures"] if "more" not in f]
    assert len(listed) == MAX_PER_CODE and report["failures"][-1]["more"] == n - MAX_PER_CODE


def test_a_stale_pointer_is_reported_and_an_invalid_version_is_not_promoted(ds) -> None:
    datasets, folder = ds
    promote_dataset("d", "cur", datasets_dir=datasets)
    pointer = (datasets / "pointers" / "cur.json").read_bytes()
    manifest = read_manifest(folder)
    manifest["created_at"] = "2000-01-01T00:00:00.000Z"  # a valid change that still alters the manifest
    write_manifest(folder, manifest)
    report = validate_dataset("@cur", datasets_dir=datasets)
    assert report["failure_codes"] == {"stale_pointer": 1} and report["pointer"] == "cur"
    expect_error("stale_pointer", promote_dataset, "@cur", "other", datasets_dir=datasets)
    rewrite_table(folder, "battles", lambda t: set_cell(t, "degraded", 0, True))
    err = expect_error("validation_failed", promote_dataset, "d/v1", "cur", datasets_dir=datasets)
    assert "degraded_battle_in_training_table" in str(err) and err.failures
    assert (datasets / "pointers" / "cur.json").read_bytes() == pointer
    assert json.loads(pointer)["dataset_id"] == "d/v1"
