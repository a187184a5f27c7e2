"""Shared helpers of the Dagster tests: resources on temp dirs with small thresholds, and a
real deployment (a throwaway PostgreSQL reachable over TCP, ``dagster-daemon`` and
``dagster-webserver`` against a copy of deploy/dagster.yaml, runs launched over GraphQL, step
intervals read back from the Postgres event log)."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

warnings.filterwarnings("ignore", module="dagster")

import dagster as dg  # noqa: E402

import pytest  # noqa: E402

from extrarlhf.production import localdb  # noqa: E402
from extrarlhf_assets.resources import CheckpointsResource, DatasetsResource, SessionsResource  # noqa: E402
from tests.servers import free_port, wait_http  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def resources(tmp_path, *, small: bool = True, settle_seconds: float = 0.0) -> dict:
    thresholds = dict(min_v5_battles=2, min_v5_decisions=10, min_nemesis_lite_battles=2, min_nemesis_lite_decks=2)
    return {"sessions": SessionsResource(sessions_dir=str(tmp_path / "sessions"), settle_seconds=settle_seconds),
            "datasets": DatasetsResource(datasets_dir=str(tmp_path / "datasets"), **(thresholds if small else {})),
            "checkpoints": CheckpointsResource(checkpoints_dir=str(tmp_path / "checkpoints"))}


def loop_config(n_battles: int, *, incumbent: str = "baseline:random", n_pairs: int = 150) -> dict:
    return {"ops": {
        "battle_sessions": {"config": {"n_battles": n_battles, "seed": 1}},
        "v5_policy_checkpoint": {"config": {"epochs": 3, "lr": 3e-3, "hidden": 64, "hidden2": 32}},
        "policy_benchmark": {"config": {"incumbent": incumbent, "n_pairs": n_pairs, "baseline_pairs": 1, "seed": 1}},
        "promoted_policy": {"config": {"require_current_incumbent": False}}}}


def run_loop(instance: dg.DagsterInstance, group: str, res: dict, config: dict):
    from extrarlhf_assets.definitions import defs

    if group not in instance.get_dynamic_partitions("session_groups"):
        instance.add_dynamic_partitions("session_groups", [group])
    return defs.resolve_job_def("campaign_loop").execute_in_process(
        instance=instance, partition_key=group, resources=res, run_config=config, raise_on_error=False)


def checks_of(result) -> dict[str, bool]:
    return {e.asset_check_key.name: e.passed for e in result.get_asset_check_evaluations()}


def materialized(result) -> set[str]:
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def metadata(result, asset: str) -> dict:
    for e in result.get_asset_materialization_events():
        if e.asset_key.to_user_string() == asset:
            return {k: getattr(v, "value", v) for k, v in e.event_specific_data.materialization.metadata.items()}
    raise KeyError(asset)


def stop_group(proc: subprocess.Popen) -> None:
    """Stop a server started with ``start_new_session=True`` and all its children: SIGTERM to
    its process group, SIGKILL if it is still there after 30 s."""
    stop_groups([proc], timeout=30)


def stop_groups(procs: list[subprocess.Popen], timeout: float = 20) -> None:
    """:func:`stop_group` for several servers at once: SIGTERM to every process group, then
    SIGKILL to the groups still there after ``timeout`` seconds in all; also SIGKILL to a group
    whose leader already exited (its children, e.g. run workers, may still be there)."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.time() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@contextlib.contextmanager
def tcp_postgres() -> Iterator[localdb.ThrowawayPostgres]:
    """A throwaway PostgreSQL listening on 127.0.0.1 too (Dagster's storage connects over TCP);
    skips the test without a server unless RLHF_REQUIRE_POSTGRES=1."""
    try:
        server = localdb.ThrowawayPostgres()
    except localdb.PostgresUnavailable as exc:
        if os.environ.get("RLHF_REQUIRE_POSTGRES") == "1":
            raise
        pytest.skip(str(exc))
    options = localdb.SERVER_OPTIONS
    localdb.SERVER_OPTIONS = options.replace("listen_addresses=''", "listen_addresses='127.0.0.1'")
    try:
        server.start()  # the options are read here only
    finally:
        localdb.SERVER_OPTIONS = options
    try:
        yield server
    finally:
        server.stop()


