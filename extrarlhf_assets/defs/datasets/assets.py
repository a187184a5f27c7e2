"""``v5_dataset`` (one dataset per session group, a new version only when the group changed)
and its Nemesis Lite split. Every asset calls the core, which writes and validates the files;
the asset returns what was written.

No Nemesis Standard split per session group: it needs human-vs-human production rows, which
headless session data never has, so an asset per group could only ever warn and stay empty.
``v5_dataset`` reports the Standard readiness (``nemesis_standard_ready`` and its blockers);
the production day partitions carry the Standard split as an asset
(defs/production: ``production_nemesis_standard_split``), and the CLI and the MCP server build it
from any other dataset that qualifies.

Gates: an asset builds only on an upstream materialization whose blocking checks passed
(metadata.gate_blockers); otherwise it records why and materializes nothing -- a normal
outcome, not a failure. Automation follows new sessions with the same gates across runs
(``GATED_EAGER``: eager, and only once the dependencies' blocking checks passed)."""


from pathlib import Path
from typing import Iterator

import dagster as dg

import engine
from extrarlhf.datasets import (DEFAULT_FRACTIONS, DEFAULT_SPLIT_KEY, dataset_readiness, materialize_v5_dataset,
                                split_nemesis_training_dataset, validate_dataset)
from extrarlhf.datasets.assign import SPLITS
from extrarlhf.datasets.pointers import manifest_sha256

from ...metadata import (OWNERS, TRANSIENT_RETRY, bar_chart_md, column_lineage, gate_blockers, skipped, table_schema,
                         upstream)
from ...partitions import PER_PARTITION_NOTE, session_groups
from ...resources import DatasetsResource, SessionsResource
from ..collection.assets import CATALOG_COLUMNS, battle_sessions
from ..collection.checks import NO_DEGRADED_PLAY, TRACE_INTEGRITY
from .checks import V5_DATASET_VALID, V5_POLICY_TRAINING_READY, v5_dataset_valid, v5_policy_training_ready
from .reuse import reusable_version, same_session_group, same_source_dataset

# Eager, but only on upstream materializations whose blocking checks passed: a group that
# fails trace_integrity never gets a dataset, a dataset that is not V5-ready never gets splits.
GATED_EAGER = dg.AutomationCondition.eager() & dg.AutomationCondition.all_deps_blocking_checks_passed()
# Bump when the rows an asset writes change; the engine's observation layout is part of it.
CODE_VERSION = f"1-obs{engine.OBS_VERSION}"
TAGS = {"plane": "local", "domain": "datasets"}
V5_CHECKS = [V5_POLICY_TRAINING_READY, V5_DATASET_VALID]


def _blockers_md(blockers: list[str]) -> dg.MetadataValue:
    return dg.MetadataValue.md("\n".join(f"- {b}" for b in blockers) or "none")


@dg.asset(
    partitions_def=session_groups,
    deps=[battle_sessions],
    group_name="datasets",
    kinds={"parquet"},
    owners=OWNERS,
    tags=TAGS,
    code_version=CODE_VERSION,
    retry_policy=TRANSIENT_RETRY,  # publication is atomic: a retry never sees half a version
    automation_condition=GATED_EAGER,
    check_specs=V5_CHECKS,
    description="V5 decisions/turns/battles Parquet dataset of one session group (`datasets/<group>/vN`). "
                "An unchanged group keeps its version (no identical copy is written).",
)
def v5_dataset(context: dg.AssetExecutionContext, sessions: SessionsResource,
               datasets: DatasetsResource) -> dg.MaterializeResult:
    group = context.partition_key
    source = upstream(context, "battle_sessions", group)
    blockers = gate_blockers(context, source, [TRACE_INTEGRITY, NO_DEGRADED_PLAY])
    if blockers:  # a damaged group is an error, not a "not yet" (within a run Dagster stops here itself)
        raise dg.Failure(f"no dataset from session group {group!r}: " + "; ".join(blockers) +
                         "; restore the traces (see the check's failures) and record the group again",
                         allow_retries=False)
    kept = reusable_version(datasets.path, group, same_session_group(group, sessions.path))
    if kept is not None:
        dataset_id, path, manifest = kept["dataset_id"], Path(kept["path"]), kept["manifest"]
        counts, exclusions, report = manifest["row_counts"], manifest.get("exclusions") or {}, kept["validation"]
        context.log.info(f"{group} is unchanged since {dataset_id}: kept that version")
    else:
        result = materialize_v5_dataset([group], group, sessions_dir=sessions.path, datasets_dir=datasets.path,
                                        policy=datasets.readiness_policy())
        dataset_id, path = result["dataset_id"], Path(result["path"])
        counts, exclusions = result["row_counts"], result.get("exclusions") or {}
        report = validate_dataset(dataset_id, datasets_dir=datasets.path)
        context.log.info(f"materialized {dataset_id}: {counts}")
    readiness = dataset_readiness(dataset=dataset_id, datasets_dir=datasets.path, policy=datasets.readiness_policy())
    schema = table_schema(path, "decisions")
    return dg.MaterializeResult(
        metadata={
            "rows_chart": dg.MetadataValue.md(bar_chart_md("Rows per table", [
                ("battles", counts["battles"], "#2563eb"), ("turns", counts["turns"], "#9333ea"),
                ("decisions", counts["decisions"], "#16a34a"), ("excluded", counts.get("excluded", 0), "#dc2626")])),
            "dataset_id": dataset_id,
            "reused": kept is not None,
            "path": dg.MetadataValue.path(str(path)),
            "dagster/row_count": counts["decisions"],
            "dagster/column_schema": schema,
            "dagster/column_lineage": column_lineage(schema, "battle_sessions", {c[0] for c in CATALOG_COLUMNS}),
            "row_counts": dg.MetadataValue.json(counts),
            "battles": counts["battles"], "turns": counts["turns"], "excluded": counts.get("excluded", 0),
            "exclusions": dg.MetadataValue.json(exclusions),
            "battles_schema": dg.MetadataValue.table_schema(table_schema(path, "battles")),
            "v5_policy_training_ready": bool(readiness["v5_policy_training_ready"]),
            "readiness_blockers": _blockers_md(readiness["v5_policy_blockers"]),
            # the Standard split needs human-vs-human production rows, which a session group never
            # has: no asset per group, its readiness reported here (the CLI and MCP build it elsewhere)
            "nemesis_standard_ready": bool(readiness["training_ready_standard"]),
            "nemesis_standard_blockers": _blockers_md(readiness["standard_readiness_blockers"]),
            **source.provenance(),
        },
        check_results=[v5_policy_training_ready(dataset_id, readiness), v5_dataset_valid(report)])


