"""``dagster dev -w workspace.yaml`` really serves the code location: GraphQL lists the assets,
and headless Chromium screenshots the asset graph (skipped with a reason when Chromium is missing).
What an operator meets in the UI is asked of the same server: the automation sensor runs, a
schedule preview adds no partition, partitioned checks cannot be launched without a partition,
descriptions render their paths."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.dagster_helpers import stop_group

ROOT = Path(__file__).resolve().parents[2]
ASSETS = {"battle_sessions", "v5_dataset", "nemesis_lite_split", "nemesis_standard_split", "v5_policy_checkpoint",
          "policy_benchmark", "promoted_policy"}
QUERY = """{
  workspaceOrError { __typename ... on Workspace { locationEntries { name loadStatus
    locationOrLoadError { __typename ... on PythonError { message } } } } }
  assetNodes { assetKey { path } groupName }
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "chromium-headless-shell", "google-chrome"):
        found = shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)
        if found:
            return found
    return None


def _graphql(url: str, query: str = QUERY, variables: dict | None = None) -> dict:
    req = urllib.request.Request(url + "/graphql", data=json.dumps({"query": query, "variables": variables or {}}
                                                                   ).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        body = json.loads(resp.read())
    assert "errors" not in body, body["errors"]
    return body["data"]


def _loaded(url: str) -> dict:
    deadline = time.monotonic() + 120
    while True:  # the code location loads in a subprocess after the server starts
        data = _graphql(url)
        entries = data["workspaceOrError"]["locationEntries"]
        if entries and entries[0]["loadStatus"] == "LOADED" and data["assetNodes"]:
            return data
        assert time.monotonic() < deadline, data
        time.sleep(1)


@pytest.fixture(scope="module")
def dagster_dev(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("ui")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT),
           "RLHF_SESSIONS_DIR": str(tmp_path / "sessions"), "RLHF_DATASETS_DIR": str(tmp_path / "datasets"),
           "RLHF_CHECKPOINTS_DIR": str(tmp_path / "checkpoints")}
    log = open(tmp_path / "dagster_dev.log", "w")
    proc = subprocess.Popen([str(Path(sys.executable).with_name("dagster")), "dev", "-w", "workspace.yaml",
                             "-h", "127.0.0.1", "-p", str(port)], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(url + "/server_info", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("dagster dev did not come up:\n" + (tmp_path / "dagster_dev.log").read_text()[-4000:])
            time.sleep(1)
        yield url, home
    finally:
        stop_group(proc)
        log.close()


def test_ui_serves_the_asset_graph(dagster_dev, tmp_path):
    url, _home = dagster_dev
    data = _loaded(url)
    entry = data["workspaceOrError"]["locationEntries"][0]
    assert entry["name"] == "extrarlhf" and entry["loadStatus"] == "LOADED"
    assert entry["locationOrLoadError"]["__typename"] == "RepositoryLocation", entry
    nodes = {"/".join(n["assetKey"]["path"]): n["groupName"] for n in data["assetNodes"]}
    assert ASSETS <= set(nodes)
    assert nodes["battle_sessions"] == "collection" and nodes["policy_benchmark"] == "training"

    chromium = _chromium()
    if chromium is None:
        pytest.skip("no Chromium found (chromium, chromium-headless-shell): the GraphQL part passed; install the "
                    "Debian package 'chromium' (make installs it) for the asset-graph screenshot")
    shot = tmp_path / "dagster_asset_graph.png"
    out = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          f"--user-data-dir={tmp_path / 'chromium'}", f"--screenshot={shot}", "--window-size=1400,900",
                          "--virtual-time-budget=15000", url + "/asset-groups"],
                         capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 10_000, out.stderr[-2000:]
    keep = os.environ.get("RLHF_SCREENSHOT_DIR")  # e.g. to attach the picture to a CI run
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)


OPERATOR = """{
  assetNodes { assetKey { path } description partitionDefinition { name }
    assetChecksOrError { ... on AssetChecks { checks { name canExecuteIndividually blocking } } } }
  sensorsOrError(repositorySelector: {repositoryLocationName: "extrarlhf", repositoryName: "__repository__"}) {
    ... on Sensors { results { name sensorState { status } } } }
}"""
DRY_RUN = """mutation {
  sensorDryRun(selectorData: {repositoryLocationName: "extrarlhf", repositoryName: "__repository__",
                              sensorName: "nightly_campaign"}, cursor: "") {
    __typename
    ... on DryRunInstigationTick { evaluationResult { skipReason runRequests { runKey }
      dynamicPartitionsRequests { partitionKeys } error { message } } }
    ... on PythonError { message }
  }
}"""
PARTITIONS = """{ assetNodes(assetKeys: [{path: ["battle_sessions"]}]) { partitionKeys } }"""


def test_what_an_operator_meets(dagster_dev):
    url, _home = dagster_dev
    _loaded(url)
    data = _graphql(url, OPERATOR)
    sensors = {s["name"]: s["sensorState"]["status"] for s in data["sensorsOrError"]["results"]}
    # 1. automation runs out of the box, so a recorded group gets its dataset without a click
    assert sensors["automation_sensor"] == "RUNNING" and sensors["session_groups_sensor"] == "RUNNING"

    nodes = {"/".join(n["assetKey"]["path"]): n for n in data["assetNodes"]}
    # 6. checks of a partitioned asset are evaluated in its partition's step: "Execute all" is
    #    not offered on its own (no unpartitioned run whose checks cannot know their group)
    for asset in ("battle_sessions", "v5_dataset", "nemesis_lite_split", "policy_benchmark"):
        checks = nodes[asset]["assetChecksOrError"]["checks"]
        assert checks and nodes[asset]["partitionDefinition"] is not None
        assert {c["canExecuteIndividually"] for c in checks} == {"REQUIRES_MATERIALIZATION"}, (asset, checks)
    # 13. the promoted pointer is one for the registry: not partitioned
    assert nodes["promoted_policy"]["partitionDefinition"] is None
    # 7. paths in descriptions are code spans (rendered literally, `<group>` included)
    assert "`datasets/<group>/vN`" in nodes["v5_dataset"]["description"]

    # 3. previewing the nightly campaign ("Test sensor") shows its request and adds no partition
    assert sensors["nightly_campaign"] == "STOPPED"
    tick = _graphql(url, DRY_RUN)["sensorDryRun"]
    assert tick["__typename"] == "DryRunInstigationTick", tick
    result = tick["evaluationResult"]
    [request] = result["runRequests"]
    assert result["error"] is None and request["runKey"].startswith("nightly-")
    assert result["dynamicPartitionsRequests"][0]["partitionKeys"] == [request["runKey"]]
    keys = _graphql(url, PARTITIONS)["assetNodes"][0]["partitionKeys"]
    assert not [k for k in keys if k.startswith("nightly-")]
