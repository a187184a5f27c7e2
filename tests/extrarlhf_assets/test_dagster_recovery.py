"""A dead run worker on the real deployment (issue 29 findings 1, 2 and 10; DESIGN 12.2).

The instance is deploy/dagster.yaml copied verbatim into DAGSTER_HOME (run monitoring polling
every 15 s, slots freed 30 s after a run ends, run retries for dead workers), on a throwaway
PostgreSQL, with the real ``dagster-daemon`` and ``dagster-webserver``; runs are launched over
GraphQL as the UI launches them, and the run-failure sensor posts to a local webhook.

A ``battle_sessions`` run collects a group with a slow search teacher; once battles are on
disk its run worker (the pid the run's own "Started process for run" event names, checked to
be a child of our daemon) gets SIGKILL. Then, with nothing done by hand: the run is FAILURE,
the run-failure sensor alerts, the ``collection_cpu`` slot the dead run held is freed within
a minute, the daemon launches a resume retry (``dagster/parent_run_id``) that plays only the
missing battles and succeeds, a second collection run that was queued behind the dead one
runs, and the group on disk holds every battle and passes the core's ``check_sessions``.

Alongside, a run of the two production exports of a day asks for the multiprocess executor
in its run config (the code location stays in process by default): each export runs in its
own process, and the ``production_db`` pool still lets only one run at a time.

A run left STARTING by a daemon restart (failed by ``start_timeout_seconds``, then retried)
is test_dagster_restart.py: it needs the daemon killed and a shorter start timeout.
"""

import os
import shutil
import signal
import time
from pathlib import Path

import dagster as dg
import pytest

from extrarlhf.production import gate
from extrarlhf.production.fixture import build_fixture
from extrarlhf.runtime.sessions import FINAL_STATUSES, SessionStore, check_sessions, scan_catalog

from tests.dagster_helpers import (ROOT, assert_one_at_a_time, dagster_services, instance_env, intervals, launch,
                                   run_statuses, step_events, tcp_postgres, wait_for, webhook_server)

SALT = "recovery-test-salt-Xq7Vd2kw9PzL0bMf4RtY8nJc6HsA1eGuT5oW"
DAY = "2026-01-02"
KILLED, QUEUED = "killed-worker", "queued-behind"
# a series plays 16 battles side by side (CHUNK), so the first ones finish together: the worker
# is killed while the second chunk plays; the search teacher (about 20 battles/s on an idle
# core here) keeps the run collecting for seconds
N_BATTLES = 40
TEACHER = "search:baseline:greedy?sims=256"
EXPORTS = ["production_v5_export", "returnclock_export"]  # independent, both in pool production_db