def instance_env(home: Path, server: localdb.ThrowawayPostgres, db: str = "dagster") -> dict[str, str]:
    """The environment of a process of the Postgres-backed instance in ``home`` (DAGSTER_PG_*)."""
    return {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT),
            "DAGSTER_PG_USERNAME": "postgres", "DAGSTER_PG_PASSWORD": "unused-with-trust-auth",
            "DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(server.port), "DAGSTER_PG_DB": db}


@dataclass
class Services:
    """A running daemon and webserver: the webserver's URL and both processes (group leaders)."""

    url: str
    procs: list[subprocess.Popen]

    def started_by_us(self, pid: int) -> bool:
        """``pid`` is in the process group of the daemon or the webserver (a run worker of theirs)."""
        try:
            return os.getpgid(pid) in {p.pid for p in self.procs}
        except ProcessLookupError:
            return False


def start_daemon(env: dict[str, str], log, workspace: str = "workspace.yaml") -> subprocess.Popen:
    """``dagster-daemon run -w workspace`` in its own process group (stop it with :func:`stop_group`),
    its output to the open file ``log``."""
    return subprocess.Popen([str(BIN / "dagster-daemon"), "run", "-w", workspace], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def grpc_health(port: int, env: dict) -> int:
    """The exit status of ``dagster api grpc-health-check`` (the image's HEALTHCHECK) on ``port``."""
    return subprocess.run([str(BIN / "dagster"), "api", "grpc-health-check", "-p", str(port)], env=env,
                          capture_output=True, timeout=60).returncode


def start_code_server(env: dict[str, str], port: int, log, timeout: float = 120) -> subprocess.Popen:
    """``dagster code-server start`` of the project's definitions on 127.0.0.1:``port`` (the project
    image's command) in its own process group, once its health check answers."""
    proc = subprocess.Popen([str(BIN / "dagster"), "code-server", "start", "-h", "127.0.0.1", "-p", str(port),
                             "-m", "extrarlhf_assets.definitions", "--location-name", "extrarlhf"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + timeout
    while grpc_health(port, env) != 0:
        if proc.poll() is not None or time.time() > deadline:
            stop_group(proc)
            raise RuntimeError(f"the code server on port {port} did not become healthy")
        time.sleep(1)
    return proc


@contextlib.contextmanager
def dagster_services(env: dict[str, str], logs: Path, workspace: str = "workspace.yaml",
                     daemon_env: dict[str, str] | None = None) -> Iterator[Services]:
    """``dagster-daemon run`` and ``dagster-webserver`` on ``workspace`` (``workspace.yaml``: each
    loads the code itself; ``deploy/workspace.grpc.yaml``: from a running code server) with ``env``
    (the daemon with ``daemon_env`` if given; each in its own process group, logs in
    ``logs/daemon.log`` and ``logs/webserver.log``), once the webserver answers; stops both and
    everything they started at the end."""
    port = free_port()
    files = {name: open(logs / f"{name}.log", "w") for name in ("daemon", "webserver")}
    procs = []
    try:
        procs.append(start_daemon(env if daemon_env is None else daemon_env, files["daemon"], workspace))
        procs.append(subprocess.Popen([str(BIN / "dagster-webserver"), "-w", workspace, "-h", "127.0.0.1",
                                       "-p", str(port)], cwd=ROOT, env=env, stdout=files["webserver"],
                                      stderr=subprocess.STDOUT, start_new_session=True))
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/server_info", procs, "the webserver",
                  lambda: (logs / "webserver.log").read_text()[-3000:], timeout=90)
        yield Services(url, procs)
    finally:
        stop_groups(procs)
        for f in files.values():
            f.close()


@dataclass
class Webhook:
    """A local HTTP endpoint that records every POST (path, content type, JSON body) and answers
    ``status`` after ``delay`` seconds."""

    url: str = ""
    received: list[dict] = field(default_factory=list)
    status: int = 200
    delay: float = 0.0


@contextlib.contextmanager
def webhook_server(path: str = "/hook") -> Iterator[Webhook]:
    """A :class:`Webhook` served by ``http.server`` in a thread on 127.0.0.1, at ``path``."""
    hook = Webhook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 -- http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(hook.delay)
            hook.received.append({"path": self.path, "type": self.headers["Content-Type"], "body": json.loads(body)})
            self.send_response(hook.status)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    hook.url = f"http://127.0.0.1:{server.server_address[1]}{path}"
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId status } } ... on PythonError { message }
  ... on RunConfigValidationInvalid { errors { message } } ... on InvalidSubsetError { message } } }"""
RUNS = """{ runsOrError { ... on Runs { results { runId status tags { key value } } } } }"""
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")


def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    req = urllib.request.Request(url + "/graphql", data=json.dumps({"query": query, "variables": variables or {}}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        body = json.loads(resp.read())
    assert "errors" not in body, body
    return body["data"]


def launch(url: str, job: str, *, partition: str | None = None, run_config: dict | None = None,
           assets: list[str] | None = None, with_checks: bool = True, tags: dict[str, str] | None = None) -> str:
    """Launch a run over GraphQL as the UI does (``job`` ``__ASSET_JOB`` with ``assets`` for a
    materialization, without their separate checks if not ``with_checks``); returns its run id."""
    selector = {"repositoryLocationName": "extrarlhf", "repositoryName": "__repository__", "jobName": job}
    if assets:
        selector["assetSelection"] = [{"path": [a]} for a in assets]
        if not with_checks:
            selector["assetCheckSelection"] = []
    tags = ({"dagster/partition": partition} if partition else {}) | (tags or {})
    params = {"selector": selector, "runConfigData": run_config or {},
              "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in tags.items()]}}
    out = graphql(url, LAUNCH, {"params": params})["launchRun"]
    assert out["__typename"] == "LaunchRunSuccess", out
    return out["run"]["runId"]


def run_statuses(url: str) -> dict[str, dict]:
    """Every run the webserver knows: run id -> {"status", "tags": {key: value}}."""
    return {r["runId"]: {"status": r["status"], "tags": {t["key"]: t["value"] for t in r["tags"]}}
            for r in graphql(url, RUNS)["runsOrError"]["results"]}


def wait_for(what: str, predicate: Callable[[], object], timeout: float, on_fail: Callable[[], str] = str,
             every: float = 1.0):
    """``predicate()`` once it is truthy, polled every ``every`` seconds; fails after ``timeout``
    seconds with ``what`` and ``on_fail()`` (e.g. the daemon's log)."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout:g} s\n{on_fail()}")
        time.sleep(every)
    return value


def step_events(server: localdb.ThrowawayPostgres, run_ids: list[str], db: str = "dagster") -> list[dict]:
    """Step start/end and run start/end events straight from the Postgres event log."""
    ids = ",".join(f"'{r}'" for r in run_ids)
    kinds = {dg.DagsterEventType[k].value: k for k in ("STEP_START", "STEP_SUCCESS", "STEP_FAILURE", "RUN_START",
                                                       "RUN_SUCCESS", "RUN_FAILURE", "RUN_ENQUEUED", "RUN_STARTING")}
    listed = ",".join(f"'{k}'" for k in kinds)
    rows = server.psql(db, f"SELECT run_id, step_key, dagster_event_type, timestamp FROM event_logs "
                           f"WHERE run_id IN ({ids}) AND dagster_event_type IN ({listed}) ORDER BY id")
    out = []
    for line in rows.strip().splitlines():
        run_id, step, kind, ts = line.split("|")
        out.append({"run": run_id, "step": step or None, "kind": kinds[kind],
                    "t": datetime.fromisoformat(ts).timestamp()})
    return out


def intervals(events: list[dict], start: str, ends: tuple[str, ...], key) -> list[tuple[float, float, str]]:
    """(start, end, key) of each span from a ``start`` event to the next of ``ends`` with the same key."""
    opened, spans = {}, []
    for e in events:
        k = key(e)
        if k is None:
            continue
        if e["kind"] == start:
            opened[k] = e["t"]
        elif e["kind"] in ends and k in opened:
            spans.append((opened.pop(k), e["t"], k))
    assert not opened, f"never ended: {opened}"
    return spans


def max_overlap(spans: list[tuple[float, float, str]]) -> int:
    points = sorted([(s, 1) for s, _, _ in spans] + [(e, -1) for _, e, _ in spans], key=lambda p: (p[0], p[1]))
    level = best = 0
    for _, delta in points:
        level += delta
        best = max(best, level)
    return best


def assert_one_at_a_time(spans: list[tuple[float, float, str]], what: str) -> None:
    """No two spans overlap (a pool with one slot held)."""
    ordered = sorted(spans)
    for (s1, e1, k1), (s2, e2, k2) in zip(ordered, ordered[1:]):
        assert s2 >= e1, f"{what} overlap: {k1} [{s1}, {e1}] and {k2} [{s2}, {e2}]"
