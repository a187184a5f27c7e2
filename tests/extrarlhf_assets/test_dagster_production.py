"""Production assets (DESIGN 12.1) materialized by Dagster against a real throwaway PostgreSQL
filled by the fixture backend (battles, sessions, treatments). The production domain is in the
code location only when production is opted in (RLHF_ENABLE_PRODUCTION_DATASETS set); these
tests add it (``with_production``). The gate is opened for these tests only (monkeypatched
environment); with it off every asset skips with the missing variable names, opens no
connection and emits no materialization. No DSN, salt or raw id
reaches Dagster's event log or metadata.

Latest good (DESIGN 12.2, issue 29 findings 5 and 6), asserted on the instance's own partition
status (``get_status_by_partition``, what the UI colours): a failed refresh never turns a day
with a complete export red, an incomplete export is never green, the day's checks carry the
partition, and a re-run reuses the identical version."""

import socket
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import asyncpg
import dagster as dg
import pytest
from dagster._serdes import serialize_value

from extrarlhf.production import gate
from extrarlhf.production.fixture import build_fixture
from extrarlhf.production.leaks import window_identifiers
from extrarlhf_assets.resources import DatasetsResource, ProductionResource

SALT = "dagster-production-salt-Xq7Vd2kw9PzL0bMf4RtY8nJc6HsA1eGuT5oW"
DAY = "2026-01-02"
THRESHOLDS = dict(min_returnclock_rows=5, min_returnclock_events=2, min_metronome_labels=10, min_timestamp_labels=5)
ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_ASSETS = {"production_v5_export", "timestamp_dataset", "metronome_dataset", "returnclock_export",
                     "returnclock_training_split"}
# the day's Nemesis splits: built or skipped by readiness (test_dagster_production_nemesis.py)
NEMESIS_SPLITS = {"production_nemesis_lite_split", "production_nemesis_standard_split"}


def _set_gate(monkeypatch, dsn: str) -> None:
    for name, value in {gate.ENABLE_VAR: "1", gate.DSN_VAR: dsn, gate.SALT_VAR: SALT,
                        gate.KEY_ID_VAR: "rc-dagster"}.items():
        monkeypatch.setenv(name, value)


def _close_gate(monkeypatch) -> None:
    for name in gate.VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _resources(root: Path, **production) -> dict:
    return {"datasets": DatasetsResource(datasets_dir=str(root / "datasets")),
            "production": ProductionResource(**{**THRESHOLDS, **production})}


def _run(instance, res, day=DAY, run_config=None, only=None):
    """production_daily for ``day``, or only the asset ``only``."""
    from extrarlhf_assets.definitions import defs
    from extrarlhf_assets.defs.production import assets, with_production

    if only:
        return dg.materialize([getattr(assets, only)], instance=instance, partition_key=day, resources=res,
                              run_config=run_config or {}, raise_on_error=False)
    return with_production(defs).resolve_job_def("production_daily").execute_in_process(
        instance=instance, partition_key=day, resources=res, run_config=run_config or {}, raise_on_error=False)


def _messages(instance, result) -> list[str]:
    return [e.user_message or "" for e in instance.all_logs(result.run_id)]


def _checks(result) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    return {(e.asset_key.to_user_string(), e.check_name): e for e in result.get_asset_check_evaluations()}


def _failures(result) -> dict[str, str]:
    """Step key -> what its failure says (the user's description, also after retries)."""
    out = {}
    for e in result.all_events:
        if e.is_step_failure:
            data = e.event_specific_data
            out[e.step_key] = (data.user_failure_data.description if data.user_failure_data else "") + \
                data.error.message
    return out


def _meta(result, asset: str) -> dict:
    for e in result.get_asset_materialization_events():
        if e.asset_key.to_user_string() == asset:
            return {k: getattr(v, "value", v) for k, v in e.event_specific_data.materialization.metadata.items()}
    raise KeyError(asset)


