"""``campaign_loop``: the whole loop for one session group partition (what ``make run`` runs)."""

import dagster as dg


campaign_loop = dg.define_asset_job(
    "campaign_loop", selection=dg.AssetSelection.all(),
    description="collect -> v5_dataset (+ readiness) -> splits -> train -> benchmark -> promote, for one group.")
