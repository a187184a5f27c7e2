"""The run-failure sensor (issue 29, DESIGN 12.2) on a real failed run and a real HTTP server.

A ``battle_sessions`` run for a group that is not on disk fails; the sensor, evaluated on that
run's failure event, logs it and POSTs the alert to a local ``http.server`` webhook. A webhook
that answers an error, refuses the connection, does not answer in time or is not an http URL
costs one warning that names the variable, never the URL (which carries a token here), and the
sensor returns normally."""

import json
import threading
import time

import dagster as dg
import pytest

from extrarlhf_assets.defs.collection.assets import battle_sessions
from extrarlhf_assets.defs.operations import sensors
from extrarlhf_assets.defs.operations.sensors import UI_URL_VAR, WEBHOOK_VAR, run_failure_alert

from tests.dagster_helpers import resources, webhook_server
from tests.servers import free_port

TOKEN = "T0KEN-abc123-secret"


@pytest.fixture()
def webhook():
    with webhook_server(f"/hooks/alerts?token={TOKEN}") as hook:
        yield hook.url, hook


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory):
    """A real failed run: battle_sessions asked to record a group that is not on disk."""
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("session_groups", ["not-on-disk"])
    result = dg.materialize([battle_sessions], instance=instance, partition_key="not-on-disk",
                            resources=resources(tmp_path_factory.mktemp("alerts")), raise_on_error=False)
    assert not result.success
    return instance, result


def _evaluate(failed_run, capfd) -> str:
    """Run the sensor on the failed run's failure event; returns what it logged (Dagster's
    console handler writes to stderr)."""
    instance, result = failed_run
    context = dg.build_run_status_sensor_context(
        sensor_name="run_failure_alert", dagster_event=result.get_run_failure_event(), dagster_instance=instance,
        dagster_run=result.dagster_run).for_run_failure()
    capfd.readouterr()
    assert run_failure_alert(context) is None  # returns normally, requests nothing
    out, err = capfd.readouterr()
    return out + err


def test_a_failed_run_is_logged_and_posted(failed_run, webhook, monkeypatch, capfd):
    url, hook = webhook
    monkeypatch.setenv(WEBHOOK_VAR, url)
    monkeypatch.setenv(UI_URL_VAR, "http://dagster.example:3000/")
    run = failed_run[1].dagster_run
    logged = _evaluate(failed_run, capfd)
    [post] = hook.received
    assert post["path"] == f"/hooks/alerts?token={TOKEN}" and post["type"] == "application/json"
    alert = post["body"]
    assert alert["job"] == run.job_name and alert["run_id"] == run.run_id and alert["partition"] == "not-on-disk"
    assert alert["error"].startswith("battle_sessions: session group 'not-on-disk' is not on disk")
    assert "\n" not in alert["error"]
    assert alert["will_retry"] is False and alert["retry_run_id"] is None and alert["signal"] is None
    assert alert["url"] == f"http://dagster.example:3000/runs/{run.run_id}"
    assert set(alert) == {"job", "run_id", "partition", "error", "reason", "signal", "will_retry", "retry_run_id",
                          "url"}
    # the log line says the same, and neither it nor the payload carries the webhook's address
    assert f"run {run.run_id}, partition not-on-disk" in logged and "is not on disk" in logged
    assert TOKEN not in logged and TOKEN not in json.dumps(alert) and "hooks/alerts" not in logged


def test_without_a_webhook_the_failure_is_only_logged(failed_run, webhook, monkeypatch, capfd):
    _, hook = webhook
    monkeypatch.delenv(WEBHOOK_VAR, raising=False)
    monkeypatch.delenv(UI_URL_VAR, raising=False)
    logged = _evaluate(failed_run, capfd)
    assert hook.received == [] and "run failed: job" in logged and "not delivered" not in logged