def _lite_split(context: dg.AssetExecutionContext, datasets: DatasetsResource) -> Iterator:
    """The V5 gates first, then Nemesis Lite readiness (a WARN check); split only when both
    pass, reusing the version already made from the same source version."""
    source = upstream(context, "v5_dataset", context.partition_key)
    dataset_id = source.metadata["dataset_id"]
    policy = datasets.readiness_policy()
    blockers = gate_blockers(context, source, V5_CHECKS)
    evidence = {}
    if not blockers:  # the split's own readiness, once the dataset's gates let it through
        readiness = dataset_readiness(dataset=dataset_id, datasets_dir=datasets.path, policy=policy)
        blockers = [] if readiness["nemesis_lite_ready"] else list(readiness["nemesis_lite_blockers"])
        evidence = readiness["evidence"]
    check = dg.AssetCheckResult(check_name="nemesis_lite_ready", passed=not blockers,
                                severity=dg.AssetCheckSeverity.WARN,
                                metadata={"dataset_id": dataset_id, "blockers": _blockers_md(blockers),
                                          "evidence": dg.MetadataValue.json(evidence)})
    if blockers:
        yield check
        yield skipped(context, blockers)
        return
    name = f"{dataset_id.rsplit('/', 1)[0]}-nemesis-lite"
    settings = {"view": "lite", "split_key": DEFAULT_SPLIT_KEY, "fractions": dict(zip(SPLITS, DEFAULT_FRACTIONS))}
    source_path = Path(source.metadata["path"])
    kept = reusable_version(datasets.path, name, same_source_dataset(
        "nemesis_lite_split", dataset_id, manifest_sha256(source_path), settings))
    if kept is not None:
        split_id, path, counts = kept["dataset_id"], Path(kept["path"]), kept["manifest"]["row_counts"]
        context.log.info(f"{dataset_id} is unchanged since {split_id} was split from it: kept that version")
    else:
        result = split_nemesis_training_dataset(dataset_id, view="lite", datasets_dir=datasets.path, policy=policy)
        split_id, path, counts = result["dataset_id"], Path(result["path"]), result["row_counts"]
    schema = table_schema(path, "train")  # train, val and test share one layout
    decisions = {c.name for c in table_schema(source_path, "decisions").columns}
    yield dg.MaterializeResult(
        metadata={
            "split_chart": dg.MetadataValue.md(bar_chart_md("Nemesis Lite rows per split", [
                (k, counts.get(k, 0), c) for k, c in zip(SPLITS, ("#16a34a", "#2563eb", "#9333ea"))])),
            "dataset_id": split_id, "source": dataset_id, "reused": kept is not None,
            "path": dg.MetadataValue.path(str(path)),
            "dagster/row_count": sum(counts.get(k, 0) for k in SPLITS),  # rows of the split tables only
            "dagster/column_schema": schema,
            "dagster/column_lineage": column_lineage(schema, "v5_dataset", decisions),
            "row_counts": dg.MetadataValue.json(counts),
            "assignments": counts.get("assignments", 0),
            **source.provenance(),
        },
        check_results=[check])


@dg.asset(
    partitions_def=session_groups,
    deps=[dg.AssetDep("v5_dataset")],
    group_name="datasets",
    kinds={"parquet"},
    owners=OWNERS,
    tags=TAGS,
    code_version=CODE_VERSION,
    retry_policy=TRANSIENT_RETRY,
    automation_condition=GATED_EAGER,
    output_required=False,
    check_specs=[dg.AssetCheckSpec("nemesis_lite_ready", asset="nemesis_lite_split", partitions_def=session_groups,
                                   description="Nemesis Lite readiness (eligible battles, distinct decks). Warns: "
                                               "not ready means the split waits for more battles." + PER_PARTITION_NOTE)],
    description="Battle-grouped Nemesis Lite train/val/test split (opponent modelling from any eligible battle; "
                "both seats of a battle in one split), "
                "`datasets/<group>-nemesis-lite/vN`.",
)
def nemesis_lite_split(context: dg.AssetExecutionContext, datasets: DatasetsResource):
    yield from _lite_split(context, datasets)
