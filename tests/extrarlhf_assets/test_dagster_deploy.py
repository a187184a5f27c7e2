"""The deployment kit on a real server (issue 16, DESIGN 12.1): a throwaway PostgreSQL holds the
Dagster instance configured by deploy/dagster.yaml (copied verbatim into DAGSTER_HOME), the
real ``dagster-daemon`` and ``dagster-webserver`` run against it, and production partitions are
submitted over GraphQL as an operator would. Every run succeeds, the run queue's tag limits
hold (at most two production runs at once, never two runs of one partition) and the
``production_db`` pool lets no two pooled steps overlap across runs."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import dagster as dg
import pytest

from extrarlhf.production import gate, localdb
from extrarlhf.production.fixture import build_fixture

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SALT = "deploy-test-salt-0123456789abcdef-0123456789"
DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]
POOLED = {"production_v5_export", "returnclock_export", "production_v5_export_no_raw_identifiers",
          "timestamp_dataset_no_raw_identifiers", "returnclock_export_no_raw_identifiers",
          "returnclock_training_split_no_raw_identifiers"}
LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId status } } ... on PythonError { message }
  ... on RunConfigValidationInvalid { errors { message } } ... on InvalidSubsetError { message } } }"""
RUNS = """{ runsOrError { ... on Runs { results { runId status tags { key value } } } } }"""


def _chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-headless-shell") if shutil.which(n)), None)