def _collect(n: int, p1_model: str = "baseline:greedy") -> dict:
    return {"ops": {"battle_sessions": {"config": {"n_battles": n, "p1_model": p1_model, "seed": 3}}}}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("recovery")
    home = tmp / "dagster_home"
    home.mkdir()
    shutil.copyfile(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")  # verbatim
    with tcp_postgres() as server, webhook_server("/alerts") as hook, pytest.MonkeyPatch.context() as mp:
        server.psql("postgres", 'CREATE DATABASE "dagster"')
        production_dsn = server.create_database("prod_recovery")
        build_fixture(production_dsn, battles=60, players=24, days=3, seed=5, sessions_per_player=6)
        env = {**instance_env(home, server), "RLHF_SESSIONS_DIR": str(tmp / "sessions"),
               "RLHF_DATASETS_DIR": str(tmp / "datasets"), "RLHF_CHECKPOINTS_DIR": str(tmp / "checkpoints"),
               "RLHF_ALERT_WEBHOOK_URL": hook.url, "RLHF_DAGSTER_UI_URL": "http://dagster.test",
               gate.ENABLE_VAR: "1", gate.DSN_VAR: production_dsn, gate.SALT_VAR: SALT, gate.KEY_ID_VAR: "rc-rec"}
        for key in ("DAGSTER_HOME", "DAGSTER_PG_USERNAME", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_HOST",
                    "DAGSTER_PG_PORT", "DAGSTER_PG_DB"):
            mp.setenv(key, env[key])
        with dg.DagsterInstance.from_config(str(home)) as instance:
            # the pools' slots set once at deploy time (docs/dagster.md), and the partitions added
            for pool in ("collection_cpu", "production_db"):
                instance.event_log_storage.set_concurrency_slots(pool, 1)
            instance.add_dynamic_partitions("session_groups", [KILLED, QUEUED])
            with dagster_services(env, tmp) as services:
                # the multiprocess run (the two exports, free to run side by side but for their pool)
                # goes first and runs beside the recovery below
                production = launch(services.url, "__ASSET_JOB", partition=DAY, assets=EXPORTS, with_checks=False,
                                    run_config={"execution": {"config": {"multiprocess": {"max_concurrent": 2}}}})
                yield {"services": services, "instance": instance, "server": server, "hook": hook, "tmp": tmp,
                       "production_run": production}


def _log(deployment) -> str:
    tmp = deployment["tmp"]
    return "daemon log:\n" + (tmp / "daemon.log").read_text()[-5000:]


def _worker_pid(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The run worker's pid, from the run's "Started process for run (pid: N)" engine event."""
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        if entry.message.startswith("Started process for run"):
            return int(entry.dagster_event.engine_event_data.metadata["pid"].value)
    return None


def _finished_battles(store: SessionStore, group: str) -> list[int]:
    path = store.catalog_path(group)
    if not path.exists():
        return []
    return sorted(line.entry["index"] for line in scan_catalog(path)
                  if line.error is None and line.entry["status"] in FINAL_STATUSES)


def _holders(instance: dg.DagsterInstance, pool: str) -> set[str]:
    return {slot.run_id for slot in instance.event_log_storage.get_concurrency_info(pool).claimed_slots}


def test_a_killed_run_worker_frees_its_slot_and_a_resume_run_finishes_the_group(deployment):
    services, instance, hook = deployment["services"], deployment["instance"], deployment["hook"]
    store = SessionStore(deployment["tmp"] / "sessions")
    dead = launch(services.url, "__ASSET_JOB", partition=KILLED, assets=["battle_sessions"],
                  run_config=_collect(N_BATTLES, TEACHER))
    pid = wait_for("the collection run's worker starting", lambda: _worker_pid(instance, dead), 120,
                   lambda: _log(deployment))
    wait_for("battles on disk", lambda: _finished_battles(store, KILLED), 120, lambda: _log(deployment), every=0.2)
    assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.STARTED
    engine = [e.message for e in instance.all_logs(dead, of_type=dg.DagsterEventType.ENGINE_EVENT)]
    assert any(m.startswith("Executing steps in process") for m in engine)  # the default executor
    assert _holders(instance, "collection_cpu") == {dead}
    # a second collection run, queued behind the dead one's slot
    queued = launch(services.url, "__ASSET_JOB", partition=QUEUED, assets=["battle_sessions"], run_config=_collect(8))

    assert services.started_by_us(pid)  # a run worker of our daemon, nothing else
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    done_before = len(_finished_battles(store, KILLED))
    assert 0 < done_before < N_BATTLES

    # (a) the run is failed (the code server sees its worker gone) and still holds the slot
    wait_for("the dead run marked FAILURE",
             lambda: instance.get_run_by_id(dead).status == dg.DagsterRunStatus.FAILURE, 60, lambda: _log(deployment))
    assert dead in _holders(instance, "collection_cpu")
    # (b) run monitoring frees it: free_slots_after_run_end_seconds 30 + at most one 15 s poll
    wait_for("the dead run's slot freed", lambda: dead not in _holders(instance, "collection_cpu"), 75,
             lambda: _log(deployment))
    assert time.monotonic() - killed_at < 60

    # (c) the daemon's resume retry: a new run of the same partition that succeeds
    def retry() -> str | None:
        runs = run_statuses(services.url)
        return next((rid for rid, r in runs.items() if r["tags"].get("dagster/parent_run_id") == dead), None)

    resumed = wait_for("a retry of the dead run", retry, 60, lambda: _log(deployment))
    finished = ("SUCCESS", "FAILURE", "CANCELED")
    wait_for("the retry and the queued run finishing",
             lambda: all(run_statuses(services.url)[r]["status"] in finished for r in (resumed, queued)), 240,
             lambda: _log(deployment))
    runs = run_statuses(services.url)
    assert runs[resumed]["status"] == "SUCCESS", _log(deployment)
    tags = runs[resumed]["tags"]
    assert tags["dagster/root_run_id"] == dead and tags["dagster/retry_number"] == "1"
    assert tags["dagster/partition"] == KILLED
    # ... which resumed the series: the battles the dead worker finished were kept, not replayed
    [mat] = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("battle_sessions"), asset_partitions=[KILLED]), limit=5).records
    assert mat.run_id == resumed
    meta = {k: getattr(v, "value", v) for k, v in mat.asset_materialization.metadata.items()}
    assert meta["skipped"] >= done_before and meta["ran"] + meta["skipped"] == N_BATTLES
    assert meta["battles"] == N_BATTLES

    # (e) the run queued behind the dead one ran once the slot was free
    assert runs[queued]["status"] == "SUCCESS", _log(deployment)

    # (d) the group on disk: every battle, and the core's checks find nothing wrong
    assert _finished_battles(store, KILLED) == list(range(N_BATTLES))
    assert check_sessions(store.root) == []
    assert not store.lease_path(KILLED).exists()

    # the run-failure sensor alerted once for the dead run, the retry announced
    def alerts() -> list[dict]:
        return [p["body"] for p in hook.received if p["body"]["run_id"] == dead]

    [alert] = wait_for("the run-failure alert", alerts, 60, lambda: _log(deployment))
    assert alert["partition"] == KILLED and alert["job"] == "__ASSET_JOB"
    assert alert["will_retry"] is True and alert["retry_run_id"] == resumed  # the retry run existed
    assert alert["url"] == f"http://dagster.test/runs/{dead}"
    # how it died, in the words of whichever noticed first: the code server (its worker's exit) or
    # the daemon's run monitoring (a worker gone missing, named by the run launcher's health check)
    assert (alert["error"] in (f"Run execution process for {dead} was terminated by signal 9 (SIGKILL).",
                               "This run has been marked as failed from outside the execution context.")
            or alert["error"].startswith(f"Detected run worker status FAILED: 'the run worker process (pid {pid} ")), alert
    assert alert["signal"] == ("SIGKILL" if alert["error"].startswith("Run execution process") else None)
    assert {p["body"]["run_id"] for p in hook.received} == {dead}  # no other run failed


def test_a_multiprocess_run_still_holds_the_production_db_pool(deployment):
    services, server = deployment["services"], deployment["server"]
    run_id = deployment["production_run"]
    wait_for("the multiprocess production run finishing",
             lambda: run_statuses(services.url)[run_id]["status"] in ("SUCCESS", "FAILURE", "CANCELED"), 240,
             lambda: _log(deployment))
    assert run_statuses(services.url)[run_id]["status"] == "SUCCESS", _log(deployment)
    # a process per step: the multiprocess executor really ran
    workers = deployment["instance"].all_logs(run_id, of_type=dg.DagsterEventType.STEP_WORKER_STARTED)
    assert sorted(w.step_key for w in workers) == EXPORTS
    pooled = intervals(step_events(server, [run_id]), "STEP_START", ("STEP_SUCCESS", "STEP_FAILURE"),
                       lambda e: e["step"])
    assert sorted(k for _, _, k in pooled) == EXPORTS
    assert_one_at_a_time(pooled, "production_db steps")
    assert Path(deployment["tmp"], "datasets", f"returnclock-{DAY}").is_dir()
