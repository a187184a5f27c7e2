"""Jobs: ``campaign_loop`` (the whole local loop for one session group, what ``make run`` runs)
and ``production_daily`` (the production exports and datasets of one UTC day).

Both run on the executor ``RLHF_EXECUTOR`` names (extrarlhf_assets/executors.py: in process by
default). Their tags are read by the daemon's run monitoring and run retries (deploy/dagster.yaml):
``dagster/max_runtime`` (seconds) fails a run still going after that long, and a run whose worker
died is retried with ``dagster/retry_strategy``, at most ``dagster/max_retries`` times where set."""

import dagster as dg

from ...executors import run_executor

LOCAL_GROUPS = ("collection", "datasets", "training")
EXECUTOR = run_executor()

campaign_loop = dg.define_asset_job(
    "campaign_loop", selection=dg.AssetSelection.groups(*LOCAL_GROUPS), executor_def=EXECUTOR,
    tags={
        # 4 hours: make run's whole loop takes about 10 s and a 4,000-battle round of the
        # improvement loop well under an hour (docs/training.md), so a run still going after
        # 4 hours is stuck, not slow
        "dagster/max_runtime": "14400",
        # a retry after a dead worker runs every step again, not only the unfinished ones:
        # promoted_policy promotes only a candidate its own run benchmarked, so a resume that
        # re-ran just the promotion would skip it. Nothing done is redone for long: the series
        # resumes (battles on disk are never replayed) and v5_dataset reuses an identical version.
        "dagster/retry_strategy": "ALL_STEPS",
    },
    description="collect -> v5_dataset (+ readiness) -> splits -> train -> benchmark -> promote, for one group.")

production_daily = dg.define_asset_job(
    "production_daily", selection=dg.AssetSelection.groups("production"),
    tags={
        "extrarlhf/plane": "production",
        # 2 hours for one day's exports, datasets and checks (minutes at the fixture's scale)
        "dagster/max_runtime": "7200",
        # resume from the unfinished steps: each export reads its window again (publication is
        # atomic, so a dead worker leaves no half version) ...
        "dagster/retry_strategy": "FROM_FAILURE",
        # ... once, not twice: Dagster gives a run failed for its max runtime no failure reason,
        # so it is retried like a dead worker, and a second 2-hour read of the production
        # database for the same day would most likely repeat the first one's problem
        "dagster/max_retries": "1",
    },
    executor_def=EXECUTOR,  # pools still apply per step
    description="The day's production exports (V5, ReturnClock; pool production_db) and the datasets derived from "
                "them. Every asset skips with the missing variable names while the production gate is off.")
