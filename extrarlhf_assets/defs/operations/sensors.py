"""``run_failure_alert``: every failed run of the code location, logged and optionally POSTed.

The sensor logs one line per failed run (job, run id, partition, the first line of the error,
whether the daemon's run retry will launch it again) and, when ``RLHF_ALERT_WEBHOOK_URL`` is
set, POSTs the same fields as a small JSON object to it (plus ``url``, the run's page, when
``RLHF_DAGSTER_UI_URL`` gives the UI's address)::

    {"job": "campaign_loop", "run_id": "...", "partition": "campaign-20261202" | null,
     "error": "first line of the error", "reason": "STEP_FAILURE" | "UNKNOWN" | ...,
     "signal": "SIGKILL" | null, "will_retry": true | false, "retry_run_id": "..." | null,
     "url": "https://dagster.example/runs/<run id>"}

``error`` is the first failed step's own error (the project's ``[code] message`` for a core
error), also when the step's retry policy gave up ("Exceeded max_retries of 2" is replaced by
the error that was retried, with the number of retries); without a step error, how the worker
died ("... terminated by signal 9 (SIGKILL).", ``signal`` then names it), else the run
failure's message (e.g. run monitoring's "the run worker process (pid N on HOST) is gone").
``will_retry`` is true only once the retry run exists (``retry_run_id``): Dagster's
``dagster/will_retry`` tag only says a retry is planned, and a planned retry can still fail to
be created (e.g. "Could not load job definition"); the sensor waits up to ``RETRY_WAIT_S`` for the
daemon to create it or give it up.

The webhook URL may carry a token (Slack, Teams and most chat webhooks do), so it is read
from the environment when the sensor runs and never logged, put in metadata or in the
payload; a POST that fails (refused, timed out, HTTP error) is one log line naming the
variable, and the sensor goes on. It only alerts (never requests a run), so it is on by
default.
"""

import json
import os
import re
import time
import urllib.error
import urllib.request
from typing import Any

import dagster as dg

WEBHOOK_VAR = "RLHF_ALERT_WEBHOOK_URL"
UI_URL_VAR = "RLHF_DAGSTER_UI_URL"
TIMEOUT_S = 5.0
RETRY_WAIT_S = 15.0  # how long the sensor waits for a planned retry run to be created (a tick has 60 s)
# Dagster's wrappers of a step error that was retried by its retry policy until it gave up
_RETRY_WRAPPERS = ("RetryRequestedFromPolicy", "RetryRequested", "DagsterMaxRetriesExceededError")
_SIGNAL = re.compile(r"signal \d+ \((SIG[A-Z0-9]+)\)")


def _first_line(text: str | None) -> str:
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "")


def _error_line(info: Any) -> str:
    """First line of a serialized error without the module path of its class (and without the
    class itself for ``dg.Failure``, whose message is written for the operator). A retry policy's
    "Exceeded max_retries of N" gives way to the error it retried (its cause), with the count."""
    if getattr(info, "cls_name", None) in _RETRY_WRAPPERS and getattr(info, "cause", None) is not None:
        retries = re.search(r"max_retries of (\d+)", info.message or "")
        inner = _error_line(info.cause)
        return f"{inner} (after {retries.group(1)} retries)" if retries and inner else inner or _first_line(info.message)
    line = _first_line(info.message)
    prefix, sep, rest = line.partition(": ")
    cls = getattr(info, "cls_name", None)
    if sep and cls and prefix.rsplit(".", 1)[-1] == cls:
        return rest if cls == "Failure" else f"{cls}: {rest}"
    return line


def _crash(context: dg.RunFailureSensorContext) -> str:
    """How the run's worker died, as the code server recorded it ("Run execution process for
    <run id> was terminated by signal 9 (SIGKILL)."), or ""."""
    for entry in reversed(context.instance.all_logs(context.dagster_run.run_id,
                                                    of_type=dg.DagsterEventType.ENGINE_EVENT)):
        if entry.message.startswith("Run execution process for"):
            return _first_line(entry.message)
    return ""


