"""The run launcher of the deployed instance (deploy/dagster.yaml; issue 52, DESIGN 12.3): Dagster's
``DefaultRunLauncher`` (runs are processes of the code server) plus the worker health check that
run monitoring calls, so that a STARTED run whose worker is gone is failed with its reason
instead of staying STARTED until its max runtime. Before launching, a run whose code location
here lacks its job or environment variables the creating one had is failed with the names
(envcheck.py).

Dagster 1.13's ``DefaultRunLauncher`` has no health check (``supports_check_run_worker_health``
is False), so the monitoring daemon could not notice a worker that died with the process that
launched it: a daemon killed with its own code server (workspace.yaml), or a separate code server
(deploy/workspace.grpc.yaml) killed with its workers. A worker killed alone is noticed by its code
server, which fails the run itself.

How the check decides, per STARTED run:

- The worker's pid is the one its own "Started process for run (pid: N)" event names; its host is
  the ``extrarlhf/worker_host`` tag written at launch (the launching machine's name when the code
  server is on this machine, else the code server's host name).
- Worker on this machine: no process with that pid (or a zombie, or a process started after the
  worker's event, i.e. a reused pid) -> FAILED with the pid and host; a live one -> RUNNING. When
  the worker belonged to a separate code server (``extrarlhf/code_server: separate``) that does
  not answer, the run is failed only once it answers again or after ``code_server_grace_seconds``:
  the run retry and the runs queued behind are launched through that code server, and a retry
  Dagster tries to create while it is down is given up for good.
- Worker on another machine: its pid means nothing here, so the code server is asked instead
  (the worker is its child). Reachable -> RUNNING; unreachable for ``code_server_grace_seconds``
  (default 60, time for a code server to restart) -> FAILED, since its workers died with it.
  Not detected: a remote code server that came back within the grace period (its new process
  cannot say whether the old one's worker lives); such a run ends at its max runtime.
- Anything it cannot decide is RUNNING: the monitoring daemon fails a run on any other status
  (UNKNOWN included), and a run must not be failed without evidence. Such a run is still
  bounded by its max runtime.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster._core.launcher import CheckRunHealthResult, LaunchRunContext, WorkerStatus
from dagster._core.remote_origin import GrpcServerCodeLocationOrigin
from dagster._core.storage.tags import GRPC_INFO_TAG

from .envcheck import NO_RETRY_TAG, launch_problem

WORKER_HOST_TAG = "extrarlhf/worker_host"
# "separate": a code server of its own (deploy/workspace.grpc.yaml), which comes back at the same
# address after a restart; "daemon": the one the daemon started for itself (workspace.yaml), gone
# for good with its daemon
CODE_SERVER_TAG = "extrarlhf/code_server"
STARTED_PROCESS = "Started process for run"
LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0", ""}


def this_host() -> str:
    return socket.gethostname()


def worker_host_for(grpc_host: str | None, launching_host: str) -> str:
    """Where a run worker of the code server at ``grpc_host`` runs, as seen from ``launching_host``:
    a loopback address or the launching machine's own name means the launching machine."""
    host = (grpc_host or "").strip().lower()
    if host in LOOPBACK or host == launching_host.lower() or host.startswith("127."):
        return launching_host
    return grpc_host or ""


