"""Jobs: ``campaign_loop`` (the whole local loop for one session group, what ``make run`` runs)
and ``production_daily`` (the production exports and datasets of one UTC day)."""

import dagster as dg

LOCAL_GROUPS = ("collection", "datasets", "training")

campaign_loop = dg.define_asset_job(
    "campaign_loop", selection=dg.AssetSelection.groups(*LOCAL_GROUPS),
    description="collect -> v5_dataset (+ readiness) -> splits -> train -> benchmark -> promote, for one group.")

production_daily = dg.define_asset_job(
    "production_daily", selection=dg.AssetSelection.groups("production"),
    tags={"extrarlhf/plane": "production"},
    # In process: each step is short and I/O-bound; a subprocess per step would spend more
    # time loading the code location than exporting (pools still apply per step).
    executor_def=dg.in_process_executor,
    description="The day's production exports (V5, ReturnClock; pool production_db) and the datasets derived from "
                "them. Every asset skips with the missing variable names while the production gate is off.")