def _retry(context: dg.RunFailureSensorContext, wait_s: float) -> tuple[bool, str | None]:
    """(will it be retried, the retry run's id): true only once the retry run exists. A run
    tagged ``dagster/will_retry: true`` is waited on (up to ``wait_s``) until the daemon creates
    the retry, or gives it up (the tag turns "false")."""
    instance, run_id = context.instance, context.dagster_run.run_id
    deadline = time.monotonic() + wait_s
    while True:
        run = instance.get_run_by_id(run_id) or context.dagster_run
        retries = instance.get_run_ids(dg.RunsFilter(tags={"dagster/parent_run_id": run_id}), limit=1)
        if retries:
            return True, retries[0]
        if run.tags.get("dagster/will_retry") != "true" or time.monotonic() >= deadline:
            return False, None
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def failure_alert(context: dg.RunFailureSensorContext, ui_url: str | None = None,
                  retry_wait_s: float | None = None) -> dict[str, Any]:
    """The alert of a failed run: the step's error when a step failed, else how its worker died
    when it died, else the run failure's own message."""
    run = context.dagster_run
    error = ""
    for event in context.get_step_failure_events():
        info = getattr(event.event_specific_data, "error", None)
        error = _error_line(info) if info else _first_line(event.message)
        if error:
            error = f"{event.step_key}: {error}"
            break
    crash = _crash(context)
    error = error or crash
    if not error:
        info = getattr(context.failure_event.event_specific_data, "error", None)
        error = (_error_line(info) if info else "") or _first_line(context.failure_event.message)
    signal = _SIGNAL.search(crash)
    will_retry, retry_run_id = _retry(context, RETRY_WAIT_S if retry_wait_s is None else retry_wait_s)
    alert: dict[str, Any] = {
        "job": run.job_name, "run_id": run.run_id, "partition": run.tags.get("dagster/partition"),
        "error": error, "reason": run.tags.get("dagster/failure_reason", "UNKNOWN"),
        "signal": signal.group(1) if signal else None, "will_retry": will_retry, "retry_run_id": retry_run_id}
    if ui_url:
        alert["url"] = f"{ui_url.rstrip('/')}/runs/{run.run_id}"
    return alert


def _why(exc: Exception) -> str:
    """What went wrong with a POST, without the URL (some exceptions quote it)."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        exc = exc.reason if isinstance(exc.reason, OSError) else exc
    if isinstance(exc, TimeoutError):
        return f"no answer within {TIMEOUT_S:g} s"
    return getattr(exc, "strerror", None) or type(exc).__name__


def post_alert(url: str, alert: dict[str, Any], log: Any) -> bool:
    """POST ``alert`` as JSON to ``url``; True on a 2xx answer. Never raises: a failure is one
    warning on ``log`` that names the variable, never the URL."""
    if not url.lower().startswith(("http://", "https://")):
        log.warning(f"run-failure alert not sent: {WEBHOOK_VAR} is not an http(s) URL")
        return False
    request = urllib.request.Request(url, data=json.dumps(alert).encode("utf-8"), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            response.read(1024)
        return True
    except Exception as exc:  # noqa: BLE001 -- an alert must never break the sensor
        log.warning(f"run-failure alert for run {alert['run_id']} not delivered to {WEBHOOK_VAR}: {_why(exc)}")
        return False


@dg.run_failure_sensor(
    name="run_failure_alert",
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=f"Logs every failed run (job, run id, partition, first line of the error, whether it will be "
                f"retried) and POSTs it as JSON to {WEBHOOK_VAR} when set (the run's UI page too with "
                f"{UI_URL_VAR}). Only alerts: it never launches a run.",
)
def run_failure_alert(context: dg.RunFailureSensorContext) -> None:
    alert = failure_alert(context, os.environ.get(UI_URL_VAR))
    retry = f"retried as run {alert['retry_run_id']}" if alert["will_retry"] else "no automatic retry"
    context.log.error(f"run failed: job {alert['job']}, run {alert['run_id']}, partition {alert['partition']}, "
                      f"{alert['reason']} ({retry}): {alert['error']}")
    url = os.environ.get(WEBHOOK_VAR, "").strip()
    if url:
        post_alert(url, alert, context.log)
