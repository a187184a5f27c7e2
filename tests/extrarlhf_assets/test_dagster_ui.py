"""``dagster dev -w workspace.yaml`` really serves the code location: GraphQL lists the assets,
and headless Chromium screenshots the asset graph (skipped with a reason when Chromium is missing).
What an operator meets in the UI is asked of the same server: the automation sensor runs, the
nightly campaign's preview adds no partition and its first tick under the real daemon requests
nothing (it starts with the next night), partitioned checks cannot be launched without a
partition, descriptions render their paths, and the charts show on the asset pages without a
click (Chromium's DOM holds them as images; screenshots kept in RLHF_SCREENSHOT_DIR)."""

import datetime
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from extrarlhf_assets.defs.collection.nightly import latest_night
from tests.dagster_helpers import graphql, loop_config, resources, run_loop, stop_group, wait_for
from tests.extrarlhf_assets.test_dagster_deploy import _chromium, _screenshot
from tests.servers import free_port, wait_http

ROOT = Path(__file__).resolve().parents[2]
ASSETS = {"battle_sessions", "v5_dataset", "nemesis_lite_split", "v5_policy_checkpoint", "policy_benchmark",
          "promoted_policy"}
QUERY = """{
  workspaceOrError { __typename ... on Workspace { locationEntries { name loadStatus
    locationOrLoadError { __typename ... on PythonError { message } } } } }
  assetNodes { assetKey { path } groupName }
}"""


def _loaded(url: str) -> dict:
    deadline = time.monotonic() + 120
    while True:  # the code location loads in a subprocess after the server starts
        data = graphql(url, QUERY)
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
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT),
           "RLHF_SESSIONS_DIR": str(tmp_path / "sessions"), "RLHF_DATASETS_DIR": str(tmp_path / "datasets"),
           "RLHF_CHECKPOINTS_DIR": str(tmp_path / "checkpoints")}
    log = open(tmp_path / "dagster_dev.log", "w")
    proc = subprocess.Popen([str(Path(sys.executable).with_name("dagster")), "dev", "-w", "workspace.yaml",
                             "-h", "127.0.0.1", "-p", str(port)], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/server_info", [proc], "dagster dev",
                  lambda: (tmp_path / "dagster_dev.log").read_text()[-4000:], timeout=180, every=1)
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

    shot = _screenshot(url + "/asset-groups", "dagster_asset_graph.png", tmp_path)
    if shot is None:
        pytest.skip("no Chromium found (chromium, chromium-headless-shell): the GraphQL part passed; install the "
                    "Debian package 'chromium' (make installs it) for the asset-graph screenshot")
    assert shot.exists() and shot.stat().st_size > 10_000


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
NIGHTLY = 'repositoryLocationName: "extrarlhf", repositoryName: "__repository__", sensorName: "nightly_campaign"'
START = f"""mutation {{ startSensor(sensorSelector: {{{NIGHTLY}}}) {{ __typename }} }}"""
RESET = f"""mutation {{ resetSensor(sensorSelector: {{{NIGHTLY}}}) {{ __typename }} }}"""
SENSOR = f"""{{ sensorOrError(sensorSelector: {{{NIGHTLY}}}) {{ ... on Sensor {{ description
  sensorState {{ status ticks(limit: 5) {{ status timestamp skipReason cursor runIds }} }} }} }} }}"""


def _nightly(url: str) -> dict:
    return graphql(url, SENSOR)["sensorOrError"]


def test_what_an_operator_meets(dagster_dev):
    url, _home = dagster_dev
    _loaded(url)
    data = graphql(url, OPERATOR)
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

    # 3. the nightly campaign says on its page why it is a sensor; previewing it ("Test sensor")
    #    shows the answer of a first tick and adds no partition
    assert sensors["nightly_campaign"] == "STOPPED"
    assert "rather than a cron schedule" in _nightly(url)["description"]
    tick = graphql(url, DRY_RUN)["sensorDryRun"]
    assert tick["__typename"] == "DryRunInstigationTick", tick
    result = tick["evaluationResult"]
    assert result["error"] is None and not result["runRequests"] and not result["dynamicPartitionsRequests"]
    assert "the first campaign is nightly-" in result["skipReason"]
    # turned on (as in the UI), the real daemon's first tick requests nothing: it records the
    # night that has passed in the cursor and names the next one
    assert graphql(url, START)["startSensor"]["__typename"] == "Sensor"
    try:
        [first] = wait_for("the nightly campaign's first tick", lambda: [
            t for t in _nightly(url)["sensorState"]["ticks"] if t["status"] != "STARTED"], timeout=90)
    finally:
        graphql(url, RESET)  # back to the state in code: stopped
    night = latest_night(datetime.datetime.fromtimestamp(first["timestamp"], datetime.timezone.utc)).strftime("%Y-%m-%d")
    assert first["status"] == "SKIPPED" and first["cursor"] == night, first
    assert "RLHF_NIGHTLY_CATCH_UP=1" in first["skipReason"] and not first["runIds"]
    keys = graphql(url, PARTITIONS)["assetNodes"][0]["partitionKeys"]
    assert not [k for k in keys if k.startswith("nightly-")]


# the charts each asset page shows in place, by the image's alt text
CHARTS = {"policy_ladder": ["Cumulative Elo per promotion (95% CI)", "Elo vs baseline:greedy per promotion (95% CI)"],
          "v5_policy_checkpoint": ["Loss per epoch", "Top-1 per epoch"], "v5_dataset": ["Rows per table"]}


def _dom(url: str, tmp: Path) -> str:
    out = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          f"--user-data-dir={tmp / 'chromium'}", "--dump-dom", "--window-size=1600,1000",
                          "--virtual-time-budget=15000", url], capture_output=True, text=True, timeout=120)
    return out.stdout


def test_charts_show_on_the_asset_pages_without_a_click(dagster_dev, tmp_path):
    """A campaign with a promotion, run on the server's own home: each asset's Overview holds its
    charts as images (not "[Show Markdown]" links) and the ladder's narrow table in place, the
    full ladder one click away."""
    url, home = dagster_dev
    _loaded(url)
    config = loop_config(30)
    config["ops"]["policy_ladder"] = {"config": {"pairs": 10}}
    instance = dg.DagsterInstance.from_config(str(home))
    result = run_loop(instance, "charts", resources(home.parent), config)
    assert result.success
    if _chromium() is None:
        pytest.skip("no Chromium found: the charts were made; install the Debian package 'chromium' to check them")
    promoted = json.loads((home.parent / "checkpoints" / "promoted.json").read_text())["name"]
    for asset, alts in CHARTS.items():
        dom = _dom(f"{url}/assets/{asset}", tmp_path)
        images = {alt.group(1) for tag in re.findall(r"<img [^>]*>", dom) if 'src="data:image/svg+xml,' in tag
                  for alt in [re.search(r'alt="([^"]*)"', tag)] if alt}
        assert set(alts) <= images, (asset, images, re.findall(r"<img [^>]{0,200}", dom))
        if asset != "v5_dataset":  # pictures of the two pages with the most to see (each Chromium run costs)
            shot = _screenshot(f"{url}/assets/{asset}", f"dagster_{asset}_overview.png", tmp_path)
            assert shot.stat().st_size > 10_000
        if asset == "policy_ladder":  # the narrow table in place, every column behind the click
            assert f"{promoted} (current)</td>" in dom and "[Show Markdown]" in dom