@pytest.mark.parametrize("case", ["http_error", "refused", "timeout", "not_http"])
def test_an_undeliverable_alert_is_one_warning_without_the_url(case, failed_run, webhook, monkeypatch, capfd):
    url, hook = webhook
    if case == "http_error":
        hook.status = 500
    elif case == "refused":
        url = f"http://127.0.0.1:{free_port()}/hooks/alerts?token={TOKEN}"
    elif case == "timeout":
        hook.delay = 1.5
        monkeypatch.setattr(sensors, "TIMEOUT_S", 0.3)
    else:
        url = f"ftp://127.0.0.1/hooks/alerts?token={TOKEN}"
    monkeypatch.setenv(WEBHOOK_VAR, url)
    started = time.monotonic()
    logged = _evaluate(failed_run, capfd)
    assert time.monotonic() - started < 5
    expected = {"http_error": "not delivered to RLHF_ALERT_WEBHOOK_URL: HTTP 500",
                "refused": "not delivered to RLHF_ALERT_WEBHOOK_URL: Connection refused",
                "timeout": "not delivered to RLHF_ALERT_WEBHOOK_URL: no answer within 0.3 s",
                "not_http": "not sent: RLHF_ALERT_WEBHOOK_URL is not an http(s) URL"}[case]
    assert expected in logged, logged
    assert TOKEN not in logged and "hooks/alerts" not in logged and "127.0.0.1" not in logged


def _context(instance, run, event):
    return dg.build_run_status_sensor_context(sensor_name="run_failure_alert", dagster_event=event,
                                              dagster_instance=instance, dagster_run=run).for_run_failure()


@pytest.fixture()
def retried_instance():
    """An instance with run retries on (as deploy/dagster.yaml) but no daemon to create them."""
    from dagster._core.test_utils import instance_for_test

    with instance_for_test(overrides={"run_retries": {"enabled": True, "max_retries": 2}}) as instance:
        yield instance


def _failed(instance, tmp_path):
    instance.add_dynamic_partitions("session_groups", ["not-on-disk"])
    result = dg.materialize([battle_sessions], instance=instance, partition_key="not-on-disk",
                            resources=resources(tmp_path), raise_on_error=False)
    run = instance.get_run_by_id(result.run_id)
    assert run.tags["dagster/will_retry"] == "true"  # Dagster plans a retry: the daemon may still not make one
    return run, result.get_run_failure_event()


def test_will_retry_only_once_the_retry_run_exists(retried_instance, tmp_path):
    from dagster._core.test_utils import create_run_for_test

    instance = retried_instance
    run, event = _failed(instance, tmp_path)
    # planned, never created (no daemon here, or one that cannot load the job): not a retry
    started = time.monotonic()
    alert = sensors.failure_alert(_context(instance, run, event), retry_wait_s=1.0)
    assert alert["will_retry"] is False and alert["retry_run_id"] is None
    assert 1.0 <= time.monotonic() - started < 5
    # the daemon gave up creating it: said at once
    instance.add_run_tags(run.run_id, {"dagster/will_retry": "false"})
    started = time.monotonic()
    assert sensors.failure_alert(_context(instance, run, event), retry_wait_s=30)["will_retry"] is False
    assert time.monotonic() - started < 5
    instance.add_run_tags(run.run_id, {"dagster/will_retry": "true"})

    # the retry run appears while the sensor waits, as the daemon creates it: named in the alert
    def create_retry():
        time.sleep(1.0)
        created.append(create_run_for_test(instance, job_name=run.job_name, tags={
            "dagster/parent_run_id": run.run_id, "dagster/root_run_id": run.run_id, "dagster/retry_number": "1"}))

    created: list = []
    thread = threading.Thread(target=create_retry)
    thread.start()
    alert = sensors.failure_alert(_context(instance, run, event), retry_wait_s=30)
    thread.join()
    assert alert["will_retry"] is True and alert["retry_run_id"] == created[0].run_id


def test_a_worker_killed_by_a_signal_is_named(retried_instance):
    """The code server's own record of a dead worker (the engine event it writes before failing
    the run) gives the alert its error and its signal."""
    from dagster._core.test_utils import create_run_for_test

    instance = retried_instance
    run = create_run_for_test(instance, job_name="campaign_loop", status=dg.DagsterRunStatus.STARTED,
                              tags={"dagster/partition": "g1"})
    message = f"Run execution process for {run.run_id} was terminated by signal 9 (SIGKILL)."
    instance.report_engine_event(message, run)
    event = instance.report_run_failed(run)
    alert = sensors.failure_alert(_context(instance, instance.get_run_by_id(run.run_id), event), retry_wait_s=0)
    assert alert["error"] == message and alert["signal"] == "SIGKILL" and alert["partition"] == "g1"
