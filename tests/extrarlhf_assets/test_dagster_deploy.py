"""The deployment kit on a real server (issue 16, DESIGN 12.1): a throwaway PostgreSQL holds the
Dagster instance configured by deploy/dagster.yaml (copied verbatim into DAGSTER_HOME), the
real ``dagster-daemon`` and ``dagster-webserver`` run against it, and production partitions are
submitted over GraphQL as an operator would. Every run succeeds, the run queue's tag limits
hold (at most two production runs at once, never two runs of one partition) and the
``production_db`` pool lets no two pooled steps overlap across runs."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import dagster as dg
import pytest

from extrarlhf.production import gate
from extrarlhf.production.fixture import build_fixture

from tests.dagster_helpers import (BIN, FINISHED, ROOT, RUNS, assert_one_at_a_time, dagster_services, graphql,
                                   instance_env, intervals, launch, max_overlap, step_events, tcp_postgres)

SALT = "deploy-test-salt-Xq7Vd2kw9PzL0bMf4RtY8nJc6HsA1eGuT5oW"
DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]
POOLED = {"production_v5_export", "returnclock_export", "production_v5_export_no_raw_identifiers",
          "timestamp_dataset_no_raw_identifiers", "returnclock_export_no_raw_identifiers",
          "returnclock_training_split_no_raw_identifiers"}


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


@pytest.fixture(scope="module")
def deployment_postgres():
    with tcp_postgres() as server:
        yield server


@pytest.fixture(scope="module")
def deployment(deployment_postgres, tmp_path_factory):
    server = deployment_postgres
    tmp = tmp_path_factory.mktemp("deploy")
    server.psql("postgres", 'CREATE DATABASE "dagster"')
    production_dsn = server.create_database("prod_deploy")
    build_fixture(production_dsn, battles=60, players=24, days=3, seed=5, sessions_per_player=6)
    home = tmp / "dagster_home"
    home.mkdir()
    shutil.copyfile(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    env = {**instance_env(home, server),
           "RLHF_SESSIONS_DIR": str(tmp / "sessions"), "RLHF_DATASETS_DIR": str(tmp / "datasets"),
           "RLHF_CHECKPOINTS_DIR": str(tmp / "checkpoints"),
           gate.ENABLE_VAR: "1", gate.DSN_VAR: production_dsn, gate.SALT_VAR: SALT, gate.KEY_ID_VAR: "rc-deploy"}
    # the pool's slots are set once at deploy time, as docs/dagster.md says: left to default_limit, two
    # run workers that initialize the pool at the same moment can each allocate a slot (Dagster
    # counts the slots, then inserts the missing ones)
    subprocess.run([str(BIN / "dagster"), "instance", "concurrency", "set", "production_db", "1"], cwd=ROOT, env=env,
                   check=True, capture_output=True, timeout=120)
    with dagster_services(env, tmp) as services:
        yield {"url": services.url, "tmp": tmp, "env": env, "server": server, "dsn": production_dsn}


def test_postgres_instance_queue_and_pool_limits_hold(deployment):
    url, server = deployment["url"], deployment["server"]
    # Three days plus a second run of the first day, all submitted at once.
    run_ids = [launch(url, "production_daily", partition=day) for day in [*DAYS, DAYS[0]]]
    deadline = time.time() + 150
    while True:
        runs = {r["runId"]: r for r in graphql(url, RUNS)["runsOrError"]["results"]}
        statuses = {rid: runs[rid]["status"] for rid in run_ids}
        if all(s in FINISHED for s in statuses.values()):
            break
        assert time.time() < deadline, f"runs did not finish: {statuses}"
        time.sleep(1)
    assert set(statuses.values()) == {"SUCCESS"}, (statuses, (deployment["tmp"] / "daemon.log").read_text()[-4000:])

    events = step_events(server, run_ids)
    kinds = {e["kind"] for e in events}
    assert {"RUN_ENQUEUED", "RUN_STARTING", "RUN_START", "STEP_START"} <= kinds  # went through the queue
    by_run = {e["run"]: [] for e in events}
    for e in events:
        by_run[e["run"]].append(e)

    # run queue: at most two production runs at once (the queue also holds back a run whose first
    # steps wait for a full pool, so with the pool's slot taken the runs may well go one by one)
    runs_spans = intervals(events, "RUN_START", ("RUN_SUCCESS", "RUN_FAILURE"),
                            lambda e: e["run"] if e["step"] is None else None)
    assert len(runs_spans) == 4 and max_overlap(runs_spans) <= 2
    # one partition at a time: the two runs of the first day never overlap
    first_day = [s for s in runs_spans if s[2] in (run_ids[0], run_ids[3])]
    assert max_overlap(first_day) == 1

    # pool production_db (default_limit 1): no two pooled steps overlap, across all runs
    pooled = intervals(events, "STEP_START", ("STEP_SUCCESS", "STEP_FAILURE"),
                        lambda e: (e["run"], e["step"]) if e["step"] in POOLED else None)
    exports = [k for _, _, k in pooled if k[1] in ("production_v5_export", "returnclock_export")]
    assert len(exports) == 8 and len(pooled) > 8
    assert_one_at_a_time(pooled, "pooled steps")
    # the steps claimed slots of the instance's pool (created at the default limit of 1)
    limits = dict(line.split("|") for line in server.psql(
        "dagster", 'SELECT concurrency_key, "limit" FROM concurrency_limits').strip().splitlines())
    assert limits.get("production_db") == "1", limits

    # every run exported its day; the second run of the first day found an identical export and
    # reused its version instead of publishing a copy (issue 29, finding 6)
    datasets = deployment["tmp"] / "datasets"
    assert sorted(p.name for p in (datasets / f"production-v5-{DAYS[0]}").iterdir() if p.name.startswith("v")) == \
        ["v1"]
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
