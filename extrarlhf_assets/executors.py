"""The executor of every run, chosen by configuration (DESIGN 12.2), never by a code edit.

``RLHF_EXECUTOR`` is read once, when the code location loads (the webserver's, the daemon's
or the code server's process, and each run worker, which loads it again):

- ``in_process`` (default): every step of a run in the run's own process. Measured faster
  here: ``campaign_loop`` took 7.3 s in process against 29.7 s multiprocess (spawn) and
  20.0 s multiprocess with a preloaded forkserver (benchmarks/dagster_runs.py, 2 cores): a
  subprocess per step costs more than the steps, which parallelize inside (``max_workers``
  processes for battles and benchmarks). One run can still ask for a process per step with
  ``execution: {config: {multiprocess: {max_concurrent: 2}}}`` in its run config.
- ``multiprocess``: a process per step by default (``execution: {config: {in_process: {}}}``
  takes a run back into one process).
- ``k8s``: ``dagster_k8s.k8s_job_executor``, a Kubernetes Job per step (the ``k8s`` extra;
  its run config is ``execution: {config: {max_concurrent: ..., ...}}``).

Pools (``collection_cpu``, ``production_db``) are claimed by each step from the instance,
whatever process or pod runs it, so they hold under every choice.
"""

import os
from collections.abc import Mapping

import dagster as dg

from extrarlhf.core.errors import InvalidArgument
from extrarlhf.core.extras import MissingExtra

EXECUTOR_VAR = "RLHF_EXECUTOR"
CHOICES = ("in_process", "multiprocess", "k8s")

# Dagster's multi_or_in_process_executor (a selector: multiprocess or in_process) defaults to
# multiprocess; the same selector with in_process as its default, so that a run picks
# multiprocess by run config while every other run stays in process.
_SELECTOR = dg.multi_or_in_process_executor.config_schema.as_field().config_type
in_process_by_default = dg.multi_or_in_process_executor.configured(
    lambda config: config, name="in_process_or_multiprocess",
    config_schema=dg.Field(_SELECTOR, default_value={"in_process": {}}),
    description="Every step in the run's process unless the run config selects multiprocess.")


def run_executor(environ: Mapping[str, str] | None = None) -> dg.ExecutorDefinition:
    """The executor ``RLHF_EXECUTOR`` (in ``environ``, default ``os.environ``) names; unset or
    empty is ``in_process``. InvalidArgument for another value, MissingExtra for ``k8s``
    without dagster-k8s."""
    env = os.environ if environ is None else environ
    choice = (env.get(EXECUTOR_VAR) or "in_process").strip()
    if choice == "in_process":
        return in_process_by_default
    if choice == "multiprocess":
        return dg.multi_or_in_process_executor
    if choice == "k8s":
        try:
            from dagster_k8s import k8s_job_executor
        except ModuleNotFoundError:
            raise MissingExtra(f"{EXECUTOR_VAR}=k8s needs dagster-k8s, which this install leaves out: "
                               "pip install 'extrarlhf[k8s]' (in a checkout: pip install -e '.[k8s]')") from None
        return k8s_job_executor
    raise InvalidArgument(f"{EXECUTOR_VAR}={choice!r} is not an executor; use one of {', '.join(CHOICES)} "
                          "(unset: in_process)")
