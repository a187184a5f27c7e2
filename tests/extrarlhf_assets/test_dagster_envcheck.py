"""A daemon whose environment lacks what the webserver's code location has (issue 52 item 2;
extrarlhf_assets/envcheck.py), on real processes: a throwaway PostgreSQL, deploy/dagster.yaml
verbatim, ``dagster-webserver`` with the production gate's four variables and ``dagster-daemon``
without them (workspace.yaml: each loads the code location in its own environment).

Before the check the daemon launched the webserver's ``production_daily`` run into a code location
without that job: the worker failed with "Could not load job definition" and the run was marked
for a retry that never came. Now the launcher fails it before starting any process, naming the
missing variables (never a value) and the fix, and no retry is planned or made."""

import secrets
import time

import dagster as dg
import pytest

from extrarlhf.production.gate import DSN_VAR, ENABLE_VAR, KEY_ID_VAR, SALT_VAR
from extrarlhf_assets.envcheck import ENV_TAG, env_names, missing_names
from tests.dagster_helpers import ROOT, dagster_services, instance_env, launch, tcp_postgres, wait_for


def test_the_fingerprint_is_names_only_and_missing_names_keep_their_order():
    env = {ENABLE_VAR: "1", DSN_VAR: "postgresql://u:pw@db.example/prod", SALT_VAR: "", "RLHF_SESSIONS_DIR": "/s",
           "UNRELATED": "x"}
    assert env_names(env) == f"{ENABLE_VAR},{DSN_VAR},RLHF_SESSIONS_DIR"
    assert "pw" not in env_names(env) and "UNRELATED" not in env_names(env)
    assert missing_names(env_names(env), "RLHF_SESSIONS_DIR") == [ENABLE_VAR, DSN_VAR]
    assert missing_names(env_names(env), env_names(env)) == []
    assert missing_names(None, "") == []  # a run created before the check: nothing to compare


def test_a_daemon_without_the_gate_fails_the_webservers_production_run_naming_the_variables(tmp_path):
    secret_dsn = f"postgresql://reader:{secrets.token_hex(8)}@127.0.0.1:1/prod"
    salt = secrets.token_hex(32)
    gate = {ENABLE_VAR: "1", DSN_VAR: secret_dsn, SALT_VAR: salt, KEY_ID_VAR: "key-test"}
    with tcp_postgres() as server, pytest.MonkeyPatch.context() as mp:
        home = tmp_path / "dagster_home"
        home.mkdir()
        (home / "dagster.yaml").write_text((ROOT / "deploy" / "dagster.yaml").read_text())
        server.psql("postgres", 'CREATE DATABASE "dagster_env"')
        daemon_env = {**instance_env(home, server, "dagster_env"), "RLHF_DATASETS_DIR": str(tmp_path / "datasets")}
        for name in gate:
            daemon_env.pop(name, None)
        for key in [k for k in daemon_env if k.startswith("DAGSTER_")]:
            mp.setenv(key, daemon_env[key])
        with dg.DagsterInstance.from_config(str(home)) as instance, \
                dagster_services({**daemon_env, **gate}, tmp_path, daemon_env=daemon_env) as services:
            run_id = launch(services.url, "production_daily", partition="2026-01-02")
            recorded = instance.get_run_by_id(run_id).tags[ENV_TAG].split(",")  # by the webserver's code location
            assert set(gate) | {"RLHF_DATASETS_DIR"} <= set(recorded)
            wait_for("the run failed by the daemon's launcher",
                     lambda: instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE, 180,
                     lambda: (tmp_path / "daemon.log").read_text()[-3000:])
            [failure] = [e.message for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)]
            assert "its job 'production_daily' is not in the code location 'extrarlhf'" in failure, failure
            assert f"Missing there: {ENABLE_VAR}, {DSN_VAR}, {SALT_VAR}, {KEY_ID_VAR}." in failure, failure
            assert "Set the same variables in the environment of the daemon" in failure
            # nothing was started: no worker, no "Could not load job definition"
            messages = [e.message or "" for e in instance.all_logs(run_id)]
            assert not any(m.startswith(("Started process", "Could not load")) for m in messages), messages
            time.sleep(5)  # the event log consumer (run retries) has had its turn
            run = instance.get_run_by_id(run_id)
            assert run.tags["dagster/will_retry"] == "false"
            assert instance.get_run_ids(dg.RunsFilter(tags={"dagster/parent_run_id": run_id})) == []
            everything = "\n".join(messages) + (tmp_path / "daemon.log").read_text() + str(run.tags)
            assert secret_dsn not in everything and salt not in everything