def _observations(result) -> list:
    return [e.event_specific_data.asset_observation for e in result.all_events
            if e.event_type_value == "ASSET_OBSERVATION"]


def _status(instance, day: str, asset: str = "production_v5_export"):
    """What the UI colours the partition: MATERIALIZED (green), FAILED (red) or None (missing)."""
    from extrarlhf_assets.defs.production.assets import production_days

    return instance.get_status_by_partition(dg.AssetKey(asset), [day], production_days)[day]


def _unreachable() -> tuple[str, str]:
    """A DSN whose port nobody listens on (the database is down), and that port."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    return f"postgresql://u:down-pw@127.0.0.1:{port}/db", str(port)


@pytest.fixture(scope="module")
def world(pg_server):
    """A small backend database with battles, sessions and treatments over three days."""
    dsn = pg_server.create_database("dagster_production")
    build_fixture(dsn, battles=60, players=24, days=3, seed=5, sessions_per_player=6)
    return dsn


@pytest.fixture(scope="module")
def materialized_day(world, tmp_path_factory):
    """One gate-open production_daily run of DAY on an ephemeral instance, shared by the tests."""
    root = tmp_path_factory.mktemp("production")
    mp = pytest.MonkeyPatch()
    _set_gate(mp, world)
    try:
        instance = dg.DagsterInstance.ephemeral()
        result = _run(instance, _resources(root))
    finally:
        mp.undo()
    return instance, result, root


@pytest.fixture
def listener():
    """A listening socket standing in for the database: a closed gate must never connect to it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    yield sock
    sock.close()


def _no_connection(sock) -> bool:
    try:
        sock.accept()[0].close()
    except socket.timeout:
        return True
    return False


def test_the_production_domain_is_there_only_when_opted_in():
    """Finding 7: without RLHF_ENABLE_PRODUCTION_DATASETS a deployment showed 334 production days
    "Missing" forever; now the code location has no production group or job at all."""
    import os

    from extrarlhf_assets.defs.production import opted_in, production_definitions

    assert production_definitions({}) == {"assets": [], "asset_checks": [], "jobs": []}
    assert not opted_in({gate.ENABLE_VAR: ""}) and opted_in({gate.ENABLE_VAR: "1"})
    listed = production_definitions({gate.ENABLE_VAR: "1"})
    assert {a.key.to_user_string() for a in listed["assets"]} == PRODUCTION_ASSETS | NEMESIS_SPLITS
    assert [j.name for j in listed["jobs"]] == ["production_daily"] and listed["asset_checks"]
    code = ("from extrarlhf_assets.definitions import defs; "
            "print(sorted({defs.resolve_asset_graph().get(k).group_name for k in "
            "defs.resolve_asset_graph().get_all_asset_keys()}), sorted(j.name for j in defs.jobs))")
    env = {k: v for k, v in os.environ.items() if k not in gate.VARIABLES}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    groups = out.stdout.split("] [")[0]
    assert groups == "['collection', 'datasets', 'preferences', 'retention', 'training'", out.stdout + out.stderr[-2000:]
    assert "production_daily" not in out.stdout


def test_gate_off_every_asset_skips_with_the_missing_names(monkeypatch, tmp_path, listener):
    _close_gate(monkeypatch)
    instance = dg.DagsterInstance.ephemeral()
    result = _run(instance, _resources(tmp_path))
    assert result.success
    assert result.get_asset_materialization_events() == [] and result.get_asset_check_evaluations() == []
    reason = ("skipped: production disabled (missing: RLHF_ENABLE_PRODUCTION_DATASETS, RLHF_PRODUCTION_DSN, "
              "RETURNCLOCK_DATASET_SALT, RETURNCLOCK_DATASET_SALT_KEY_ID)")
    assert sum(reason in m for m in _messages(instance, result)) == 2  # the two exports; the rest never start
    assert not (tmp_path / "datasets").exists()

    # partly configured: the DSN names a live socket, the salt is too short -> named, no connection
    monkeypatch.setenv(gate.ENABLE_VAR, "1")
    monkeypatch.setenv(gate.DSN_VAR, f"postgresql://u:secret-pw@127.0.0.1:{listener.getsockname()[1]}/db")
    monkeypatch.setenv(gate.SALT_VAR, "short")
    result = _run(instance, _resources(tmp_path))
    assert result.success and result.get_asset_materialization_events() == []
    messages = _messages(instance, result)
    assert any("skipped: production disabled (missing: RETURNCLOCK_DATASET_SALT_KEY_ID; invalid: "
               "RETURNCLOCK_DATASET_SALT)" in m for m in messages), messages
    assert _no_connection(listener)
    assert not any("secret-pw" in m for m in messages)


