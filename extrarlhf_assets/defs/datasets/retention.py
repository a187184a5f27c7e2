"""``trace_retention``: the opt-in retention policy of one session group (DESIGN 6.1,
extrarlhf/datasets/retention.py), as an asset an operator materializes from the UI.

Never automated: it runs only when someone launches it (config ``keep``: ``compact``, the
default, stores the battles a valid published dataset version holds as ``.jsonl.zst``;
``none`` deletes the group once published versions hold every traced battle; ``dry_run``
reports only). Battles no valid published version holds are never touched; a group a series
owns is left alone. The metadata says what was done, the bytes before and after, and which
dataset versions cover the group."""

from typing import Literal

import dagster as dg

from extrarlhf.datasets.retention import prune_traces

from ...metadata import OWNERS, bar_chart_md
from ...partitions import session_groups
from ...resources import DatasetsResource, SessionsResource
from .assets import TAGS, v5_dataset


class RetentionConfig(dg.Config):
    keep: Literal["compact", "none"] = "compact"
    dry_run: bool = False


@dg.asset(
    partitions_def=session_groups,
    deps=[v5_dataset],
    group_name="retention",  # not in campaign_loop's groups: it runs only when launched
    owners=OWNERS,
    tags={**TAGS, "destructive": "opt-in"},
    description="Opt-in retention of one group's raw traces: keep compact copies of (or, keep=none, delete) the "
                "battles a validated published dataset version holds. Never automated.",
)
def trace_retention(context: dg.AssetExecutionContext, config: RetentionConfig, sessions: SessionsResource,
                    datasets: DatasetsResource) -> dg.MaterializeResult:
    group = context.partition_key
    result = prune_traces(sessions_dir=sessions.path, datasets_dir=datasets.path, groups=[group], keep=config.keep,
                          dry_run=config.dry_run)
    row = result["groups"][0]
    context.log.info(f"{group}: {row['action']} ({row['covered']} of {row['traced']} traced battles held by "
                     f"{', '.join(row['datasets']) or 'no valid published version'})"
                     + (f"; {row['reason']}" if row.get("reason") else ""))
    after = row["bytes_after"] if row.get("bytes_after") is not None else row["bytes_before"]
    return dg.MaterializeResult(metadata={
        "action": row["action"], "keep": config.keep, "dry_run": config.dry_run,
        "reason": row.get("reason") or "",
        "covered_battles": row["covered"], "traced_battles": row["traced"],
        "covered_by": dg.MetadataValue.json(row["datasets"]),
        "bytes_before": row["bytes_before"], "bytes_after": after,
        "bytes_chart": dg.MetadataValue.md(bar_chart_md("Stored trace bytes", [
            ("before", row["bytes_before"], "#9333ea"), ("after", after, "#16a34a")])),
        "datasets_skipped": dg.MetadataValue.json(result["datasets_skipped"]),
    })
