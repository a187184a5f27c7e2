"""The one partitioning of the local plane: one dynamic partition per session group."""

import warnings

import dagster as dg

SESSION_GROUPS = "session_groups"
session_groups = dg.DynamicPartitionsDefinition(name=SESSION_GROUPS)


def expect_partitioned_checks() -> None:
    """Partitioned asset checks (one result per partition: a session group, a production day)
    are a Dagster preview feature; its warning is expected, not news, in every check module."""
    warnings.filterwarnings("ignore", category=dg.PreviewWarning, message=".*partitions_def on an AssetCheckSpec.*")