def _screenshot(url: str, name: str, tmp: Path) -> Path | None:
    """A headless-Chromium picture of a UI page, kept in RLHF_SCREENSHOT_DIR when set; None without Chromium."""
    chromium = _chromium()
    if chromium is None:
        return None
    shot = tmp / name
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    f"--user-data-dir={tmp / 'chromium'}", f"--screenshot={shot}", "--window-size=1600,1000",
                    "--virtual-time-budget=12000", url], capture_output=True, text=True, timeout=120)
    keep = os.environ.get("RLHF_SCREENSHOT_DIR")
    if keep and shot.exists():
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / name)
    return shot


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(url: str, query: str, variables: dict | None = None) -> dict:
    req = urllib.request.Request(url + "/graphql", data=json.dumps({"query": query, "variables": variables or {}}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        body = json.loads(resp.read())
    assert "errors" not in body, body
    return body["data"]


@pytest.fixture(scope="module")
def tcp_postgres():
    """The throwaway server, listening on 127.0.0.1 too (Dagster's storage connects over TCP)."""
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


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.time() + 20
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def deployment(tcp_postgres, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("deploy")
    tcp_postgres.psql("postgres", 'CREATE DATABASE "dagster"')
    production_dsn = tcp_postgres.create_database("prod_deploy")
    build_fixture(production_dsn, battles=60, players=24, days=3, seed=5, sessions_per_player=6)
    home = tmp / "dagster_home"
    home.mkdir()
    shutil.copyfile(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT),
           "DAGSTER_PG_USERNAME": "postgres", "DAGSTER_PG_PASSWORD": "unused-with-trust-auth",
           "DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(tcp_postgres.port), "DAGSTER_PG_DB": "dagster",
           "RLHF_SESSIONS_DIR": str(tmp / "sessions"), "RLHF_DATASETS_DIR": str(tmp / "datasets"),
           "RLHF_CHECKPOINTS_DIR": str(tmp / "checkpoints"),
           gate.ENABLE_VAR: "1", gate.DSN_VAR: production_dsn, gate.SALT_VAR: SALT, gate.KEY_ID_VAR: "rc-deploy"}
    # the pool's slots are set once at deploy time, as docs/dagster.md says: left to default_limit, two
    # run workers that initialize the pool at the same moment can each allocate a slot (Dagster
    # counts the slots, then inserts the missing ones)
    subprocess.run([str(BIN / "dagster"), "instance", "concurrency", "set", "production_db", "1"], cwd=ROOT, env=env,
                   check=True, capture_output=True, timeout=120)
    logs = {name: open(tmp / f"{name}.log", "w") for name in ("daemon", "webserver")}
    procs = []
    try:
        procs.append(subprocess.Popen([str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"], cwd=ROOT, env=env,
                                      stdout=logs["daemon"], stderr=subprocess.STDOUT, start_new_session=True))
        procs.append(subprocess.Popen([str(BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1",
                                       "-p", str(port)], cwd=ROOT, env=env, stdout=logs["webserver"],
                                      stderr=subprocess.STDOUT, start_new_session=True))
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while True:
            assert all(p.poll() is None for p in procs), (tmp / "webserver.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(url + "/server_info", timeout=5):
                    break
            except OSError:
                assert time.time() < deadline, "the webserver did not come up"
                time.sleep(0.5)
        yield {"url": url, "tmp": tmp, "env": env, "server": tcp_postgres, "dsn": production_dsn}
    finally:
        _stop(procs)
        for f in logs.values():
            f.close()


def _launch(url: str, day: str) -> str:
    params = {"selector": {"repositoryLocationName": "extrarlhf", "repositoryName": "__repository__",
                           "jobName": "production_daily"},
              "executionMetadata": {"tags": [{"key": "dagster/partition", "value": day}]},
              "runConfigData": {}}
    out = _graphql(url, LAUNCH, {"params": params})["launchRun"]
    assert out["__typename"] == "LaunchRunSuccess", out
    return out["run"]["runId"]


def _events(server, run_ids: list[str]) -> list[dict]:
    """Step start/end and run start/end events straight from the Postgres event log."""
    ids = ",".join(f"'{r}'" for r in run_ids)
    kinds = {dg.DagsterEventType[k].value: k for k in ("STEP_START", "STEP_SUCCESS", "STEP_FAILURE", "RUN_START",
                                                       "RUN_SUCCESS", "RUN_FAILURE", "RUN_ENQUEUED", "RUN_STARTING")}
    listed = ",".join(f"'{k}'" for k in kinds)
    rows = server.psql("dagster", f"SELECT run_id, step_key, dagster_event_type, timestamp FROM event_logs "
                                  f"WHERE run_id IN ({ids}) AND dagster_event_type IN ({listed}) ORDER BY id")
    out = []
    for line in rows.strip().splitlines():
        run_id, step, kind, ts = line.split("|")
        out.append({"run": run_id, "step": step or None, "kind": kinds[kind],
                    "t": datetime.fromisoformat(ts).timestamp()})
    return out


def _intervals(events: list[dict], start: str, ends: tuple[str, ...], key) -> list[tuple[float, float, str]]:
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


def _max_overlap(spans: list[tuple[float, float, str]]) -> int:
    points = sorted([(s, 1) for s, _, _ in spans] + [(e, -1) for _, e, _ in spans], key=lambda p: (p[0], p[1]))
    level = best = 0
    for _, delta in points:
        level += delta
        best = max(best, level)
    return best


def test_postgres_instance_queue_and_pool_limits_hold(deployment):
    url, server = deployment["url"], deployment["server"]
    # Three days plus a second run of the first day, all submitted at once.
    run_ids = [_launch(url, day) for day in [*DAYS, DAYS[0]]]
    deadline = time.time() + 150
    while True:
        runs = {r["runId"]: r for r in _graphql(url, RUNS)["runsOrError"]["results"]}
        statuses = {rid: runs[rid]["status"] for rid in run_ids}
        if all(s in ("SUCCESS", "FAILURE", "CANCELED") for s in statuses.values()):
            break
        assert time.time() < deadline, f"runs did not finish: {statuses}"
        time.sleep(1)
    assert set(statuses.values()) == {"SUCCESS"}, (statuses, (deployment["tmp"] / "daemon.log").read_text()[-4000:])

    events = _events(server, run_ids)
    kinds = {e["kind"] for e in events}
    assert {"RUN_ENQUEUED", "RUN_STARTING", "RUN_START", "STEP_START"} <= kinds  # went through the queue
    by_run = {e["run"]: [] for e in events}
    for e in events:
        by_run[e["run"]].append(e)

    # run queue: at most two production runs at once (the queue also holds back a run whose first
    # steps wait for a full pool, so with the pool's slot taken the runs may well go one by one)
    runs_spans = _intervals(events, "RUN_START", ("RUN_SUCCESS", "RUN_FAILURE"),
                            lambda e: e["run"] if e["step"] is None else None)
    assert len(runs_spans) == 4 and _max_overlap(runs_spans) <= 2
    # one partition at a time: the two runs of the first day never overlap
    first_day = [s for s in runs_spans if s[2] in (run_ids[0], run_ids[3])]
    assert _max_overlap(first_day) == 1

    # pool production_db (default_limit 1): no two pooled steps overlap, across all runs
    pooled = _intervals(events, "STEP_START", ("STEP_SUCCESS", "STEP_FAILURE"),
                        lambda e: (e["run"], e["step"]) if e["step"] in POOLED else None)
    exports = [k for _, _, k in pooled if k[1] in ("production_v5_export", "returnclock_export")]
    assert len(exports) == 8 and len(pooled) > 8
    ordered = sorted(pooled)
    for (s1, e1, k1), (s2, e2, k2) in zip(ordered, ordered[1:]):
        assert s2 >= e1, f"pooled steps overlap: {k1} [{s1}, {e1}] and {k2} [{s2}, {e2}]"
    # the steps claimed slots of the instance's pool (created at the default limit of 1)
    limits = dict(line.split("|") for line in server.psql(
        "dagster", 'SELECT concurrency_key, "limit" FROM concurrency_limits').strip().splitlines())
    assert limits.get("production_db") == "1", limits

    # every run exported its day: one published version per run of each export
    datasets = deployment["tmp"] / "datasets"
    assert sorted(p.name for p in (datasets / f"production-v5-{DAYS[0]}").iterdir() if p.name.startswith("v")) == \
        ["v1", "v2"]
    for day in DAYS[1:]:
        assert (datasets / f"returnclock-{day}" / "v1" / "manifest.json").exists()

    # pictures for operators: the production group's graph and the pool-limited runs (skipped without Chromium)
    for page, name in (("/locations/extrarlhf/asset-groups/production", "dagster_production_group.png"),
                       ("/runs", "dagster_production_runs.png"),
                       ("/deployment/concurrency/production_db", "dagster_production_db_pool.png")):
        shot = _screenshot(url + page, name, deployment["tmp"])
        assert shot is None or shot.stat().st_size > 10_000

    # no secret in the instance: the event log, run tags and configs never hold the DSN or the salt
    dump = server.psql("dagster", "SELECT string_agg(event, '') FROM event_logs") + \
        server.psql("dagster", "SELECT string_agg(run_body, '') FROM runs")
    assert SALT not in dump and deployment["dsn"] not in dump and "prod_deploy" not in dump


def test_directory_resources_are_env_vars_read_at_run_time(monkeypatch, tmp_path):
    from extrarlhf_assets.resources import default_resources

    monkeypatch.setenv("RLHF_DATASETS_DIR", str(tmp_path / "d"))
    monkeypatch.delenv("RLHF_SESSIONS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    res = default_resources()
    datasets = res["datasets"]._get_non_default_public_field_values()["datasets_dir"]
    assert isinstance(datasets, dg.EnvVar) and datasets.env_var_name == "RLHF_DATASETS_DIR"
    assert res["sessions"].sessions_dir == str(tmp_path / "sessions")  # unset: absolute default
    # the variable's value is taken when a run initializes the resource, not at import
    monkeypatch.setenv("RLHF_DATASETS_DIR", str(tmp_path / "later"))

    @dg.asset
    def where(datasets: dg.ConfigurableResource) -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={"path": str(datasets.path)})

    result = dg.materialize([where], resources={"datasets": res["datasets"]})
    mat = result.asset_materializations_for_node("where")[0]
    assert mat.metadata["path"].value == str(tmp_path / "later")
