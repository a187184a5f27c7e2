"""Production assets (DESIGN 12.1): daily exports of the game backend's database and the
datasets derived from them, each a thin call of the core (``extrarlhf.production``).

- ``production_v5_export`` / ``returnclock_export``: one partition per UTC day; the window is
  the day, ``ingested_before`` the run config's or the window's end plus the resource's
  settle delay. They are the only steps that read the production database, so they carry
  ``pool="production_db"`` (the instance caps concurrent reads; deploy/dagster.yaml).
- ``timestamp_dataset``, ``metronome_dataset`` (from the V5 export) and
  ``returnclock_training_split`` (organic-only train/val/test of the ReturnClock export).

Fail closed, never red: with the gate off every asset logs ``skipped: production disabled
(missing: VAR, ...)`` and emits no materialization (downstream assets skip in turn); a day
not yet settled, an export stopped by the row ceiling or a dataset that is not ready are
reported the same way, with their reason. Metadata carry counts, schemas, the window and
the public key id: never the DSN, the salt or a raw id.
"""


from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import dagster as dg

import engine
from extrarlhf.core.errors import NotReady, RLHFError
from extrarlhf.datasets import dataset_readiness
from extrarlhf.production import (
    export_production_v5_dataset,
    export_returnclock_dataset,
    export_timestamp_dataset,
    split_returnclock_training_dataset,
)
from extrarlhf.production.export import _iso

from ...metadata import OWNERS, TRANSIENT_RETRY, bar_chart_md, parquet_schema, upstream_metadata
from ...resources import DatasetsResource, ProductionResource

production_days = dg.DailyPartitionsDefinition(start_date="2026-01-01", timezone="UTC")
POOL = "production_db"
CODE_VERSION = f"1-obs{engine.OBS_VERSION}"  # the V5 rows the exports replay carry the observation layout
CONVENTIONS = dict(partitions_def=production_days, group_name="production", owners=OWNERS,
                   tags={"plane": "production", "domain": "production"}, code_version=CODE_VERSION,
                   output_required=False)


class ExportConfig(dg.Config):
    """Run config of a daily export. ``ingested_before``: an ISO instant with a timezone (rows
    ingested at or after it are invisible); None: the window's end plus the settle delay."""

    ingested_before: str | None = None
    max_rows: int | None = None
    publish_incomplete: bool = False


def _window(context: dg.AssetExecutionContext, production: ProductionResource,
            config: ExportConfig) -> tuple[datetime, datetime, Any]:
    window = context.partition_time_window
    cut: Any = config.ingested_before or window.end + timedelta(seconds=production.settle_seconds)
    return window.start, window.end, cut


