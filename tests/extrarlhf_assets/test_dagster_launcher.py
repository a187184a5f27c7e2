"""The run launcher's worker health check (extrarlhf_assets/launcher.py; issue 52 item 1) on real
processes and a real instance: a live worker pid is RUNNING, a dead one (exited, a zombie, or a
pid now taken by a newer process) is FAILED, one on another machine is not judged from its pid,
and a worker whose code server has been unreachable for longer than the grace period is FAILED.
The daemon-level behaviour (run monitoring failing a run whose daemon or code server died) is
test_dagster_orphans.py."""

import subprocess
import sys
import time

import dagster as dg
import pytest
from dagster._core.events import EngineEventData
from dagster._core.launcher import WorkerStatus
from dagster._core.storage.tags import GRPC_INFO_TAG
from dagster._core.test_utils import create_run_for_test, instance_for_test

from extrarlhf_assets.launcher import (CODE_SERVER_TAG, WORKER_HOST_TAG, WorkerCheckingRunLauncher, this_host,
                                       worker_host_for, worker_process_status)
from tests.servers import free_port

LAUNCHER = {"module": "extrarlhf_assets.launcher", "class": "WorkerCheckingRunLauncher"}


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_a_live_worker_is_running_a_dead_one_failed_another_hosts_unknown():
    proc = _sleeper()
    try:
        started = time.time()
        live = worker_process_status(this_host(), proc.pid, started)
        assert live.status == WorkerStatus.RUNNING, live
        # the worker's host is another machine: its pid says nothing here
        assert worker_process_status("other-host.example", proc.pid, started).status == WorkerStatus.UNKNOWN
        assert worker_process_status(this_host(), None).status == WorkerStatus.UNKNOWN
        # a pid reused by a process that started after the worker's event is not the worker
        reused = worker_process_status(this_host(), proc.pid, started - 3600)
        assert reused.status == WorkerStatus.FAILED and "newer process" in reused.msg
        proc.kill()
        time.sleep(0.5)
        # killed but not yet reaped by its parent (us): a zombie is a dead worker
        zombie = worker_process_status(this_host(), proc.pid, started)
        assert zombie.status == WorkerStatus.FAILED and "not yet reaped" in zombie.msg, zombie
        proc.wait()
        dead = worker_process_status(this_host(), proc.pid, started)
        assert dead.status == WorkerStatus.FAILED
        assert dead.msg == f"the run worker process (pid {proc.pid} on {this_host()}) is gone"
    finally:
        proc.kill()
        proc.wait()


def test_the_worker_host_is_the_launching_machine_for_a_local_code_server():
    assert worker_host_for("localhost", "daemon-1") == "daemon-1"
    assert worker_host_for("127.0.0.1", "daemon-1") == "daemon-1"
    assert worker_host_for("DAEMON-1", "daemon-1") == "daemon-1"
    assert worker_host_for("code-server", "daemon-1") == "code-server"


def _started_run(instance, pid: int, tags: dict) -> dg.DagsterRun:
    run = create_run_for_test(instance, job_name="campaign_loop", status=dg.DagsterRunStatus.STARTED, tags=tags)
    instance.report_engine_event(f"Started process for run (pid: {pid}).", run, EngineEventData.in_process(pid))
    return run


def test_the_instance_launcher_checks_the_pid_its_run_recorded():
    with instance_for_test(overrides={"run_launcher": LAUNCHER}) as instance:
        launcher = instance.run_launcher
        assert isinstance(launcher, WorkerCheckingRunLauncher) and launcher.supports_check_run_worker_health
        assert launcher.code_server_grace_seconds == 60  # the default
        proc = _sleeper()
        try:
            run = _started_run(instance, proc.pid, {WORKER_HOST_TAG: this_host()})
            assert launcher.check_run_worker_health(run).status == WorkerStatus.RUNNING
            proc.kill()
            proc.wait()
            result = launcher.check_run_worker_health(run)
            assert result.status == WorkerStatus.FAILED
            assert result.msg == f"the run worker process (pid {proc.pid} on {this_host()}) is gone"
            assert launcher.get_run_worker_debug_info(run) == f"Run worker: pid {proc.pid} on {this_host()}."
        finally:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("grace", [0.0, 60.0])
def test_a_remote_worker_is_judged_by_its_code_server(grace):
    overrides = {"run_launcher": {**LAUNCHER, "config": {"code_server_grace_seconds": grace}}}
    with instance_for_test(overrides=overrides) as instance:
        port = free_port()  # nothing listens there: the code server is down
        run = _started_run(instance, 4242, {WORKER_HOST_TAG: "other-host.example",
                                            GRPC_INFO_TAG: f'{{"host": "127.0.0.1", "port": {port}}}'})
        result = instance.run_launcher.check_run_worker_health(run)
        if grace == 0:
            assert result.status == WorkerStatus.FAILED
            assert f"the code server that ran the run worker (127.0.0.1:{port}) has been unreachable" in result.msg
        else:  # within the grace period (a code server restarting): not failed, the reason said
            assert result.status == WorkerStatus.RUNNING
            assert "waiting 60 s for a restart" in result.msg


@pytest.mark.parametrize("grace", [0.0, 60.0])
def test_a_dead_worker_of_a_restarting_code_server_is_failed_once_it_answers_or_after_the_grace(grace):
    """The worker of a separate code server died with it: failing the run while the code server is
    still down would lose its retry (launched through the code server), so it waits for it."""
    overrides = {"run_launcher": {**LAUNCHER, "config": {"code_server_grace_seconds": grace}}}
    with instance_for_test(overrides=overrides) as instance:
        proc = _sleeper()
        proc.kill()
        proc.wait()
        port = free_port()  # the code server, still down
        run = _started_run(instance, proc.pid, {WORKER_HOST_TAG: this_host(), CODE_SERVER_TAG: "separate",
                                                GRPC_INFO_TAG: f'{{"host": "localhost", "port": {port}}}'})
        result = instance.run_launcher.check_run_worker_health(run)
        gone = f"the run worker process (pid {proc.pid} on {this_host()}) is gone"
        assert result.msg.startswith(gone)
        if grace == 0:
            assert result.status == WorkerStatus.FAILED and "its run workers died with it" in result.msg
        else:
            assert result.status == WorkerStatus.RUNNING and "waiting 60 s for a restart" in result.msg
        # the daemon's own code server (workspace.yaml) never comes back: failed at once
        own = _started_run(instance, proc.pid, {WORKER_HOST_TAG: this_host(), CODE_SERVER_TAG: "daemon",
                                                GRPC_INFO_TAG: f'{{"host": "localhost", "port": {port}}}'})
        assert instance.run_launcher.check_run_worker_health(own).status == WorkerStatus.FAILED
