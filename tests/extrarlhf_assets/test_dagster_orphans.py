"""No run stays STARTED once the process that launched its worker dies (issue 52 item 1; DESIGN 12.3).

Both deployments the docs describe, for real: a throwaway PostgreSQL, ``dagster-daemon`` and
``dagster-webserver``, and the instance file deploy/dagster.yaml copied with two values shortened
(run monitoring polls every 5 s instead of 15, slots freed 5 s after a run ends instead of 30), so
the test waits seconds, not minutes. Its run launcher is ExtraRLHF's ``WorkerCheckingRunLauncher``.

- One machine (workspace.yaml): run workers are children of the daemon's own code server. The
  daemon's process group gets SIGKILL while a collection run is STARTED (its worker dies with it)
  and a second run of the same group is QUEUED behind it. Before the launcher's health check the
  run stayed STARTED for good (only its 12 h max runtime would end it) and the queued run waited.
  Now the new daemon's run monitoring fails it naming the dead worker, the run retry follows, and
  the queued run runs.
- Separate code server (deploy/workspace.grpc.yaml, the team deployment): the code server's
  process group gets SIGKILL instead and comes back on the same port; the same holds.

The launcher's decisions one by one (live, dead, zombie, reused pid, other host, unreachable code
server) are test_dagster_launcher.py.
"""

import os
import signal
import time

import dagster as dg
import pytest

from extrarlhf_assets.launcher import (CODE_SERVER_TAG, WORKER_HOST_TAG, WorkerCheckingRunLauncher, this_host,
                                       worker_process_status)
from tests.dagster_helpers import (FINISHED, ROOT, dagster_services, instance_env, launch, run_statuses,
                                   start_code_server, start_daemon, stop_group, tcp_postgres, wait_for)
from tests.servers import free_port

POLL = 5
# the collection run whose worker dies: slow enough (a search teacher) to be still collecting when
# it is killed, short enough for its retry to take seconds
N_BATTLES = 12
TEACHER = "search:baseline:greedy?sims=1024"


@pytest.fixture(scope="module")
def server():
    with tcp_postgres() as pg:
        yield pg


def _home(tmp_path, server, db: str) -> dict[str, str]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    deployed = (ROOT / "deploy" / "dagster.yaml").read_text()
    shortened = {"poll_interval_seconds: 15\n": f"poll_interval_seconds: {POLL}\n",
                 "free_slots_after_run_end_seconds: 30\n": "free_slots_after_run_end_seconds: 5\n"}
    for old, new in shortened.items():
        assert deployed.count(old) == 1, old
        deployed = deployed.replace(old, new)
    (home / "dagster.yaml").write_text(deployed)
    server.psql("postgres", f'CREATE DATABASE "{db}"')
    return {**instance_env(home, server, db), "RLHF_SESSIONS_DIR": str(tmp_path / "sessions"),
            "RLHF_DATASETS_DIR": str(tmp_path / "datasets"), "RLHF_CHECKPOINTS_DIR": str(tmp_path / "checkpoints")}


def _collect(n: int, p1_model: str = "baseline:greedy") -> dict:
    return {"ops": {"battle_sessions": {"config": {"n_battles": n, "p1_model": p1_model, "seed": 3}}}}


