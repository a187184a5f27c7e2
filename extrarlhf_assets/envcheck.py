"""The environment a run needs, compared where it is submitted and where it is launched (issue 52).

With ``workspace.yaml`` the webserver and the daemon each load the code location in a process of
their own environment. A daemon started without the production gate's variables then launched
the webserver's ``production_daily`` runs into a code location that has no such job: the worker
failed with "Could not load job definition" (or, with ``RLHF_ENABLE_PRODUCTION_DATASETS`` but no
DSN, every production asset skipped as "production disabled"), and the alert promised a retry.

So the code location records which of :data:`VARIABLES` its process has (names only, never a
value) in its ``Definitions`` metadata (:data:`ENV_NAMES_KEY`); :class:`EnvRecordingRunCoordinator`
(the instance's run queue) tags each run it queues with the names of the code location that
created it (:data:`ENV_TAG`); and the run launcher (``WorkerCheckingRunLauncher``, in the daemon)
compares them with the code location it launches into, before it starts any process
(:func:`launch_problem`). A run whose launching location lacks a name, or lacks the run's job,
is failed at once with the names and the fix, never retried (``dagster/max_retries: 0``, so
Dagster tags it ``dagster/will_retry: false``: a retry would fail the same way).

Why runs and not the daemon's start: the daemon cannot know the webserver's environment when it
starts (either may start first, or be restarted alone); the run's launch is where the two code
locations meet. A refusal there costs one failed run that says what to do, never a half-run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from dagster._core.run_coordinator import QueuedRunCoordinator, SubmitRunContext

from extrarlhf.production.gate import LOCK_TIMEOUT_VAR, STATEMENT_TIMEOUT_VAR
from extrarlhf.production.gate import VARIABLES as GATE_VARIABLES

# what a run's steps read from their process's environment (the gate, where data lives, the executor)
VARIABLES = (*GATE_VARIABLES, STATEMENT_TIMEOUT_VAR, LOCK_TIMEOUT_VAR, "RLHF_SESSIONS_DIR", "RLHF_DATASETS_DIR",
             "RLHF_CHECKPOINTS_DIR", "RLHF_PREFERENCES_DIR", "RLHF_EXECUTOR")
ENV_NAMES_KEY = "extrarlhf/env_names"
ENV_TAG = "extrarlhf/submitted_env_names"
NO_RETRY_TAG = "dagster/max_retries"  # "0" on a run failed at launch: a retry would fail the same way


def env_names(environ: Mapping[str, str] | None = None) -> str:
    """The names of :data:`VARIABLES` set (non-empty) in ``environ`` (default ``os.environ``),
    comma-separated in a fixed order: the code location's fingerprint. Never a value."""
    env = os.environ if environ is None else environ
    return ",".join(name for name in VARIABLES if env.get(name))


def _names(text: str | None) -> list[str]:
    return [name for name in (text or "").split(",") if name]


def _repository(workspace: Any, run: Any) -> Any:
    """The repository of ``run``'s job as ``workspace`` has it loaded, or None (not loaded there)."""
    origin = run.remote_job_origin
    if workspace is None or origin is None:
        return None
    repo_origin = origin.repository_origin
    try:
        location = workspace.get_code_location(repo_origin.code_location_origin.location_name)
        return location.get_repository(repo_origin.repository_name)
    except Exception:  # a location that failed to load, no such repository: Dagster's launch reports it
        return None


def _fingerprint(repository: Any) -> str | None:
    value = (repository.repository_snap.metadata or {}).get(ENV_NAMES_KEY)
    return getattr(value, "value", value)


def location_env_names(workspace: Any, run: Any) -> str | None:
    """The fingerprint recorded by the code location of ``run``'s job in ``workspace`` (None when
    that location is not loaded there, or records none)."""
    repository = _repository(workspace, run)
    return None if repository is None else _fingerprint(repository)


def missing_names(submitted: str | None, here: str | None) -> list[str]:
    """The names the submitting code location had and the launching one lacks."""
    have = set(_names(here))
    return [name for name in _names(submitted) if name not in have]


def launch_problem(run: Any, workspace: Any) -> str | None:
    """Why ``run`` must not be launched into ``workspace``'s code location, or None: its job is not
    there, or that location lacks variables the one that created the run had."""
    repository = _repository(workspace, run)
    if repository is None:
        return None
    missing = missing_names(run.tags.get(ENV_TAG), _fingerprint(repository))
    if not missing and repository.has_job(run.job_name):
        return None
    location = run.remote_job_origin.repository_origin.code_location_origin.location_name
    what = (f"its job {run.job_name!r} is not in the code location {location!r} loaded by the process that "
            f"launches runs (the daemon, or its code server)" if not repository.has_job(run.job_name)
            else f"the code location {location!r} loaded by the process that launches runs (the daemon, or its code "
                 "server) lacks environment variables that the code location which created the run has")
    names = f" Missing there: {', '.join(missing)}." if missing else ""
    return (f"Run not launched: {what}.{names} Set the same variables in the environment of the daemon (and of the "
            "code server, if one is used) as in the webserver's, restart it, and launch the run again "
            "(docs/dagster.md, Operator's runbook, Start). Values are never compared or shown, only names.")


class EnvRecordingRunCoordinator(QueuedRunCoordinator):
    """Dagster's ``QueuedRunCoordinator`` (same configuration) that tags each run it queues with the
    environment fingerprint of the code location that created it (:data:`ENV_TAG`)."""

    def submit_run(self, context: SubmitRunContext) -> Any:
        run = context.dagster_run
        if ENV_TAG not in run.tags:
            names = location_env_names(context.workspace, run)
            if names is not None:
                self._instance.add_run_tags(run.run_id, {ENV_TAG: names})
                run = self._instance.get_run_by_id(run.run_id) or run
                context = SubmitRunContext(dagster_run=run, workspace=context.workspace)
        return super().submit_run(context)

