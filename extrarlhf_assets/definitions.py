"""The code location: every domain's definitions and the resources that wrap the core."""

import dagster as dg

from .defs.collection import assets as collection_assets
from .defs.collection.nightly import nightly_campaign
from .defs.collection.sensors import session_groups_sensor
from .defs.datasets import assets as dataset_assets
from .defs.datasets import retention as retention_assets
from .defs.datasets.automation import automation_sensor
from .defs.operations.sensors import run_failure_alert
from .defs.preferences import assets as preference_assets
from .defs.production import production_definitions
from .defs.training import assets as training_assets
from .defs.training import ladder as ladder_assets
from .defs.training.jobs import EXECUTOR, campaign_loop
from .envcheck import ENV_NAMES_KEY, env_names
from .resources import default_resources

production = production_definitions()  # only when production is opted in (RLHF_ENABLE_PRODUCTION_DATASETS)

defs = dg.Definitions(
    assets=[*dg.load_assets_from_modules([collection_assets, dataset_assets, retention_assets, training_assets,
                                          ladder_assets, preference_assets]),
            *production["assets"]],
    asset_checks=production["asset_checks"],
    jobs=[campaign_loop, *production["jobs"]],
    sensors=[session_groups_sensor, automation_sensor, nightly_campaign, run_failure_alert,
             preference_assets.preference_pools_sensor],
    resources=default_resources(),
    # every run (UI materializations, automation, backfills) on the configured executor (extrarlhf_assets/executors.py)
    executor=EXECUTOR,
    # which run-relevant variables this process has (names only): the launcher compares them (envcheck.py)
    metadata={ENV_NAMES_KEY: env_names()},
)