def _core(call, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The core's result; its errors (already free of secrets) as a clear step failure."""
    try:
        return call(*args, **kwargs)
    except RLHFError as exc:  # only an unreachable database is worth a retry
        raise dg.Failure(description=f"[{exc.code}] {exc}",
                         allow_retries=exc.code == "production_unavailable") from None


def _not_published(kind: str, result: dict[str, Any]) -> dg.AssetObservation:
    """What the timeline shows for an export the row ceiling stopped (nothing was published)."""
    return dg.AssetObservation(asset_key=kind, metadata={
        "published": False, "stop_reason": result.get("stop_reason") or "none",
        "stopped_stream": result.get("stopped_stream") or "none", "max_rows": result.get("max_rows") or 0,
        "streams": dg.MetadataValue.json(result.get("streams") or {}), "message": result.get("message") or ""})


def _exported(context: dg.AssetExecutionContext, production: ProductionResource, config: ExportConfig,
              datasets: DatasetsResource, name: str, export: Callable[..., dict[str, Any]],
              metadata: Callable[[dict[str, Any], Path], dict[str, Any]]) -> Iterator:
    """One daily export: skipped with its reason (gate off, day not settled), an observation of
    a row-ceiling stop, or the materialization with the common and the asset's own metadata."""
    reason = production.skip_reason()
    if reason:
        context.log.warning(reason)
        return
    start, end, cut = _window(context, production, config)
    if not config.ingested_before and cut > datetime.now(timezone.utc):
        context.log.warning(f"skipped: the window {_iso(start)} .. {_iso(end)} settles at {_iso(cut)} "
                            f"(settle_seconds={production.settle_seconds}); run it after that or give ingested_before")
        return
    dataset = f"{name}-{context.partition_key}"
    context.log.info(f"exporting {dataset}: window {_iso(start)} .. {_iso(end)}, ingested before "
                     f"{cut if isinstance(cut, str) else _iso(cut)}")
    result = _core(export, start, end, name=dataset, ingested_before=cut, datasets_dir=datasets.path,
                   max_rows=config.max_rows or production.max_rows, publish_incomplete=config.publish_incomplete,
                   policy=production.readiness_policy(datasets))
    if not result.get("published"):
        context.log.warning(f"not published: {result['message']}")
        yield _not_published(context.asset_key.to_user_string(), result)
        return
    path = Path(result["path"])
    yield dg.MaterializeResult(metadata={
        "dataset_id": result["dataset_id"], "path": dg.MetadataValue.path(str(path)),
        "window": dg.MetadataValue.json(result["window"]), "snapshot_at": result["snapshot_at"],
        "complete": bool(result["complete"]), "streams": dg.MetadataValue.json(result["streams"]),
        "row_counts": dg.MetadataValue.json(result["row_counts"]),
        "pseudonym_key_id": result["pseudonym_key_id"], "pseudonymized": True, **metadata(result, path)})


def _v5_metadata(result: dict[str, Any], path: Path) -> dict[str, Any]:
    counts, exclusions = result["row_counts"], result["exclusions"]
    return {"dagster/row_count": counts["decisions"], "dagster/column_schema": parquet_schema(path / "decisions.parquet"),
            "battles": counts["battles"], "excluded": exclusions["count"],
            "exclusions": dg.MetadataValue.json(exclusions),
            "labels": dg.MetadataValue.json(result.get("labels") or {}),
            "readiness": dg.MetadataValue.json(result.get("readiness") or {}),
            "rows_chart": dg.MetadataValue.md(bar_chart_md("Rows per table", [
                ("battles", counts["battles"], "#2563eb"), ("decisions", counts["decisions"], "#16a34a"),
                ("metronome", counts.get("metronome", 0), "#9333ea"), ("excluded", exclusions["count"], "#dc2626")]))}


def _returnclock_metadata(result: dict[str, Any], path: Path) -> dict[str, Any]:
    counts = result["counts"]
    return {"dagster/row_count": result["row_counts"]["returnclock"],
            "dagster/column_schema": parquet_schema(path / "returnclock.parquet"),
            "counts": dg.MetadataValue.json(counts), "readiness": dg.MetadataValue.json(result.get("readiness") or {}),
            "excluded_by_reason": dg.MetadataValue.json(result.get("excluded_by_reason") or {}),
            "rows_chart": dg.MetadataValue.md(bar_chart_md("ReturnClock rows", [
                ("organic", counts["organic_rows"], "#16a34a"), ("treated", counts["treated_rows"], "#f59e0b"),
                ("events", counts["events"], "#2563eb"), ("excluded", counts["excluded"], "#dc2626")]))}


@dg.asset(
    **CONVENTIONS, pool=POOL, kinds={"postgres", "parquet"},
    retry_policy=TRANSIENT_RETRY,  # a lost connection is retried; publication is atomic
    description="Pseudonymized V5 export of one UTC day of production battles (`datasets/production-v5-<day>/vN`): "
                "decisions/turns/battles, excluded, metronome, production_battles.",
)
def production_v5_export(context: dg.AssetExecutionContext, config: ExportConfig, production: ProductionResource,
                         datasets: DatasetsResource):
    yield from _exported(context, production, config, datasets, "production-v5",
                         lambda start, end, **kw: export_production_v5_dataset(end, start_at=start,
                                                                               workers=production.workers, **kw),
                         _v5_metadata)


@dg.asset(
    **CONVENTIONS, pool=POOL, kinds={"postgres", "parquet"},
    retry_policy=TRANSIENT_RETRY,  # a lost connection is retried; publication is atomic
    description="ReturnClock export of the player sessions that ended on one UTC day "
                "(`datasets/returnclock-<day>/vN`): natural returns, censoring, treatments kept for audit.",
)
def returnclock_export(context: dg.AssetExecutionContext, config: ExportConfig, production: ProductionResource,
                       datasets: DatasetsResource):
    yield from _exported(context, production, config, datasets, "returnclock", export_returnclock_dataset,
                         _returnclock_metadata)


def _source(context: dg.AssetExecutionContext, asset: str) -> str:
    return upstream_metadata(context, asset, context.partition_key)["dataset_id"]


@dg.asset(
    **CONVENTIONS, deps=[production_v5_export], kinds={"parquet"},
    description="TimeStamp dataset of one day (`datasets/timestamp-<day>/vN`): approved pre-battle inputs, "
                "duration/turn labels and audit times, from the day's production V5 export.",
)
def timestamp_dataset(context: dg.AssetExecutionContext, production: ProductionResource, datasets: DatasetsResource):
    reason = production.skip_reason()
    if reason:
        context.log.warning(reason)
        return
    source = _source(context, "production_v5_export")
    result = _core(export_timestamp_dataset, source, f"timestamp-{context.partition_key}", datasets_dir=datasets.path,
                   policy=production.readiness_policy(datasets))
    path = Path(result["path"])
    counts = result["row_counts"]
    yield dg.MaterializeResult(metadata={
        "dataset_id": result["dataset_id"], "source": source, "path": dg.MetadataValue.path(str(path)),
        "dagster/row_count": counts["inputs"], "dagster/column_schema": parquet_schema(path / "inputs.parquet"),
        "labels_schema": dg.MetadataValue.table_schema(parquet_schema(path / "labels.parquet")),
        "row_counts": dg.MetadataValue.json(counts), "approved_inputs": dg.MetadataValue.json(result["approved_inputs"]),
        "timestamp_ready": bool(result["timestamp_ready"]),
        "timestamp_blockers": dg.MetadataValue.md("\n".join(f"- {b}" for b in result["timestamp_blockers"]) or "none")})


@dg.asset(
    **CONVENTIONS, deps=[production_v5_export], kinds={"parquet"},
    description="Metronome dataset of one day: the metronome table of the day's production V5 export (one row "
                "per human decision with its observed decision_ms), with its readiness. The core writes it as "
                "part of the export; this asset records it and judges metronome_ready.",
)
def metronome_dataset(context: dg.AssetExecutionContext, production: ProductionResource, datasets: DatasetsResource):
    reason = production.skip_reason()
    if reason:
        context.log.warning(reason)
        return
    source = _source(context, "production_v5_export")
    readiness = _core(dataset_readiness, dataset=source, datasets_dir=datasets.path,
                      policy=production.readiness_policy(datasets))
    path = Path(upstream_metadata(context, "production_v5_export", context.partition_key)["path"])
    table = path / "metronome.parquet"
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(table).metadata.num_rows
    blockers = readiness.get("metronome_blockers") or []
    yield dg.MaterializeResult(metadata={
        "dataset_id": source, "table": dg.MetadataValue.path(str(table)), "dagster/row_count": rows,
        "dagster/column_schema": parquet_schema(table), "metronome_ready": bool(readiness.get("metronome_ready")),
        "metronome_blockers": dg.MetadataValue.md("\n".join(f"- {b}" for b in blockers) or "none")})


@dg.asset(
    **CONVENTIONS, deps=[returnclock_export], kinds={"parquet"},
    description="Organic-only ReturnClock train/val/test of one day, grouped by player pseudonym "
                "(`datasets/returnclock-<day>-split/vN`): the only input a ReturnClock trainer reads.",
)
def returnclock_training_split(context: dg.AssetExecutionContext, production: ProductionResource,
                               datasets: DatasetsResource):
    reason = production.skip_reason()
    if reason:
        context.log.warning(reason)
        return
    source = _source(context, "returnclock_export")
    try:
        result = split_returnclock_training_dataset(source, datasets_dir=datasets.path,
                                                    policy=production.readiness_policy(datasets))
    except NotReady as exc:
        context.log.warning(f"skipped: {exc}")
        return
    except RLHFError as exc:
        raise dg.Failure(description=f"[{exc.code}] {exc}", allow_retries=False) from None
    path = Path(result["path"])
    counts, split = result["row_counts"], result["split"]
    yield dg.MaterializeResult(metadata={
        "dataset_id": result["dataset_id"], "source": source, "path": dg.MetadataValue.path(str(path)),
        "dagster/row_count": sum(counts.get(k, 0) for k in ("train", "val", "test")),
        "dagster/column_schema": parquet_schema(path / "train.parquet"),
        "row_counts": dg.MetadataValue.json(counts), "treated_rows_dropped": split["treated_rows_dropped"],
        "split_chart": dg.MetadataValue.md(bar_chart_md("ReturnClock rows per split", [
            (k, counts.get(k, 0), c) for k, c in (("train", "#16a34a"), ("val", "#2563eb"), ("test", "#9333ea"))]))})