def _process_state(pid: int) -> tuple[str, float] | None:
    """(state letter, start time as a Unix timestamp) of ``pid`` from /proc, or None where /proc
    does not tell (not Linux, the process already gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open("/proc/stat") as f:
            boot = next(float(line.split()[1]) for line in f if line.startswith("btime "))
    except (OSError, StopIteration, ValueError):
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) ": state is field 3 of stat
    return fields[0], boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def worker_process_status(host: str | None, pid: int | None, started_at: float | None = None) -> CheckRunHealthResult:
    """Whether the run worker ``pid`` on ``host`` (whose "Started process" event was written at
    ``started_at``) is alive, judged from this machine: RUNNING, FAILED, or UNKNOWN when the pid
    says nothing here (another machine, or no pid known)."""
    if pid is None or not host:
        return CheckRunHealthResult(WorkerStatus.UNKNOWN, "the run worker's pid or host is not known")
    if host != this_host():
        return CheckRunHealthResult(WorkerStatus.UNKNOWN, f"the run worker (pid {pid}) runs on {host}, not here")
    gone = f"the run worker process (pid {pid} on {host}) is gone"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return CheckRunHealthResult(WorkerStatus.FAILED, gone)
    except PermissionError:
        pass  # a process of another user: alive, but it may be a reused pid (checked below)
    state = _process_state(pid)
    if state is not None:
        letter, began = state
        if letter in ("Z", "X"):
            return CheckRunHealthResult(WorkerStatus.FAILED, f"{gone} (exited, not yet reaped)")
        if started_at is not None and began > started_at + 5:
            return CheckRunHealthResult(WorkerStatus.FAILED, f"{gone} (the pid now belongs to a newer process)")
    return CheckRunHealthResult(WorkerStatus.RUNNING, f"the run worker process (pid {pid} on {host}) is alive")


class WorkerCheckingRunLauncher(dg.DefaultRunLauncher):
    """``DefaultRunLauncher`` with a worker health check for run monitoring (see the module)."""

    def __init__(self, inst_data=None, code_server_grace_seconds: float = 60):
        super().__init__(inst_data=inst_data)
        self.code_server_grace_seconds = float(code_server_grace_seconds)
        self._workers: dict[str, tuple[int, float]] = {}  # run id -> (pid, started at), once read
        self._unreachable_since: dict[str, float] = {}  # code server address -> first failed probe

    @classmethod
    def config_type(cls):
        return {"code_server_grace_seconds": dg.Field(float, is_required=False, default_value=60.0,
                                                      description="How long a code server may stay unreachable "
                                                      "(restarting) before the runs of its workers are failed.")}

    @classmethod
    def from_config_value(cls, inst_data, config_value: Mapping[str, Any]):
        return cls(inst_data=inst_data, **config_value)

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        problem = launch_problem(run, context.workspace)
        if problem:  # the code location here cannot run it as created: fail it now, with the fix, never retried
            self._instance.add_run_tags(run.run_id, {NO_RETRY_TAG: "0"})  # Dagster then tags it will_retry: false
            self._instance.report_run_failed(run, problem)
            return
        if context.workspace is not None and run.remote_job_origin is not None:
            location = context.workspace.get_code_location(
                run.remote_job_origin.repository_origin.code_location_origin.location_name)
            client = getattr(location, "client", None)  # a gRPC location's (the only kind this launches)
            host = worker_host_for(getattr(client, "host", None), this_host()) if client else ""
            if host:
                separate = isinstance(location.origin, GrpcServerCodeLocationOrigin)
                self._instance.add_run_tags(run.run_id, {WORKER_HOST_TAG: host,
                                                         CODE_SERVER_TAG: "separate" if separate else "daemon"})
        super().launch_run(context)

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def _worker(self, run_id: str) -> tuple[int, float] | None:
        if len(self._workers) > 10_000:  # the runs of a long-lived daemon: forget the old ones
            self._workers.clear()
        if run_id not in self._workers:
            records = self._instance.event_log_storage.get_logs_for_run(
                run_id, of_type={dg.DagsterEventType.ENGINE_EVENT}, limit=50)
            for entry in records:
                if entry.message.startswith(STARTED_PROCESS):
                    pid = entry.dagster_event.engine_event_data.metadata["pid"].value  # type: ignore[union-attr]
                    self._workers[run_id] = (int(pid), entry.timestamp)
                    break
            else:
                return None
        return self._workers[run_id]

    def _code_server(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        info = json.loads(run.tags.get(GRPC_INFO_TAG) or "{}")
        if not info:
            return CheckRunHealthResult(WorkerStatus.UNKNOWN, "the run has no code server address")
        from dagster._grpc.client import DagsterGrpcClient

        address = f"{info.get('host')}:{info.get('port') or info.get('socket')}"
        client = DagsterGrpcClient(port=info.get("port"), socket=info.get("socket"), host=info.get("host"),
                                   use_ssl=bool(info.get("use_ssl", False)))
        try:
            client.get_server_id(timeout=10)
        except Exception:  # unreachable, whatever the gRPC error
            since = self._unreachable_since.setdefault(address, time.time())
            down = time.time() - since
            if down >= self.code_server_grace_seconds:
                return CheckRunHealthResult(
                    WorkerStatus.FAILED,
                    f"the code server that ran the run worker ({address}) has been unreachable for {down:.0f} s "
                    f"(more than code_server_grace_seconds, {self.code_server_grace_seconds:g}): its run workers "
                    "died with it")
            return CheckRunHealthResult(
                WorkerStatus.UNKNOWN, f"the code server ({address}) is unreachable since {down:.0f} s; "
                f"waiting {self.code_server_grace_seconds:g} s for a restart")
        self._unreachable_since.pop(address, None)
        return CheckRunHealthResult(WorkerStatus.RUNNING, f"the code server ({address}) answers")

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        worker = self._worker(run.run_id)
        pid, started_at = worker if worker else (None, None)
        host = run.tags.get(WORKER_HOST_TAG)
        result = worker_process_status(host, pid, started_at)
        if result.status == WorkerStatus.UNKNOWN:
            result = self._code_server(run)
        elif result.status == WorkerStatus.FAILED and run.tags.get(CODE_SERVER_TAG) == "separate":
            # a dead worker of a separate code server that is restarting: fail the run once the code
            # server answers again (or its grace period is over), since the run retry and the runs
            # queued behind it are launched through it and are lost if it does not answer then
            server = self._code_server(run)
            if server.status == WorkerStatus.UNKNOWN:
                return CheckRunHealthResult(WorkerStatus.RUNNING, f"{result.msg}; {server.msg}")
            if server.status == WorkerStatus.FAILED:
                result = CheckRunHealthResult(WorkerStatus.FAILED, f"{result.msg}; {server.msg}")
        if result.status == WorkerStatus.FAILED:
            self._workers.pop(run.run_id, None)
            return result
        # UNKNOWN would make run monitoring fail the run: without evidence of a dead worker it is RUNNING
        return CheckRunHealthResult(WorkerStatus.RUNNING, result.msg)

    def get_run_worker_debug_info(self, run: dg.DagsterRun, include_container_logs: bool | None = True) -> str | None:
        worker = self._workers.get(run.run_id) or self._worker(run.run_id)
        host = run.tags.get(WORKER_HOST_TAG, "an unknown host")
        return f"Run worker: pid {worker[0]} on {host}." if worker else None