def test_gate_open_materializes_the_day_and_its_checks(materialized_day):
    instance, result, root = materialized_day
    assert result.success
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert materialized - NEMESIS_SPLITS == PRODUCTION_ASSETS
    # this small day (60 battles over three days) has too few human-vs-human battles for Standard
    assert "production_nemesis_standard_split" not in materialized
    checks = _checks(result)
    for asset in ("production_v5_export", "returnclock_export"):
        assert checks[(asset, "export_complete")].passed
    for asset in ("production_v5_export", "timestamp_dataset", "returnclock_export", "returnclock_training_split"):
        evaluation = checks[(asset, "no_raw_identifiers")]
        assert evaluation.passed and evaluation.metadata["identifiers_scanned"].value > 10, asset
    assert checks[("returnclock_training_split", "organic_only")].passed
    assert checks[("returnclock_training_split", "organic_only")].metadata["treated_in_source"].value > 0
    replay = checks[("production_v5_export", "replay_verified")]
    assert replay.severity == dg.AssetCheckSeverity.WARN

    v5 = _meta(result, "production_v5_export")
    assert v5["dataset_id"] == f"production-v5-{DAY}/v1" and v5["complete"] is True
    # the window is the partition's day; ingested_before = its end + the settle delay (3600 s)
    assert v5["window"]["start_at"] == "2026-01-02T00:00:00Z" and v5["window"]["end_at"] == "2026-01-03T00:00:00Z"
    assert v5["window"]["ingested_before"] == "2026-01-03T01:00:00Z"
    assert v5["dagster/row_count"] > 100 and v5["battles"] > 5
    assert (root / "datasets" / f"production-v5-{DAY}" / "v1" / "metronome.parquet").exists()
    rc = _meta(result, "returnclock_export")
    assert rc["dataset_id"] == f"returnclock-{DAY}/v1" and rc["counts"]["treated_rows"] > 0
    split = _meta(result, "returnclock_training_split")
    assert split["source"] == rc["dataset_id"] and split["dagster/row_count"] == rc["counts"]["organic_rows"]
    assert _meta(result, "timestamp_dataset")["source"] == v5["dataset_id"]
    assert _meta(result, "metronome_dataset")["dagster/row_count"] > 0


async def _raw_ids(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT battle_id AS v FROM battles UNION SELECT p1_player_id FROM battles "
                                "UNION SELECT p2_player_id FROM battles UNION SELECT session_id FROM player_sessions "
                                "UNION SELECT player_id FROM player_sessions UNION SELECT assignment_id FROM "
                                "return_treatments")
    finally:
        await conn.close()
    return [r["v"] for r in rows if r["v"]]


@pytest.mark.anyio
async def test_no_dsn_salt_or_raw_id_reaches_dagster_logs_or_metadata(materialized_day, world):
    instance, result, _ = materialized_day
    records = instance.get_records_for_run(result.run_id, limit=100_000).records
    blob = "\n".join(serialize_value(r.event_log_entry) for r in records)
    assert len(records) > 50 and "production-v5-2026-01-02" in blob  # the log is really there
    secrets = [world, SALT, *await _raw_ids(world)]
    assert len(secrets) > 100
    leaked = [s for s in secrets if s in blob]
    assert leaked == [], f"{len(leaked)} secrets or raw ids in the event log, e.g. {leaked[0][:10]}..."


