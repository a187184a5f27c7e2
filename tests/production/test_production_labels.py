"""Label quality of production exports (issue 24 sections 3 and 4) against a real PostgreSQL
filled by the fixture backend: implausible human think times never become Metronome labels,
and TimeStamp rows carry their own keyed ids (no join to the source export recovers a label),
with approved features that validation recomputes from the decks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from extrarlhf.core.errors import RLHFError
from extrarlhf.datasets import validate_dataset
from extrarlhf.production.export import export_production_v5_dataset
from extrarlhf.production.fixture import build_fixture
from extrarlhf.production.pseudonyms import battle_key
from extrarlhf.production.timestamp import export_timestamp_dataset, load_inputs, row_key_secret

from .test_production_export import SALT, _run, _sql, env_for

SMALL = {"battles": 24, "players": 8, "days": 1, "seed": 43, "workers": 1}
# what a broken client or clock sends: negative, zero, a tab left open for a day, an overflowed int32
IMPLAUSIBLE_MS = (-5, 0, 86_400_000, 2**31 - 1)


@pytest.fixture(scope="module")
def labelled(pg_server, tmp_path_factory):
    """A fixture database exported once as built and once after four human think times were
    overwritten with implausible values."""
    dsn = pg_server.create_database("labels_backend")
    summary = build_fixture(dsn, **SMALL)
    end = summary["window"]["end_at"]
    root = tmp_path_factory.mktemp("labels")
    before = export_production_v5_dataset(end, name="before", datasets_dir=root, environ=env_for(dsn), workers=1)
    metronome = pq.read_table(Path(before["path"]) / "metronome.parquet").select(["battle_id", "decision_index"])
    raw = {battle_key(SALT.encode(), f"b-{SMALL['seed']}-{i:07d}"): f"b-{SMALL['seed']}-{i:07d}"
           for i in range(SMALL["battles"])}
    picked = metronome.to_pylist()[::max(1, metronome.num_rows // 5)][:len(IMPLAUSIBLE_MS)]
    _run(_sql(dsn, *(f"UPDATE battle_actions SET decision_ms = {ms} WHERE battle_id = '{raw[row['battle_id']]}' "
                     f"AND seq = {row['decision_index']}" for row, ms in zip(picked, IMPLAUSIBLE_MS, strict=True))))
    after = export_production_v5_dataset(end, name="after", datasets_dir=root, environ=env_for(dsn), workers=1)
    return dsn, root, before, after, picked


def test_implausible_think_times_stay_in_audit_and_never_become_labels(labelled):
    _dsn, _root, before, after, picked = labelled
    path = Path(after["path"])
    labels = pq.read_table(path / "metronome.parquet")
    ms = labels.column("decision_ms").to_pylist()
    assert all(50 <= v <= 15 * 60 * 1000 for v in ms)
    assert labels.num_rows == before["row_counts"]["metronome"] - len(IMPLAUSIBLE_MS)
    audit = pq.read_table(path / "metronome_excluded.parquet").to_pylist()
    assert sorted((r["battle_id"], r["decision_index"], r["decision_ms"]) for r in audit) == sorted(
        (row["battle_id"], row["decision_index"], value) for row, value in zip(picked, IMPLAUSIBLE_MS, strict=True))
    assert {r["decision_ms"]: r["reason"] for r in audit} == {
        -5: "below_min_decision_ms", 0: "below_min_decision_ms", 86_400_000: "above_max_decision_ms",
        2**31 - 1: "above_max_decision_ms"}
    manifest = json.loads((path / "manifest.json").read_text())
    counted = manifest["labels"]["metronome_excluded"]
    assert counted == {"count": 4, "by_reason": {"above_max_decision_ms": 2, "below_min_decision_ms": 2},
                       "table": "metronome_excluded", "min_decision_ms": 50, "max_decision_ms": 900_000}
    assert after["labels"] == manifest["labels"] and manifest["labels"]["metronome_decisions"] == labels.num_rows
    assert manifest["readiness"]["evidence"]["metronome_labels"] == labels.num_rows
    # the decisions themselves are still training rows: only the timing label is refused
    assert after["row_counts"]["decisions"] == before["row_counts"]["decisions"]
    assert validate_dataset("after", datasets_dir=_root)["valid"]


def test_implausible_think_times_do_not_count_toward_metronome_ready(labelled, tmp_path):
    dsn, _root, before, _after, _picked = labelled
    end = before["window"]["end_at"]
    need = {"min_metronome_labels": before["row_counts"]["metronome"]}  # every think time, the bad ones too
    strict = export_production_v5_dataset(end, name="strict", datasets_dir=tmp_path, environ=env_for(dsn),
                                          workers=1, policy=need)
    assert strict["readiness"]["metronome_ready"] is False
    assert any(f"{before['row_counts']['metronome'] - 4} observed human decision-time labels" in b
               for b in strict["readiness"]["metronome_blockers"])


def test_the_bounds_are_a_policy_override(labelled, tmp_path):
    dsn, _root, before, _after, _picked = labelled
    end = before["window"]["end_at"]
    wide = export_production_v5_dataset(end, name="wide", datasets_dir=tmp_path, environ=env_for(dsn), workers=1,
                                        policy={"min_decision_ms": 0, "max_decision_ms": 2**31 - 1})
    assert wide["labels"]["metronome_excluded"]["by_reason"] == {"below_min_decision_ms": 1}  # -5 only
    assert wide["row_counts"]["metronome"] == before["row_counts"]["metronome"] - 1
    with pytest.raises(RLHFError) as info:
        export_production_v5_dataset(end, name="upside-down", datasets_dir=tmp_path, environ=env_for(dsn),
                                     policy={"min_decision_ms": 1000, "max_decision_ms": 10})
    assert info.value.code == "invalid_argument" and "min_decision_ms (1000) is above max_decision_ms (10)" in \
        str(info.value)
    assert not (tmp_path / "upside-down").exists()


# ---------------------------------------------------------------------------- TimeStamp keys

@pytest.fixture(scope="module")
def timestamp(labelled):
    dsn, root, before, _after, _picked = labelled
    result = export_timestamp_dataset("before", "ts", datasets_dir=root, environ=env_for(dsn),
                                      policy={"min_timestamp_labels": 5})
    return dsn, root, before, result


def test_timestamp_rows_join_nothing_of_the_source(timestamp):
    """The keyed ids match no battle id of the source export (an ordinary join recovers no
    label), the rows are not in the source's order (no positional join either), and inputs,
    labels and audit share their keys."""
    dsn, root, before, result = timestamp
    inputs = load_inputs("ts", datasets_dir=root)
    source = Path(before["path"])
    source_ids = set(pq.read_table(source / "battles.parquet").column("battle_id").to_pylist())
    source_ids |= set(pq.read_table(source / "production_battles.parquet").column("battle_id").to_pylist())
    keys = inputs.column("battle_id").to_pylist()
    assert len(keys) == result["row_counts"]["inputs"] >= 10 and len(set(keys)) == len(keys)
    assert not set(keys) & source_ids
    assert all(k.startswith("t-") and len(k) == 34 for k in keys)
    folder = Path(result["path"])
    for table in ("labels", "audit"):
        assert pq.read_table(folder / f"{table}.parquet").column("battle_id").to_pylist() == keys
    source_decks = pq.read_table(source / "battles.parquet").column("p1_deck").to_pylist()
    assert [list(d) for d in inputs.column("p1_deck").to_pylist()] != source_decks[:len(keys)]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["timestamp"]["row_key"]["rule"].startswith("t- + hex(HMAC-SHA256(")
    blob = b"".join(p.read_bytes() for p in folder.iterdir())
    secret = row_key_secret(SALT.encode(), result["dataset_id"], manifest["sources"]["manifest_sha256"])
    assert SALT.encode() not in blob and dsn.encode() not in blob
    assert secret not in blob and secret.hex().encode() not in blob  # the row-key secret is stored nowhere
    assert keys == sorted(keys)  # a keyed shuffle: key order, not the source's
    from extrarlhf.production.pseudonyms import keyed_ids  # the documented rule, recomputed with the salt

    included = pq.read_table(source / "battles.parquet").column("battle_id").to_pylist()
    assert set(keys) <= set(keyed_ids(secret, "t", "timestamp-row", included))


def test_the_timestamp_keys_are_per_dataset(timestamp, tmp_path):
    """Another TimeStamp dataset of the same source (another name, or the next version) shares
    no key; the same dataset id from the same source gives the same bytes."""
    import shutil

    dsn, root, before, result = timestamp
    keys = lambda r: set(pq.read_table(Path(r["path"]) / "inputs.parquet").column("battle_id").to_pylist())  # noqa: E731
    other = export_timestamp_dataset("before", "ts-other", datasets_dir=root, environ=env_for(dsn))
    newer = export_timestamp_dataset("before", "ts", datasets_dir=root, environ=env_for(dsn))
    assert newer["dataset_id"] == "ts/v2"
    assert len(keys(result)) == len(keys(other)) == len(keys(newer))
    assert not keys(result) & keys(other) and not keys(result) & keys(newer) and not keys(other) & keys(newer)
    shutil.copytree(Path(before["path"]).parent, tmp_path / "before")
    again = export_timestamp_dataset("before", "ts", datasets_dir=tmp_path, environ=env_for(dsn))
    assert again["dataset_id"] == "ts/v1"
    for table in ("inputs", "labels", "audit"):
        name = f"{table}.parquet"
        assert (Path(again["path"]) / name).read_bytes() == (Path(result["path"]) / name).read_bytes(), table


def _republish(root: Path, result: dict, name: str, edit) -> Path:
    """Copy the TimeStamp dataset to ``name/v1`` with ``edit(inputs, labels) -> inputs`` applied
    to inputs.parquet and the manifest's hash fixed, as a hand re-publication would."""
    import shutil

    folder = root / name / "v1"
    shutil.copytree(result["path"], folder)
    inputs, labels = pq.read_table(folder / "inputs.parquet"), pq.read_table(folder / "labels.parquet")
    pq.write_table(edit(inputs, labels), folder / "inputs.parquet")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["dataset_id"] = f"{name}/v1"
    manifest["name"] = name
    manifest["files"]["inputs.parquet"] = hashlib.sha256((folder / "inputs.parquet").read_bytes()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def _set(table: pa.Table, column: str, values: list) -> pa.Table:
    i = table.schema.get_field_index(column)
    return table.set_column(i, table.schema.field(column), pa.array(values, table.schema.field(column).type))


def test_a_label_under_an_approved_feature_name_is_refused(timestamp):
    _dsn, root, _before, result = timestamp

    def smuggle(inputs: pa.Table, labels: pa.Table) -> pa.Table:  # the duration, under a feature's name
        return _set(inputs, "p1_mean_cost", labels.column("duration_seconds").to_pylist())

    _republish(root, result, "ts-smuggled", smuggle)
    report = validate_dataset("ts-smuggled", datasets_dir=root)
    assert not report["valid"]
    failure = next(f for f in report["failures"] if f["code"] == "timestamp_feature_mismatch")
    first = pq.read_table(Path(result["path"]) / "inputs.parquet").column("battle_id")[0].as_py()
    assert failure["feature"] == "p1_mean_cost" and failure["row"] == 0
    assert "p1_mean_cost" in failure["message"] and "row 0" in failure["message"] and first in failure["message"]
    with pytest.raises(RLHFError) as info:
        load_inputs("ts-smuggled", datasets_dir=root)
    assert info.value.code == "validation_failed" and "p1_mean_cost" in str(info.value)


def test_a_deck_id_that_is_not_its_deck_is_refused(timestamp):
    _dsn, root, _before, result = timestamp

    def relabel(inputs: pa.Table, labels: pa.Table) -> pa.Table:
        turns = labels.column("turns").to_pylist()
        ids = inputs.column("p2_deck_id").to_pylist()
        return _set(inputs, "p2_deck_id", [f"turns-{turns[0]}", *ids[1:]])

    _republish(root, result, "ts-relabelled", relabel)
    report = validate_dataset("ts-relabelled", datasets_dir=root)
    failure = next(f for f in report["failures"] if f["code"] == "timestamp_feature_mismatch")
    assert failure["feature"] == "p2_deck_id" and failure["row"] == 0


def test_an_old_timestamp_dataset_keyed_by_the_source_ids_is_refused(timestamp):
    """A TimeStamp dataset written before rows had their own keys (its battle_id is the V5
    export's): validation names the leak and what to do."""
    _dsn, root, before, result = timestamp
    source_ids = pq.read_table(Path(before["path"]) / "battles.parquet").column("battle_id").to_pylist()
    folder = _republish(root, result, "ts-old", lambda inputs, labels: inputs)
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["timestamp"]["row_key"]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    report = validate_dataset("ts-old", datasets_dir=root)
    assert [f["code"] for f in report["failures"]] == ["timestamp_rows_not_keyed"]
    assert "re-export it" in report["failures"][0]["message"]
    assert source_ids  # the source still validates: only the TimeStamp dataset is refused
    assert validate_dataset("before", datasets_dir=root)["valid"]
