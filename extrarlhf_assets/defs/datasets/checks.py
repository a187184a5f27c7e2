"""Checks of ``v5_dataset``: its files re-validate, and V5 policy readiness (blocking:
a dataset that is not ready for behaviour cloning stops training in the same run)."""


import warnings

import dagster as dg

from extrarlhf.datasets import dataset_readiness, validate_dataset

from ...metadata import upstream_metadata
from ...partitions import session_groups
from ...resources import DatasetsResource
from .assets import v5_dataset


# Partitioned asset checks (one result per session group) are a Dagster preview feature.
warnings.filterwarnings("ignore", category=dg.PreviewWarning, message=".*partitions_def on an AssetCheckSpec.*")


@dg.asset_check(asset=v5_dataset, partitions_def=session_groups, blocking=True,
                description="V5 policy training readiness: enough verified, non-degraded battles and decisions.")
def v5_policy_training_ready(context: dg.AssetCheckExecutionContext,
                             datasets: DatasetsResource) -> dg.AssetCheckResult:
    dataset_id = upstream_metadata(context, "v5_dataset", context.partition_key)["dataset_id"]
    readiness = dataset_readiness(dataset=dataset_id, datasets_dir=datasets.path, policy=datasets.readiness_policy())
    blockers = readiness["v5_policy_blockers"]
    return dg.AssetCheckResult(
        passed=bool(readiness["v5_policy_training_ready"]), severity=dg.AssetCheckSeverity.ERROR,
        metadata={"dataset_id": dataset_id,
                  "blockers": dg.MetadataValue.md("\n".join(f"- {b}" for b in blockers) or "none"),
                  "evidence": dg.MetadataValue.json(readiness["evidence"]),
                  "policy": dg.MetadataValue.json(readiness["policy"])})


@dg.asset_check(asset=v5_dataset, partitions_def=session_groups,
                description="The dataset re-validates: file hashes, row counts, schemas and invariants.")
def v5_dataset_valid(context: dg.AssetCheckExecutionContext, datasets: DatasetsResource) -> dg.AssetCheckResult:
    dataset_id = upstream_metadata(context, "v5_dataset", context.partition_key)["dataset_id"]
    report = validate_dataset(dataset_id, datasets_dir=datasets.path)
    return dg.AssetCheckResult(passed=bool(report.get("valid")), severity=dg.AssetCheckSeverity.ERROR,
                               metadata={"dataset_id": dataset_id, "report": dg.MetadataValue.json(report)})
