"""The code location: every domain's definitions and the resources that wrap the core."""

import dagster as dg

from .defs.collection import assets as collection_assets
from .defs.collection.nightly import nightly_campaign
from .defs.collection.sensors import session_groups_sensor
from .defs.datasets import assets as dataset_assets
from .defs.datasets.automation import automation_sensor
from .defs.operations.sensors import run_failure_alert
from .defs.production import assets as production_assets
from .defs.production import checks as production_checks
from .defs.training import assets as training_assets
from .defs.training import ladder as ladder_assets
from .defs.training.jobs import EXECUTOR, campaign_loop, production_daily
from .resources import default_resources

defs = dg.Definitions(
    assets=dg.load_assets_from_modules([collection_assets, dataset_assets, training_assets, ladder_assets,
                                        production_assets]),
    asset_checks=dg.load_asset_checks_from_modules([production_checks]),
    jobs=[campaign_loop, production_daily],
    sensors=[session_groups_sensor, automation_sensor, nightly_campaign, run_failure_alert],
    resources=default_resources(),
    # every run (UI materializations, automation, backfills) on the configured executor (extrarlhf_assets/executors.py)
    executor=EXECUTOR,
)