@pytest.fixture
def anyio_backend():
    return "asyncio"


def test_a_planted_raw_id_fails_no_raw_identifiers(materialized_day, world, monkeypatch):
    instance, result, root = materialized_day
    _set_gate(monkeypatch, world)
    of_the_day = window_identifiers("v5", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z")
    player = min(i for i in of_the_day if i.startswith("player-"))
    folder = root / "datasets" / f"production-v5-{DAY}" / "v1"
    planted = folder / "notes.txt"
    planted.write_text(f"debug dump: owner={player}\n")
    from extrarlhf_assets.defs.production import assets, checks

    key = dg.AssetCheckKey(dg.AssetKey("production_v5_export"), "no_raw_identifiers")
    only = dg.Definitions(assets=dg.load_assets_from_modules([assets]),
                          asset_checks=dg.load_asset_checks_from_modules([checks]),
                          jobs=[dg.define_asset_job("only_scan", selection=dg.AssetSelection.checks(key))],
                          resources=_resources(root))
    try:
        out = only.resolve_job_def("only_scan").execute_in_process(
            # the partition as a run tag: execute_in_process refuses partition_key for a checks-only job
            instance=instance, tags={"dagster/partition": DAY}, raise_on_error=False)
    finally:
        planted.unlink()
    evaluation = _checks(out)[("production_v5_export", "no_raw_identifiers")]
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert evaluation.metadata["findings"].value == [{"file": "notes.txt", "distinct_ids": 1}]
    assert player not in serialize_value(evaluation)


def test_a_row_ceiling_is_an_outcome_not_a_failure(world, tmp_path, monkeypatch):
    _set_gate(monkeypatch, world)
    instance = dg.DagsterInstance.ephemeral()
    result = _run(instance, _resources(tmp_path),
                  run_config={"ops": {"production_v5_export": {"config": {"max_rows": 5}}}})
    assert result.success
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert "production_v5_export" not in materialized and "timestamp_dataset" not in materialized
    # the day has nothing complete: the in-step check says so, on the partition; the day stays missing
    evaluation = _checks(result)[("production_v5_export", "export_complete")]
    assert not evaluation.passed and evaluation.partition == DAY and "row_ceiling" in evaluation.description
    assert _status(instance, DAY) is None
    observed = _observations(result)
    assert len(observed) == 1 and observed[0].asset_key == dg.AssetKey("production_v5_export")
    assert observed[0].metadata["stop_reason"].value == "row_ceiling"
    assert "row ceiling" in observed[0].metadata["message"].value
    assert any("not published: stopped" in m for m in _messages(instance, result))
    folder = tmp_path / "datasets" / f"production-v5-{DAY}"
    assert not list(folder.glob("v*")) and not list(folder.glob("*/manifest.json"))  # nothing half-published
    assert "returnclock_export" in materialized  # the other export is not held by it


INCOMPLETE = {"ops": {"production_v5_export": {"config": {"max_rows": 5, "publish_incomplete": True}}}}


def test_an_incomplete_export_is_never_green(world, tmp_path, monkeypatch):
    """Finding 5, 2026-11-28: the latest export of a day is the incomplete one."""
    _set_gate(monkeypatch, world)
    instance = dg.DagsterInstance.ephemeral()
    # a day with no complete export: red, and nothing builds on the incomplete version
    result = _run(instance, _resources(tmp_path), run_config=INCOMPLETE)
    assert not result.success and _status(instance, DAY) == dg.AssetPartitionStatus.FAILED
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert not {"production_v5_export", "timestamp_dataset", "metronome_dataset"} & materialized
    assert "is incomplete" in _failures(result)["production_v5_export"]
    (observed,) = _observations(result)
    assert observed.metadata["published"].value is True
    assert observed.metadata["dataset_id"].value == f"production-v5-{DAY}/v1"
    evaluation = _checks(result)[("production_v5_export", "export_complete")]
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert evaluation.partition == DAY and evaluation.metadata["latest_complete"].value == "none"
    assert (tmp_path / "datasets" / f"production-v5-{DAY}" / "v1" / "manifest.json").exists()  # kept for inspection
    # the checks that never ran (the run failed) are recorded on the partition too, not partition-less
    for name in ("replay_verified", "no_raw_identifiers"):
        key = dg.AssetCheckKey(dg.AssetKey("production_v5_export"), name)
        (record,) = instance.event_log_storage.get_asset_check_execution_history(key, limit=5)
        assert record.partition == DAY and record.run_id == result.run_id

    # a complete export: green, then an incomplete refresh keeps showing it (never the incomplete one)
    other = "2026-01-03"
    assert _run(instance, _resources(tmp_path), day=other, only="production_v5_export").success
    result = _run(instance, _resources(tmp_path), day=other, only="production_v5_export", run_config=INCOMPLETE)
    assert result.success and result.get_asset_materialization_events() == []
    assert _status(instance, other) == dg.AssetPartitionStatus.MATERIALIZED
    shown = f"production-v5-{other}/v1"
    checks = _checks(result)
    refresh = checks[("production_v5_export", "latest_refresh")]
    assert not refresh.passed and refresh.severity == dg.AssetCheckSeverity.WARN and refresh.partition == other
    assert f"shows {shown}" in refresh.description and "row_ceiling" in refresh.description
    assert checks[("production_v5_export", "export_complete")].passed
    (observed,) = _observations(result)
    assert observed.metadata["refresh_failed"].value == "row_ceiling"
    assert observed.metadata["latest_complete"].value == shown
    assert observed.metadata["incomplete_version"].value == f"production-v5-{other}/v2"
    assert any("refresh failed (row_ceiling)" in m for m in _messages(instance, result))
    latest = instance.get_latest_materialization_event(dg.AssetKey("production_v5_export"))
    assert latest.asset_materialization.metadata["dataset_id"].value == shown


def test_a_failed_refresh_never_hides_a_complete_export(materialized_day, monkeypatch):
    """Finding 5, 2026-11-25: the database is down when a day with a complete export is refreshed."""
    instance, _, root = materialized_day
    assert _status(instance, DAY) == dg.AssetPartitionStatus.MATERIALIZED
    dsn, port = _unreachable()
    _set_gate(monkeypatch, dsn)
    result = _run(instance, _resources(root), only="production_v5_export")
    # retried (twice) as a transient error, then the day keeps its export: the run succeeds, green
    assert sum(e.event_type_value == "STEP_UP_FOR_RETRY" for e in result.all_events) == 2
    assert result.success and result.get_asset_materialization_events() == []
    assert _status(instance, DAY) == dg.AssetPartitionStatus.MATERIALIZED
    shown = f"production-v5-{DAY}/v1"
    (observed,) = _observations(result)
    assert observed.metadata["refresh_failed"].value == "production_unavailable"
    assert observed.metadata["latest_complete"].value == shown
    refresh = _checks(result)[("production_v5_export", "latest_refresh")]
    assert not refresh.passed and refresh.partition == DAY and f"shows {shown}" in refresh.description
    records = instance.get_records_for_run(result.run_id, limit=10_000).records
    blob = "\n".join(serialize_value(r.event_log_entry) for r in records)
    assert "refresh failed (production_unavailable)" in blob and "down-pw" not in blob and port not in blob


def test_a_re_run_reuses_the_identical_versions(materialized_day, world, monkeypatch):
    """Finding 6: re-running a day publishes no copy (2026-11-26 had v1, v2, v3 with one sha256)."""
    instance, first, root = materialized_day
    _set_gate(monkeypatch, world)
    result = _run(instance, _resources(root))
    assert result.success
    for asset, name in (("production_v5_export", "production-v5"), ("returnclock_export", "returnclock"),
                        ("timestamp_dataset", "timestamp"), ("returnclock_training_split", "returnclock")):
        meta = _meta(result, asset)
        assert meta["reused"] is True and meta["dataset_id"] == _meta(first, asset)["dataset_id"], asset
    v5 = _meta(result, "production_v5_export")
    assert v5["version"] == 1 and v5["latest_complete"] == f"production-v5-{DAY}/v1"
    assert sorted(p.name for p in (root / "datasets" / f"production-v5-{DAY}").iterdir() if p.name.startswith("v")) \
        == ["v1"]
    assert sorted(p.name for p in (root / "datasets" / f"timestamp-{DAY}").iterdir() if p.name.startswith("v")) \
        == ["v1"]
    assert _checks(result)[("production_v5_export", "no_raw_identifiers")].passed  # checked again, on the same data


def test_a_day_not_yet_settled_skips_without_connecting(world, tmp_path, monkeypatch, listener):
    _set_gate(monkeypatch, f"postgresql://u@127.0.0.1:{listener.getsockname()[1]}/db")
    yesterday = (datetime.now(timezone.utc) - timedelta(days=1)).strftime("%Y-%m-%d")
    instance = dg.DagsterInstance.ephemeral()
    result = _run(instance, _resources(tmp_path, settle_seconds=3 * 86400), day=yesterday)
    assert result.success and result.get_asset_materialization_events() == []
    assert sum("settles at" in m for m in _messages(instance, result)) == 2
    assert _no_connection(listener)

    # an explicit ingested_before bypasses the settle delay: the export runs (and fails clearly: no database)
    _set_gate(monkeypatch, _unreachable()[0])
    result = _run(instance, _resources(tmp_path), only="production_v5_export",
                  run_config={"ops": {"production_v5_export": {"config": {"ingested_before": "2026-01-03T00:00:00Z"}}}})
    failures = _failures(result)
    assert "production_unavailable" in failures["production_v5_export"] and "127.0.0.1" not in str(failures)
    # an unreachable database is transient: retried (twice) before the step fails
    assert sum(e.event_type_value == "STEP_UP_FOR_RETRY" for e in result.all_events) == 2
    # the step's final failure, the last error on the run's page, is the database error with its code,
    # not the retry policy's "Exceeded max_retries of 2" (with the real error further up)
    [last] = [e.step_failure_data for e in result.all_events if e.is_step_failure]
    assert last.error.cls_name == "Failure" and "max_retries" not in last.error.to_string()
    assert last.user_failure_data.description.startswith("[production_unavailable] ")
    assert last.user_failure_data.description.endswith(" (after 2 retries)")
    # the run-failure alert says what was retried, with the project's error code, not "Exceeded max_retries"
    from extrarlhf_assets.defs.operations.sensors import failure_alert

    context = dg.build_run_status_sensor_context(
        sensor_name="run_failure_alert", dagster_event=result.get_run_failure_event(), dagster_instance=instance,
        dagster_run=instance.get_run_by_id(result.run_id)).for_run_failure()
    error = failure_alert(context, retry_wait_s=0)["error"]
    assert error.startswith("production_v5_export: [production_unavailable] ") and error.endswith(" (after 2 retries)")
    assert "max_retries" not in error and "down-pw" not in error and "127.0.0.1" not in error

    # a bad cut-off is a definite error: said clearly, never retried
    result = _run(instance, _resources(tmp_path), only="production_v5_export",
                  run_config={"ops": {"production_v5_export": {"config": {"ingested_before": "2026-01-03T00:00:00"}}}})
    assert "has no timezone" in _failures(result)["production_v5_export"]
    assert not any(e.event_type_value == "STEP_UP_FOR_RETRY" for e in result.all_events)
