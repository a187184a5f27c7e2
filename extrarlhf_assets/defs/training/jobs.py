"""Jobs: ``campaign_loop`` (the whole local loop for one session group, what ``make run`` runs)
and ``production_daily`` (the production exports and datasets of one UTC day)."""

import dagster as dg

LOCAL_GROUPS = ("collection", "datasets", "training")

# Both jobs run their steps in the run's own process: a subprocess per step (Dagster's default
# multiprocess executor) costs more than the steps themselves here -- campaign_loop 7.3 s in
# process vs 29.7 s multiprocess (spawn) and 20.0 s multiprocess with a preloaded forkserver
# (benchmarks/dagster_runs.py, 2 cores). Steps parallelize inside (max_workers processes for
# battles and benchmarks); across machines, use k8s_job_executor / celery (docs/dagster.md).
campaign_loop = dg.define_asset_job(
    "campaign_loop", selection=dg.AssetSelection.groups(*LOCAL_GROUPS), executor_def=dg.in_process_executor,
    description="collect -> v5_dataset (+ readiness) -> splits -> train -> benchmark -> promote, for one group.")

production_daily = dg.define_asset_job(
    "production_daily", selection=dg.AssetSelection.groups("production"),
    tags={"extrarlhf/plane": "production"},
    executor_def=dg.in_process_executor,  # pools still apply per step
    description="The day's production exports (V5, ReturnClock; pool production_db) and the datasets derived from "
                "them. Every asset skips with the missing variable names while the production gate is off.")
