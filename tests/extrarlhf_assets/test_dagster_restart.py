"""A run left STARTING by a daemon restart is failed and retried (issue 29, finding 1).

The daemon launches runs through its own code server, so a daemon that dies while a run is
STARTING takes the half-launched worker with it, and nothing ever marks the run: before run
monitoring it stayed STARTING for good. Here the instance is deploy/dagster.yaml with one
value changed in the copy, ``start_timeout_seconds`` 180 -> 30 (so the test waits 30 s, not 3
minutes); the daemon's whole process group gets SIGKILL while a collection run is STARTING, a
new daemon starts, and run monitoring fails the run for its start timeout; the run retry then
launches it again and it succeeds.
"""

import os
import signal
import subprocess
import time

import dagster as dg
import pytest

from tests.dagster_helpers import (BIN, FINISHED, ROOT, dagster_services, instance_env, launch, run_statuses,
                                   tcp_postgres, wait_for)

GROUP = "restarted"


def test_a_run_starting_when_the_daemon_dies_is_failed_by_the_start_timeout_and_retried(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    deployed = (ROOT / "deploy" / "dagster.yaml").read_text()
    assert deployed.count("start_timeout_seconds: 180\n") == 1
    (home / "dagster.yaml").write_text(deployed.replace("start_timeout_seconds: 180\n", "start_timeout_seconds: 30\n"))
    with tcp_postgres() as server, pytest.MonkeyPatch.context() as mp:
        server.psql("postgres", 'CREATE DATABASE "dagster"')
        env = {**instance_env(home, server), "RLHF_SESSIONS_DIR": str(tmp_path / "sessions"),
               "RLHF_DATASETS_DIR": str(tmp_path / "datasets"), "RLHF_CHECKPOINTS_DIR": str(tmp_path / "checkpoints")}
        for key in [k for k in env if k.startswith("DAGSTER_")]:
            mp.setenv(key, env[key])
        with dg.DagsterInstance.from_config(str(home)) as instance, dagster_services(env, tmp_path) as services:
            instance.add_dynamic_partitions("session_groups", [GROUP])
            daemon = services.procs[0]
            run_id = launch(services.url, "__ASSET_JOB", partition=GROUP, assets=["battle_sessions"],
                            run_config={"ops": {"battle_sessions": {"config": {"n_battles": 5}}}})
            wait_for("the run STARTING", lambda: instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTING,
                     120, every=0.05)
            os.killpg(daemon.pid, signal.SIGKILL)  # the daemon, its code server and the worker being launched
            daemon.wait(timeout=10)
            killed = time.monotonic()
            time.sleep(3)
            assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTING  # nobody left to mark it
            log = tmp_path / "daemon2.log"
            with open(log, "w") as out:  # stopped with the others by dagster_services
                services.procs.append(subprocess.Popen([str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"],
                                                       cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                                       start_new_session=True))
            wait_for("the STARTING run failed",
                     lambda: instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE, 120,
                     lambda: log.read_text()[-4000:])
            assert time.monotonic() - killed < 30 + 15 + 30  # the timeout, one poll, the new daemon's start
            failures = [e.message for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)]
            assert failures == ["Run timed out due to taking longer than 30 seconds to start."]

            def retried() -> str | None:
                runs = run_statuses(services.url)
                return next((r for r, v in runs.items() if v["tags"].get("dagster/parent_run_id") == run_id
                             and v["status"] in FINISHED), None)

            retry = wait_for("the retry finishing", retried, 120, lambda: log.read_text()[-4000:])
            runs = run_statuses(services.url)
            assert runs[retry]["status"] == "SUCCESS"
            assert runs[run_id]["tags"]["dagster/failure_reason"] == "START_TIMEOUT"
