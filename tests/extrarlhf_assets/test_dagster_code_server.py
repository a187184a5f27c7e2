"""The deployed code location for real (issue 29, DESIGN 12.2): the project's definitions served by
``dagster code-server start`` (the project image's default command) on a free port, and
``dagster-webserver`` and ``dagster-daemon`` loading them through ``deploy/workspace.grpc.yaml``,
not by importing the module. Over GraphQL the location loads with the jobs, sensors and assets the
module defines, the image's health check command answers, and a ``production_daily`` run
submitted to the webserver is dequeued by the daemon, launched through the code server and
succeeds (the production gate is off, so the run skips its assets quickly)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from extrarlhf.production import gate
from tests.dagster_helpers import graphql, grpc_health, stop_group
from tests.servers import free_port, wait_http

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LOCATION = """{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message }
    ... on RepositoryLocation { repositories { name jobs { name } sensors { name }
      assetNodes { assetKey { path } } } } } } } } }"""
LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  ... on RunConfigValidationInvalid { errors { message } } } }"""
RUN = """query($id: ID!) { runOrError(runId: $id) { ... on Run { status
  stepStats { stepKey status } } } }"""


@pytest.fixture(scope="module")
def grpc_deployment(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grpc")
    home = tmp / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    grpc_port, web_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in gate.VARIABLES}
    # production opted in (its group is in the code location only then), the rest of the gate off
    env.update({gate.ENABLE_VAR: "1", "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT),
                "DAGSTER_CODE_SERVER_HOST": "127.0.0.1", "DAGSTER_CODE_SERVER_PORT": str(grpc_port),
                "RLHF_SESSIONS_DIR": str(tmp / "sessions"), "RLHF_DATASETS_DIR": str(tmp / "datasets"),
                "RLHF_CHECKPOINTS_DIR": str(tmp / "checkpoints")})
    logs = {name: open(tmp / f"{name}.log", "w") for name in ("code_server", "webserver", "daemon")}
    procs: list[subprocess.Popen] = []
    try:
        # the code server runs where the code is (here: the checkout); the webserver only talks to it
        procs.append(subprocess.Popen(
            [str(BIN / "dagster"), "code-server", "start", "-h", "127.0.0.1", "-p", str(grpc_port),
             "-m", "extrarlhf_assets.definitions", "--location-name", "extrarlhf"],
            cwd=ROOT, env=env, stdout=logs["code_server"], stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.time() + 120
        while grpc_health(grpc_port, env) != 0:
            assert procs[0].poll() is None, (tmp / "code_server.log").read_text()[-3000:]
            assert time.time() < deadline, "the code server did not become healthy"
            time.sleep(1)
        procs.append(subprocess.Popen(
            [str(BIN / "dagster-webserver"), "-w", str(ROOT / "deploy" / "workspace.grpc.yaml"),
             "-h", "127.0.0.1", "-p", str(web_port)],
            cwd=tmp, env=env, stdout=logs["webserver"], stderr=subprocess.STDOUT, start_new_session=True))
        # the run queue (Dagster's default coordinator) is served by the daemon, through the same workspace
        procs.append(subprocess.Popen(
            [str(BIN / "dagster-daemon"), "run", "-w", str(ROOT / "deploy" / "workspace.grpc.yaml")],
            cwd=tmp, env=env, stdout=logs["daemon"], stderr=subprocess.STDOUT, start_new_session=True))
        url = f"http://127.0.0.1:{web_port}"
        wait_http(url + "/server_info", procs[1:], "the webserver",
                  lambda: (tmp / "webserver.log").read_text()[-3000:], timeout=deadline + 60 - time.time())
        yield {"url": url, "tmp": tmp, "grpc_port": grpc_port, "env": env}
    finally:
        for proc in reversed(procs):
            stop_group(proc)
        for f in logs.values():
            f.close()


def test_the_webserver_loads_the_location_from_the_code_server(grpc_deployment):
    import dagster as dg

    from extrarlhf_assets.definitions import defs
    from extrarlhf_assets.defs.production import with_production

    entries = graphql(grpc_deployment["url"], LOCATION)["workspaceOrError"]["locationEntries"]
    assert [e["name"] for e in entries] == ["extrarlhf"]
    location = entries[0]["locationOrLoadError"]
    assert location["__typename"] == "RepositoryLocation", location
    (repo,) = location["repositories"]
    expected = with_production(defs).get_repository_def()  # the server's environment opts production in
    assert {j["name"] for j in repo["jobs"]} == {j.name for j in expected.get_all_jobs()}
    assert {"campaign_loop", "production_daily"} <= {j["name"] for j in repo["jobs"]}
    assert {s["name"] for s in repo["sensors"]} == {s.name for s in expected.sensor_defs}
    assert "session_groups_sensor" in {s["name"] for s in repo["sensors"]}
    served = {dg.AssetKey(a["assetKey"]["path"]) for a in repo["assetNodes"]}
    assert served == set(expected.asset_graph.get_all_asset_keys()) and len(served) >= 10
    # the image's HEALTHCHECK command against the same server
    assert grpc_health(grpc_deployment["grpc_port"], grpc_deployment["env"]) == 0


def test_a_run_launched_through_the_grpc_location_succeeds(grpc_deployment):
    url = grpc_deployment["url"]
    params = {"selector": {"repositoryLocationName": "extrarlhf", "repositoryName": "__repository__",
                           "jobName": "production_daily"},
              "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "2026-01-02"}]},
              "runConfigData": {}}
    out = graphql(url, LAUNCH, {"params": params})["launchRun"]
    assert out["__typename"] == "LaunchRunSuccess", out
    run_id = out["run"]["runId"]
    deadline = time.time() + 180
    while True:
        run = graphql(url, RUN, {"id": run_id})["runOrError"]
        if run["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        assert time.time() < deadline, f"the run did not finish: {run['status']}"
        time.sleep(1)
    tmp = grpc_deployment["tmp"]
    assert run["status"] == "SUCCESS", [(tmp / f"{n}.log").read_text()[-3000:] for n in ("daemon", "code_server")]
    steps = {s["stepKey"]: s["status"] for s in run["stepStats"]}
    assert "production_v5_export" in steps and set(steps.values()) <= {"SUCCESS", "SKIPPED"}
    # gate off: nothing was written to the datasets folder
    datasets = grpc_deployment["tmp"] / "datasets"
    assert not datasets.exists() or not any(p.name.startswith("production-") for p in datasets.iterdir())
