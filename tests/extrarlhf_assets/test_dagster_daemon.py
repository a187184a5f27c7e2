"""Gates hold across runs, driven by the real daemon (``dagster-daemon run``) on a temp home.

Three groups are made outside Dagster (as the CLI or the MCP server makes them): ``good``
(ready for V5 training), ``small`` (too few battles: readiness warns) and ``tampered`` (a
trace that no longer matches its catalog). Nothing is launched by the test: the
``session_groups_sensor`` records the groups, the ``automation_sensor`` (on by default)
requests what follows. Then, after a full automation tick that saw every outcome:

- ``good`` has its dataset and its Lite split (automation out of the box);
- ``tampered``'s recording run failed ``trace_integrity`` and no run ever requested its dataset;
- ``small`` has its dataset, its readiness check warned, and no split was built; every run
  other than the tampered recording succeeded (a gate that holds is not a failed run).
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.event_api import PartitionKeyFilter

from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore

from tests.dagster_helpers import stop_group
from tests.trace_helpers import read_trace, write_trace

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 300


def _materialized(instance: dg.DagsterInstance, asset: str, partition: str) -> bool:
    return bool(instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1).records)


def _planned(instance: dg.DagsterInstance, run) -> set:
    """The assets a run planned to materialize (a sensor's run of an anonymous job has no asset_selection)."""
    records = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED)
    return {r.event_log_entry.dagster_event.asset_key.to_user_string() for r in records.records}


def _runs_for(instance: dg.DagsterInstance, asset: str, partition: str | None = None) -> list:
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": partition} if partition else {}))
    return [r for r in runs if asset in _planned(instance, r)]


def _automation_ticks(instance: dg.DagsterInstance) -> list:
    for state in instance.all_instigator_state():
        if state.instigator_name == "automation_sensor":
            return list(instance.get_ticks(state.instigator_origin_id, state.selector_id))
    return []


@pytest.fixture()
def daemon(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    sessions, checkpoints = tmp_path / "sessions", tmp_path / "checkpoints"
    run_series(sessions, "good", 24, seed=1, checkpoints_dir=checkpoints)
    run_series(sessions, "small", 3, seed=2, checkpoints_dir=checkpoints)
    run_series(sessions, "tampered", 3, seed=3, checkpoints_dir=checkpoints)
    store = SessionStore(sessions)
    battle = next(store.battles("tampered"))
    folder = store.battle_dir("tampered", battle.battle_id)
    write_trace(folder, "actions.jsonl", read_trace(folder, "actions.jsonl") + b"\n")
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT),
           "RLHF_SESSIONS_DIR": str(sessions), "RLHF_DATASETS_DIR": str(tmp_path / "datasets"),
           "RLHF_CHECKPOINTS_DIR": str(checkpoints), "RLHF_SENSOR_SETTLE_SECONDS": "0"}
    saved = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    instance = dg.DagsterInstance.get()
    # create the SQLite storages (runs, event log, schedules) before the daemon opens them: two
    # processes creating one schema at once race on it
    instance.get_runs(), instance.get_dynamic_partitions("session_groups"), instance.all_instigator_state()
    log = open(tmp_path / "daemon.log", "w")
    proc = subprocess.Popen([str(Path(sys.executable).with_name("dagster-daemon")), "run", "-w", "workspace.yaml"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with instance:
            yield instance, proc, tmp_path
    finally:
        if saved is None:
            os.environ.pop("DAGSTER_HOME", None)
        else:
            os.environ["DAGSTER_HOME"] = saved
        stop_group(proc)
        log.close()


def _state(instance: dg.DagsterInstance) -> str:
    """Runs (status, partition, planned assets) and every recorded skip reason, for a failure message."""
    lines = [f"run {r.run_id[:8]} {r.status.value} {r.tags.get('dagster/partition')} {sorted(_planned(instance, r))}"
             for r in instance.get_runs()]
    for asset in ("v5_dataset", "nemesis_lite_split", "v5_policy_checkpoint"):
        for record in instance.fetch_observations(dg.AssetKey(asset), limit=10).records:
            obs = record.asset_observation
            lines.append(f"{asset} {obs.partition} skipped: {obs.metadata.get('skipped_reasons')}")
    return "\n".join(lines)


def _wait(what: str, predicate, proc, tmp_path: Path, deadline: float, instance: dg.DagsterInstance) -> None:
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen.\n{_state(instance)}\ndaemon log:\n"
                        + (tmp_path / "daemon.log").read_text()[-6000:])
        time.sleep(2)


def test_gates_hold_across_daemon_driven_runs(daemon):
    instance, proc, tmp_path = daemon
    deadline = time.monotonic() + TIMEOUT
    finished = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)

    def settled() -> bool:
        runs = instance.get_runs()
        return (_materialized(instance, "nemesis_lite_split", "good") and _materialized(instance, "v5_dataset", "small")
                and bool(_runs_for(instance, "battle_sessions", "tampered"))
                and all(r.status in finished for r in runs))

    _wait("the sensor's recordings and the automation that follows", settled, proc, tmp_path, deadline, instance)
    quiet_since = time.time()
    _wait("an automation tick after every run finished",
          lambda: any(t.timestamp > quiet_since and t.status.value in ("SUCCESS", "SKIPPED")
                      for t in _automation_ticks(instance)), proc, tmp_path, deadline, instance)
    _wait("the runs of that tick finishing",
          lambda: all(r.status in finished for r in instance.get_runs()), proc, tmp_path, deadline, instance)
    # that tick saw every outcome and requested nothing: no gate was re-requested
    late = [r.dagster_run.run_id for r in instance.get_run_records() if r.create_timestamp.timestamp() > quiet_since]
    assert late == [], _state(instance)

    # the tampered group: recorded, failed its integrity check, and its dataset was never requested
    [recording] = _runs_for(instance, "battle_sessions", "tampered")
    assert recording.status == dg.DagsterRunStatus.FAILURE
    check = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(dg.AssetKey("battle_sessions"), "trace_integrity")],
        partition_filter=PartitionKeyFilter(key="tampered"))
    evaluation = next(iter(check.values())).event.dagster_event.event_specific_data
    assert evaluation.passed is False
    assert _runs_for(instance, "v5_dataset", "tampered") == []
    assert not (tmp_path / "datasets" / "tampered").exists()

    # the small group: a dataset whose readiness warned, and no split built from it
    assert not _materialized(instance, "nemesis_lite_split", "small")
    assert not (tmp_path / "datasets" / "small-nemesis-lite").exists()

    # every run but the tampered recording succeeded
    failed = [r for r in instance.get_runs() if r.status != dg.DagsterRunStatus.SUCCESS]
    assert [r.run_id for r in failed] == [recording.run_id]
    # automation, not the test, made the datasets
    dataset_runs = _runs_for(instance, "v5_dataset", "good")
    assert dataset_runs and all(r.tags.get("dagster/sensor_name") == "automation_sensor" for r in dataset_runs)
