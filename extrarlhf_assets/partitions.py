"""The one partitioning of the local plane: one dynamic partition per session group."""

import warnings

import dagster as dg

SESSION_GROUPS = "session_groups"
session_groups = dg.DynamicPartitionsDefinition(name=SESSION_GROUPS)

# Dagster 1.13's Checks tab gives a check on a partitioned asset one status over all its partitions:
# Failed (WARN: a warning) while any partition's latest evaluation failed or never ran ("Execution
# failed": the partition's run failed before the check), whatever the latest execution said.
# Appended to the description of every partitioned check, which the Checks tab shows (issue 52).
PER_PARTITION_NOTE = (" Evaluated per partition: the Checks tab shows this check failed while any partition's latest "
                      "evaluation failed or did not run (its run failed first), even when the latest execution "
                      "passed; the check's page shows each partition's result.")


def expect_partitioned_checks() -> None:
    """Partitioned asset checks (one result per partition: a session group, a production day)
    are a Dagster preview feature; its warning is expected, not news, in every check module."""
    warnings.filterwarnings("ignore", category=dg.PreviewWarning, message=".*partitions_def on an AssetCheckSpec.*")
