"""``v5_dataset`` (one dataset per session group, a new version per materialization) and its
Nemesis splits. Every asset calls the core, which writes and validates the files; the asset
returns what was written. Datasets follow new sessions by declarative automation (eager)."""


from pathlib import Path
from typing import Iterator

import dagster as dg

from extrarlhf.datasets import dataset_readiness, materialize_v5_dataset, split_nemesis_training_dataset

from ...metadata import bar_chart_md, parquet_schema, upstream_metadata
from ...partitions import session_groups
from ...resources import DatasetsResource, SessionsResource
from ..collection.assets import battle_sessions


def _blockers_md(blockers: list[str]) -> dg.MetadataValue:
    return dg.MetadataValue.md("\n".join(f"- {b}" for b in blockers) or "none")


@dg.asset(
    partitions_def=session_groups,
    deps=[battle_sessions],
    group_name="datasets",
    kinds={"parquet"},
    automation_condition=dg.AutomationCondition.eager(),
    description="V5 decisions/turns/battles Parquet dataset of one session group (datasets/<group>/vN).",
)
def v5_dataset(context: dg.AssetExecutionContext, sessions: SessionsResource,
               datasets: DatasetsResource) -> dg.MaterializeResult:
    group = context.partition_key
    result = materialize_v5_dataset([group], group, sessions_dir=sessions.path, datasets_dir=datasets.path,
                                    policy=datasets.readiness_policy())
    path = Path(result["path"])
    counts = result["row_counts"]
    readiness = result.get("readiness") or {}
    context.log.info(f"materialized {result['dataset_id']}: {counts}")
    return dg.MaterializeResult(metadata={
        "dataset_id": result["dataset_id"],
        "path": dg.MetadataValue.path(str(path)),
        "dagster/row_count": counts["decisions"],
        "dagster/column_schema": parquet_schema(path / "decisions.parquet"),
        "row_counts": dg.MetadataValue.json(counts),
        "battles": counts["battles"], "turns": counts["turns"], "excluded": counts.get("excluded", 0),
        "exclusions": dg.MetadataValue.json(result.get("exclusions") or {}),
        "battles_schema": dg.MetadataValue.table_schema(parquet_schema(path / "battles.parquet")),
        "v5_policy_training_ready": bool(readiness.get("v5_policy_training_ready")),
        "readiness_blockers": _blockers_md(readiness.get("v5_policy_blockers") or []),
        "rows_chart": dg.MetadataValue.md(bar_chart_md("Rows per table", [
            ("battles", counts["battles"], "#2563eb"), ("turns", counts["turns"], "#9333ea"),
            ("decisions", counts["decisions"], "#16a34a"), ("excluded", counts.get("excluded", 0), "#dc2626")])),
    })


def _split(context: dg.AssetExecutionContext, datasets: DatasetsResource, view: str) -> Iterator:
    """Readiness of the view first (a check result); split only when ready, else no materialization."""
    dataset_id = upstream_metadata(context, "v5_dataset", context.partition_key)["dataset_id"]
    policy = datasets.readiness_policy()
    readiness = dataset_readiness(dataset=dataset_id, datasets_dir=datasets.path, policy=policy)
    ready_key, blockers_key = (("nemesis_lite_ready", "nemesis_lite_blockers") if view == "lite" else
                               ("training_ready_standard", "standard_readiness_blockers"))
    ready, blockers = bool(readiness[ready_key]), list(readiness[blockers_key])
    yield dg.AssetCheckResult(check_name=f"nemesis_{view}_ready", passed=ready, severity=dg.AssetCheckSeverity.WARN,
                              metadata={"dataset_id": dataset_id, "blockers": _blockers_md(blockers),
                                        "evidence": dg.MetadataValue.json(readiness["evidence"])})
    if not ready:
        context.log.warning(f"Nemesis {view} split of {dataset_id} not built: " + "; ".join(blockers))
        return
    result = split_nemesis_training_dataset(dataset_id, view=view, datasets_dir=datasets.path, policy=policy)
    path = Path(result["path"])
    counts = result["row_counts"]
    files = sorted(path.glob("*.parquet"))
    yield dg.MaterializeResult(metadata={
        "dataset_id": result["dataset_id"], "source": dataset_id,
        "path": dg.MetadataValue.path(str(path)),
        "dagster/row_count": sum(v for v in counts.values() if isinstance(v, int)),
        "dagster/column_schema": parquet_schema(files[0]) if files else dg.TableSchema(columns=[]),
        "row_counts": dg.MetadataValue.json(counts),
        "split_chart": dg.MetadataValue.md(bar_chart_md(f"Nemesis {view} rows per split", [
            (k, v, c) for (k, c) in (("train", "#16a34a"), ("val", "#2563eb"), ("test", "#9333ea"))
            for v in [counts.get(k, 0)] if isinstance(v, int)])),
    })


@dg.asset(
    partitions_def=session_groups,
    deps=["v5_dataset"],
    group_name="datasets",
    kinds={"parquet"},
    automation_condition=dg.AutomationCondition.eager(),
    output_required=False,
    check_specs=[dg.AssetCheckSpec("nemesis_lite_ready", asset="nemesis_lite_split",
                                   description="Nemesis Lite readiness (eligible battles, distinct decks).")],
    description="Deck-grouped Nemesis Lite train/val/test split (opponent modelling from any eligible battle).",
)
def nemesis_lite_split(context: dg.AssetExecutionContext, datasets: DatasetsResource):
    yield from _split(context, datasets, "lite")


@dg.asset(
    partitions_def=session_groups,
    deps=["v5_dataset"],
    group_name="datasets",
    kinds={"parquet"},
    automation_condition=dg.AutomationCondition.eager(),
    output_required=False,
    # The readiness check is evaluated by the asset itself *before* anything is written and gates
    # the split (fail-closed: not ready -> no split, no materialization). It is a WARN, not a
    # Dagster ERROR-blocking check: session data is never Standard-ready, and an ERROR would
    # fail every campaign run for a split that is expected to wait for production data.
    check_specs=[dg.AssetCheckSpec("nemesis_standard_ready", asset="nemesis_standard_split",
                                   description="Nemesis Standard readiness: human-vs-human production rows only. "
                                               "Gates the split: not ready -> no split is written.")],
    description="Nemesis Standard split (human-vs-human rows only); never built from headless session data.",
)
def nemesis_standard_split(context: dg.AssetExecutionContext, datasets: DatasetsResource):
    yield from _split(context, datasets, "standard")
