"""Production V5 and TimeStamp exports against a real PostgreSQL filled by the fixture backend
(tests/conftest.py: ``production_db``). No mock database anywhere."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from pathlib import Path

import asyncpg
import pyarrow.parquet as pq
import pytest

from extrarlhf.core.errors import RLHFError
from extrarlhf.datasets import split_nemesis_training_dataset, validate_dataset
from extrarlhf.datasets.tables import SCHEMAS
from extrarlhf.production import gate
from extrarlhf.production.export import export_production_v5_dataset
from extrarlhf.production.pseudonyms import battle_key, player_pseudonym
from extrarlhf.production.schema import DDL
from extrarlhf.production.timestamp import APPROVED_INPUTS, export_timestamp_dataset, load_inputs

SALT = "fixture-salt-Xq7Vd2kw9PzL0bMf4RtY8nJc6HsA1eGuT5oW"
KEY_ID = "rc-test-1"
TABLE_FILES = ("decisions", "turns", "battles", "excluded", "metronome", "production_battles")


def env_for(dsn: str) -> dict[str, str]:
    return {gate.ENABLE_VAR: "1", gate.DSN_VAR: dsn, gate.SALT_VAR: SALT, gate.KEY_ID_VAR: KEY_ID}


@pytest.fixture(scope="module")
def exported(production_db, tmp_path_factory):
    """One full-window export of the fixture, shared by the read-only tests of this module."""
    root = tmp_path_factory.mktemp("prod-datasets")
    window = production_db.summary["window"]
    result = export_production_v5_dataset(window["end_at"], name="prod", datasets_dir=root,
                                          environ=env_for(production_db.dsn))
    return root, result


def _table(root: Path, result: dict, name: str):
    return pq.read_table(Path(result["path"]) / f"{name}.parquet")


def test_the_export_has_the_local_v5_layout_and_validates(exported):
    root, result = exported
    assert result["published"] and result["complete"] and result["stop_reason"] is None
    assert validate_dataset("prod", datasets_dir=root)["valid"]
    for name in ("decisions", "turns", "battles"):
        assert _table(root, result, name).schema.equals(SCHEMAS[name])
    assert _table(root, result, "excluded").schema.equals(SCHEMAS["production_excluded"])
    decisions = _table(root, result, "decisions")
    assert decisions.num_rows == result["row_counts"]["decisions"] > 1000
    assert set(decisions.column("group").to_pylist()) == {"production"}
    assert set(decisions.column("actor_type").to_pylist()) <= {"human", "bot", "rl"}


def test_every_defect_is_excluded_with_its_reason(exported, production_db):
    root, result = exported
    excluded = _table(root, result, "excluded").to_pylist()
    reasons = {row["battle_id"]: row["reason"] for row in excluded}
    for broken in production_db.summary["broken"]:
        assert reasons[battle_key(SALT.encode(), broken["battle_id"])] == broken["defect"], broken
    counts = Counter(reasons.values())
    assert counts["unfinished"] == production_db.summary["counts"]["unfinished"]
    assert result["exclusions"]["by_reason"] == dict(sorted(counts.items()))
    included = set(_table(root, result, "battles").column("battle_id").to_pylist())
    assert not included & set(reasons)
    illegal = next(r for r in excluded if r["reason"] == "illegal_action")
    assert "illegal" in illegal["detail"] and "seq" in illegal["detail"]


def test_the_manifest_says_what_the_export_is(exported):
    root, result = exported
    manifest = validate_dataset("prod", datasets_dir=root)
    m = json.loads((Path(result["path"]) / "manifest.json").read_text())
    assert m["pseudonymized"] is True and m["anonymous"] is False and m["pseudonym_key_id"] == KEY_ID
    assert m["complete"] is True and m["stop_reason"] is None
    assert m["sources"]["kind"] == "production" and m["production"]["snapshot_at"] == result["snapshot_at"]
    streams = m["production"]["streams"]
    assert set(streams) == {"battles", "battle_actions"} and streams["battle_actions"]["rows"] > 1000
    assert m["readiness"]["evidence"]["source_kind"] == "production"
    assert manifest["valid"]
    card = (root / "prod" / "README.md").read_text(encoding="utf-8")  # issue 49: the card says it too
    assert "Pseudonymized, not anonymous" in card and f"`{KEY_ID}`" in card and "personal data" in card


def test_a_split_of_a_production_export_stays_marked_pseudonymized(exported):
    root, result = exported
    split = split_nemesis_training_dataset("prod", "lite", name="prod-split", datasets_dir=root)
    m = json.loads((Path(split["path"]) / "manifest.json").read_text())
    assert m["pseudonymized"] is True and m["anonymous"] is False and m["pseudonym_key_id"] == KEY_ID
    card = (root / "prod-split" / "README.md").read_text(encoding="utf-8")
    assert "Pseudonymized, not anonymous" in card and f"`{KEY_ID}`" in card


def test_metronome_holds_human_decisions_with_observed_think_times(exported):
    root, result = exported
    metronome = _table(root, result, "metronome")
    assert metronome.num_rows > 500
    assert metronome.column("decision_ms").null_count == 0
    assert min(metronome.column("decision_ms").to_pylist()) > 0
    decisions = _table(root, result, "decisions").select(["battle_id", "decision_index", "actor_type", "action_id"])
    by_key = {(b, i): (t, a) for b, i, t, a in zip(*(decisions.column(c).to_pylist() for c in decisions.column_names))}
    for b, i, a in zip(*(metronome.column(c).to_pylist()[:300] for c in ("battle_id", "decision_index", "action_id"))):
        assert by_key[(b, i)] == ("human", a)
    assert result["readiness"]["metronome_ready"] is True


def test_player_ids_are_pseudonyms_and_human_vs_human_feeds_standard(exported, production_db):
    root, result = exported
    battles = _table(root, result, "production_battles")
    players = {p for col in ("p1_player", "p2_player") for p in battles.column(col).to_pylist() if p}
    expected = {player_pseudonym(SALT.encode(), raw) for raw in production_db.summary["player_ids"]}
    assert players and players <= expected
    assert all(p.startswith("p-") and len(p) == 34 for p in players)
    assert result["readiness"]["training_ready_standard"] is True, result["readiness"]
    split = split_nemesis_training_dataset("prod", "standard", datasets_dir=root)
    train = pq.read_table(Path(split["path"]) / "train.parquet")
    assert train.num_rows > 0
    assert set(train.column("viewer_type").to_pylist()) == {"human"}
    assert set(train.column("opponent_type").to_pylist()) == {"human"}


def test_the_same_snapshot_exports_byte_identical_tables(exported, production_db, tmp_path):
    root, result = exported
    again = export_production_v5_dataset(production_db.summary["window"]["end_at"], name="prod", datasets_dir=tmp_path,
                                         environ=env_for(production_db.dsn), workers=1)
    for name in TABLE_FILES:
        a = (Path(result["path"]) / f"{name}.parquet").read_bytes()
        b = (Path(again["path"]) / f"{name}.parquet").read_bytes()
        assert a == b, name


def test_ingested_before_hides_late_rows(production_db, tmp_path):
    end = production_db.summary["window"]["end_at"]
    cut = export_production_v5_dataset(end, name="cut", ingested_before=end, datasets_dir=tmp_path,
                                       environ=env_for(production_db.dsn))
    full = export_production_v5_dataset(end, name="full", datasets_dir=tmp_path, environ=env_for(production_db.dsn))
    late = production_db.summary["counts"]["late"]
    assert late > 0
    assert cut["streams"]["battles"]["rows"] == full["streams"]["battles"]["rows"] - late
    assert cut["streams"]["battle_actions"]["rows"] < full["streams"]["battle_actions"]["rows"]
    assert cut["exclusions"]["by_reason"]["missing_actions"] > full["exclusions"]["by_reason"].get("missing_actions", 0)
    assert cut["window"]["ingested_before"] == end.replace("+00:00", "Z")


def test_the_row_ceiling_stops_the_export(production_db, tmp_path):
    end = production_db.summary["window"]["end_at"]
    stopped = export_production_v5_dataset(end, name="capped", max_rows=500, datasets_dir=tmp_path,
                                           environ=env_for(production_db.dsn))
    assert stopped["published"] is False and stopped["complete"] is False
    assert stopped["stop_reason"] == "row_ceiling" and stopped["stopped_stream"] == "battle_actions"
    assert "battle_actions" in stopped["message"]
    assert not (tmp_path / "capped").exists() or not any(p.name.startswith("v") for p in (tmp_path / "capped").iterdir())
    kept = export_production_v5_dataset(end, name="capped", max_rows=500, publish_incomplete=True,
                                        datasets_dir=tmp_path, environ=env_for(production_db.dsn))
    assert kept["published"] is True and kept["complete"] is False and kept["stop_reason"] == "row_ceiling"
    r = kept["readiness"]
    assert not any(r[k] for k in ("v5_policy_training_ready", "nemesis_lite_ready", "training_ready_standard",
                                  "metronome_ready", "timestamp_ready"))
    assert any("row ceiling" in b for b in r["v5_policy_blockers"])
    assert validate_dataset("capped", datasets_dir=tmp_path)["valid"]
    assert kept["streams"]["battle_actions"]["rows"] == 500
    with pytest.raises(RLHFError, match="not ready|incomplete"):
        export_timestamp_dataset("capped", "capped-ts", datasets_dir=tmp_path, environ=env_for(production_db.dsn))


def test_timestamp_inputs_never_carry_labels(exported, production_db):
    root, result = exported
    env = env_for(production_db.dsn)
    ts = export_timestamp_dataset("prod", "prod-ts", datasets_dir=root, environ=env, policy={"min_timestamp_labels": 10})
    assert ts["timestamp_ready"] is True
    folder = Path(ts["path"])
    assert {p.name for p in folder.iterdir()} == {"inputs.parquet", "labels.parquet", "audit.parquet", "manifest.json"}
    inputs = load_inputs("prod-ts", datasets_dir=root)
    assert tuple(inputs.column_names) == APPROVED_INPUTS
    labels = pq.read_table(folder / "labels.parquet")
    assert inputs.num_rows == labels.num_rows > 0
    for forbidden in ("duration_seconds", "turns", "finished_at", "started_at", "ingested_at"):
        assert forbidden not in inputs.column_names
        with pytest.raises(RLHFError, match="not approved"):
            load_inputs("prod-ts", columns=["battle_id", forbidden], datasets_dir=root)
    # no input column is a function of the label: same inputs, different durations exist
    durations = dict(zip(labels.column("battle_id").to_pylist(), labels.column("duration_seconds").to_pylist()))
    assert len(set(durations.values())) > 1
    # a tampered inputs file with a label column is refused
    table = pq.read_table(folder / "inputs.parquet")
    pq.write_table(table.append_column("duration_seconds", labels.column("duration_seconds")), folder / "inputs.parquet")
    with pytest.raises(RLHFError) as info:
        load_inputs("prod-ts", datasets_dir=root)
    assert info.value.code == "validation_failed"


def test_timestamp_refuses_a_dataset_that_is_not_a_production_export(tmp_path, production_db):
    with pytest.raises(RLHFError) as info:
        export_timestamp_dataset("nope", "ts", datasets_dir=tmp_path, environ=env_for(production_db.dsn))
    assert info.value.code == "not_found"


@pytest.mark.parametrize("kwargs, message", [
    ({"end_at": "2026-01-02T00:00:00"}, "no timezone"),
    ({"end_at": "2026-01-02T00:00:00Z", "start_at": "2026-01-02T00:00:00Z"}, "window is empty"),
    ({"end_at": "2026-01-02T00:00:00Z", "start_at": "2026-01-03T00:00:00+00:00"}, "window is empty"),
    ({"end_at": "2026-01-02T00:00:00Z", "ingested_before": "2026-01-01T00:00:00Z"}, "ingested_before"),
    ({"end_at": "yesterday"}, "ISO 8601"),
    ({"end_at": "2026-01-02T00:00:00Z", "max_rows": 2_000_000}, "ceiling"),
    ({"end_at": "2026-01-02T00:00:00Z", "name": "../escape"}, "name"),
])
def test_bad_arguments_are_refused_before_any_read(kwargs, message, tmp_path):
    env = env_for("postgresql://nobody@127.0.0.1:1/none")  # never reached: arguments are checked first
    kwargs = {"name": "prod", **kwargs}
    with pytest.raises(RLHFError, match=message):
        export_production_v5_dataset(kwargs.pop("end_at"), datasets_dir=tmp_path, environ=env, **kwargs)
    assert not any(tmp_path.iterdir())


def _run(coro):
    return asyncio.run(coro)


async def _sql(dsn: str, *statements: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


def test_a_database_without_the_schema_is_named(pg_server, tmp_path):
    dsn = pg_server.create_database("empty_backend")
    with pytest.raises(RLHFError) as info:
        export_production_v5_dataset("2026-01-02T00:00:00Z", name="prod", datasets_dir=tmp_path, environ=env_for(dsn))
    assert info.value.code == "production_schema_mismatch"
    assert "table battles is missing" in str(info.value) and "table battle_actions is missing" in str(info.value)
    dsn2 = pg_server.create_database("old_backend")
    _run(_sql(dsn2, DDL, "ALTER TABLE battle_actions DROP COLUMN decision_ms"))
    with pytest.raises(RLHFError, match="table battle_actions lacks column\\(s\\) decision_ms"):
        export_production_v5_dataset("2026-01-02T00:00:00Z", name="prod", datasets_dir=tmp_path, environ=env_for(dsn2))
    assert not any(tmp_path.iterdir())  # refused before the datasets dir was touched


def test_a_connection_dropped_mid_export_publishes_nothing(production_db, tmp_path):
    """The export's connections are terminated by the server after the first battles were
    replayed: the error names the stream and the page; no version appears."""
    end = production_db.summary["window"]["end_at"]
    killed = threading.Event()

    def progress(done: int, total: int) -> None:
        if done >= 16 and not killed.is_set():
            killed.set()
            _run(_sql(production_db.dsn, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                         "WHERE pid <> pg_backend_pid() AND datname = current_database() "
                                         "AND backend_type = 'client backend'"))

    with pytest.raises(RLHFError) as info:
        export_production_v5_dataset(end, name="dropped", datasets_dir=tmp_path, environ=env_for(production_db.dsn),
                                     page_rows=200, workers=1, progress=progress)
    assert killed.is_set()
    assert info.value.code == "production_read_failed"
    assert "stream battle" in str(info.value) and "page" in str(info.value) and "nothing was published" in str(info.value)
    assert production_db.dsn not in str(info.value)
    folder = tmp_path / "dropped"
    assert not folder.exists() or not [p for p in folder.iterdir() if not p.name.startswith(".publish")]


def test_the_local_trainer_reads_a_production_export(exported, tmp_path):
    from extrarlhf.training.train import train_policy

    root, result = exported
    trained = train_policy("prod", "bc-prod", epochs=1, hidden=16, hidden2=8, value_hidden=8, datasets_dir=root,
                           checkpoints_dir=tmp_path / "checkpoints")
    assert trained["kind"] == "v5" and len(trained["weights_hash"]) == 64
    assert trained["dataset_id"] == result["dataset_id"]
