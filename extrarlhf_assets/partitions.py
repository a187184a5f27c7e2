"""The one partitioning of the local plane: one dynamic partition per session group."""

import dagster as dg

SESSION_GROUPS = "session_groups"
session_groups = dg.DynamicPartitionsDefinition(name=SESSION_GROUPS)