def _started_worker(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The pid of a STARTED run's worker (its "Started process for run" event)."""
    if instance.get_run_by_id(run_id).status != dg.DagsterRunStatus.STARTED:
        return None
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        if entry.message.startswith("Started process for run"):
            return int(entry.dagster_event.engine_event_data.metadata["pid"].value)
    return None


def _errors(instance: dg.DagsterInstance, run_id: str) -> str:
    kinds = {dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.RUN_FAILURE}
    out = []
    for e in instance.all_logs(run_id, of_type=kinds):
        error = getattr(e.dagster_event.event_specific_data, "error", None)
        out.append(f"{e.step_key}: {e.message} {error.to_string()[:3000] if error else ''}")
    return "\n".join(out)


def _logs(tmp_path) -> str:
    return "\n".join(f"{p.name}:\n{p.read_text()[-3000:]}" for p in sorted(tmp_path.glob("*.log")))


def _dead(pid: int) -> bool:
    return worker_process_status(this_host(), pid).status.value == "FAILED"


def _orphan_then_recover(instance, env, services, tmp_path, kill, group: str, code_server: str,
                         dead_tags: dict | None = None):
    """Launch a collection run and a second one of the same group, ``kill()`` what launched the
    first one's worker once it is STARTED, and check that run monitoring fails it (naming the
    worker) and the queued run then succeeds. Returns (dead run id, queued run id, seconds from
    the kill to the failure); ``kill`` returns when it killed."""
    instance.add_dynamic_partitions("session_groups", [group])
    dead = launch(services.url, "__ASSET_JOB", partition=group, assets=["battle_sessions"],
                  run_config=_collect(N_BATTLES, TEACHER), tags=dead_tags)
    wait_for("the run dequeued", lambda: instance.get_run_by_id(dead).status != dg.DagsterRunStatus.QUEUED, 120,
             lambda: _logs(tmp_path), every=0.2)
    # the same collection again (a group's series keeps one configuration): it waits for the first
    queued = launch(services.url, "__ASSET_JOB", partition=group, assets=["battle_sessions"],
                    run_config=_collect(N_BATTLES, TEACHER))
    pid = wait_for("the run's worker STARTED", lambda: _started_worker(instance, dead), 120, lambda: _logs(tmp_path),
                   every=0.1)
    killed = kill(pid, dead)  # at once: the run is still collecting (its worker is still importing, or playing)
    wait_for("the worker gone with what launched it", lambda: _dead(pid), 20)
    wait_for("the orphaned run failed by run monitoring",
             lambda: instance.get_run_by_id(dead).status == dg.DagsterRunStatus.FAILURE, 150,
             lambda: _logs(tmp_path))
    took = time.monotonic() - killed
    print(f"{group}: the orphaned run failed {took:.1f} s after the kill")  # the figure docs/dagster.md quotes
    tags = instance.get_run_by_id(dead).tags
    assert tags[WORKER_HOST_TAG] == this_host() and tags[CODE_SERVER_TAG] == code_server
    [failure] = [e.message for e in instance.all_logs(dead, of_type=dg.DagsterEventType.RUN_FAILURE)]
    assert f"the run worker process (pid {pid} on {this_host()}) is gone" in failure, failure
    assert f"Run worker: pid {pid} on {this_host()}." in failure, failure

    wait_for("the queued run finishing", lambda: run_statuses(services.url)[queued]["status"] in FINISHED, 180,
             lambda: _logs(tmp_path))
    assert run_statuses(services.url)[queued]["status"] == "SUCCESS", _errors(instance, queued)
    return dead, queued, took


def test_a_run_whose_daemon_died_is_failed_and_retried_and_the_queue_moves_on(server, tmp_path):
    """The runbook's one-machine setup: workspace.yaml, runs launched by the daemon's code server."""
    env = _home(tmp_path, server, "dagster_daemon_kill")
    with pytest.MonkeyPatch.context() as mp, open(tmp_path / "daemon2.log", "w") as out:
        for key in [k for k in env if k.startswith("DAGSTER_")]:
            mp.setenv(key, env[key])
        with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance, \
                dagster_services(env, tmp_path) as services:
            assert isinstance(instance.run_launcher, WorkerCheckingRunLauncher)
            daemon = services.procs[0]

            def kill_daemon(pid: int, run_id: str) -> float:
                assert services.started_by_us(pid) and os.getpgid(pid) == daemon.pid  # the daemon's worker
                os.killpg(daemon.pid, signal.SIGKILL)  # the daemon, its code server, the run worker
                killed = time.monotonic()
                daemon.wait(timeout=10)
                time.sleep(3)
                # nobody left to notice: this is where the run used to stay STARTED for hours, and
                # the run of the same group QUEUED behind it
                assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTED
                assert [r.status for r in instance.get_runs(dg.RunsFilter(tags={"dagster/partition": "orphan-a"}))
                        ].count(dg.DagsterRunStatus.QUEUED) == 1
                services.procs.append(start_daemon(env, out))  # stopped with the others
                return killed

            dead, queued, took = _orphan_then_recover(instance, env, services, tmp_path, kill_daemon, "orphan-a",
                                                      "daemon")
            assert took < 3 + 60 + 2 * POLL  # our wait, the new daemon's start, two polls

            # the run retry follows (a dead worker is retried): a new run of the group that succeeds
            def retried() -> str | None:
                runs = run_statuses(services.url)
                return next((r for r, v in runs.items() if v["tags"].get("dagster/parent_run_id") == dead
                             and v["status"] in FINISHED), None)

            retry = wait_for("the retry finishing", retried, 180, lambda: _logs(tmp_path))
            runs = run_statuses(services.url)
            assert runs[retry]["status"] == "SUCCESS", _errors(instance, retry)
            assert runs[retry]["tags"]["dagster/partition"] == "orphan-a"


def test_a_run_whose_code_server_died_is_failed_and_the_queue_moves_on(server, tmp_path):
    """The team deployment: deploy/workspace.grpc.yaml, runs launched by a separate code server."""
    env = _home(tmp_path, server, "dagster_code_server_kill")
    port = free_port()
    env.update({"DAGSTER_CODE_SERVER_HOST": "127.0.0.1", "DAGSTER_CODE_SERVER_PORT": str(port)})
    servers = []
    with pytest.MonkeyPatch.context() as mp, open(tmp_path / "code_server.log", "w") as cs_log:
        for key in [k for k in env if k.startswith("DAGSTER_")]:
            mp.setenv(key, env[key])
        servers.append(start_code_server(env, port, cs_log))
        try:
            with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance, \
                    dagster_services(env, tmp_path, workspace="deploy/workspace.grpc.yaml") as services:

                def kill_code_server(pid: int, run_id: str) -> float:
                    assert not services.started_by_us(pid) and os.getpgid(pid) == servers[0].pid  # its worker
                    os.killpg(servers[0].pid, signal.SIGKILL)
                    killed = time.monotonic()
                    servers[0].wait(timeout=10)
                    servers.append(start_code_server(env, port, cs_log))  # restarted on the same port
                    return killed

                # no run retry for this one: the daemon test checks that the retry follows
                dead, queued, took = _orphan_then_recover(instance, env, services, tmp_path, kill_code_server,
                                                          "orphan-b", "separate",
                                                          dead_tags={"dagster/max_retries": "0"})
                assert took < 60 + 2 * POLL  # the code server's restart, two polls
        finally:
            for proc in servers:
                stop_group(proc)
