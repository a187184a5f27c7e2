"""Production assets (DESIGN 12.1): daily exports of the game backend's database and the
datasets derived from them, each a thin call of the core (``extrarlhf.production``).

- ``production_v5_export`` / ``returnclock_export``: one partition per UTC day; the window is
  the day, ``ingested_before`` the run config's or the window's end plus the resource's
  settle delay. They are the only steps that read the production database, so they carry
  ``pool="production_db"`` (the instance caps concurrent reads; deploy/dagster.yaml).
- ``timestamp_dataset``, ``metronome_dataset`` (from the V5 export) and
  ``returnclock_training_split`` (organic-only train/val/test of the ReturnClock export).
- ``production_nemesis_lite_split`` / ``production_nemesis_standard_split`` (DESIGN 12.3): the
  battle-grouped Nemesis splits of the day's V5 export (``split_nemesis_training_dataset``, view
  lite / standard). Each judges its contour first (WARN check ``nemesis_lite_ready`` /
  ``nemesis_standard_ready``, blockers and evidence as metadata); not ready, it records why
  (``metadata.skipped``: an observation) and materializes nothing. Standard keeps
  human-vs-human rows only, so production days are the only place it can ever be ready:
  a session group never has such rows (DESIGN 9).

Fail closed, never red: with the gate off every asset logs ``skipped: production disabled
(missing: VAR, ...)`` and emits no materialization (downstream assets skip in turn); a day
not yet settled, an export stopped by the row ceiling or a dataset that is not ready are
reported the same way, with their reason. Metadata carry counts, schemas, the window and
the public key id: never the DSN, the salt or a raw id.

Latest good (DESIGN 12.2). A materialization of an export's partition means "a complete
export became, or remains, the day's latest complete one" (the core's ``<name>.complete``
pointer, extrarlhf.production.versions): a complete export, published or reused
(``reused: true``: a re-run identical to the latest version writes no copy). A refresh that
does not end with a complete export never materializes, so it can neither hide an earlier
complete export nor show an incomplete one as green. Dagster marks a partition failed when
the latest run that planned it failed without materializing it, so:

- the day has a complete export: a failed refresh (database unreachable after the retries, a
  read error, the row ceiling, an incomplete export published on request) logs an error,
  records an observation ``refresh_failed`` (the error code, the core's message, never a DSN or
  a secret, the version still shown) and fails the WARN check ``latest_refresh``; the step
  succeeds, so the partition stays green over the good export;
- the day has none: the step fails (red) with the reason as the Failure's metadata; a row
  ceiling stop that published nothing is an outcome (the partition stays missing).

The in-step checks ``export_complete`` (blocking: the day has a complete export, and which)
and ``latest_refresh`` carry the partition in every one of these cases. Downstream assets read
the day's ``<name>.complete`` export, never merely the latest version.
"""


from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import dagster as dg

import engine
from extrarlhf.core.errors import NotReady, RLHFError
from extrarlhf.core.readiness import ReadinessPolicy, contour_readiness
from extrarlhf.datasets import DEFAULT_FRACTIONS, DEFAULT_SPLIT_KEY, dataset_readiness, split_nemesis_training_dataset
from extrarlhf.datasets.assign import SPLITS
from extrarlhf.datasets.pointers import manifest_sha256
from extrarlhf.production import (
    export_production_v5_dataset,
    export_returnclock_dataset,
    export_timestamp_dataset,
    split_returnclock_training_dataset,
)
from extrarlhf.production.export import _iso
from extrarlhf.production.versions import latest_complete

from ...metadata import OWNERS, TRANSIENT_RETRY, bar_chart_md, column_lineage, parquet_schema, skipped, table_schema
from ...partitions import PER_PARTITION_NOTE, expect_partitioned_checks
from ...resources import DatasetsResource, ProductionResource
from ..datasets.reuse import reusable_version, same_source_dataset

expect_partitioned_checks()

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
    """What the timeline shows for an export the row ceiling stopped on a day with no complete
    export: nothing published, or a version written for inspection only (``publish_incomplete``)."""
    return dg.AssetObservation(asset_key=kind, metadata={
        "published": bool(result.get("published")), "dataset_id": result.get("dataset_id") or "none",
        "stop_reason": result.get("stop_reason") or "none",
        "stopped_stream": result.get("stopped_stream") or "none", "max_rows": result.get("max_rows") or 0,
        "streams": dg.MetadataValue.json(result.get("streams") or {}),
        "message": result.get("message") or _incomplete(result)})


def refresh_check_specs(asset: str) -> list[dg.AssetCheckSpec]:
    """The checks an export's own step evaluates, on the day's latest complete export."""
    return [dg.AssetCheckSpec("export_complete", asset=asset, blocking=True, partitions_def=production_days,
                              description="The day has a complete export (row ceiling not hit), the one the "
                                          "partition shows (`<name>.complete`); an incomplete export is never "
                                          "shown or built on." + PER_PARTITION_NOTE),
            dg.AssetCheckSpec("latest_refresh", asset=asset, partitions_def=production_days,
                              description="The day's last refresh ended with the export shown (published or "
                                          "reused). WARN when it failed or was incomplete while an earlier "
                                          "complete export is still shown (named)." + PER_PARTITION_NOTE)]


def _day_checks(asset: str, shown: dict[str, Any] | None, failed: str | None,
                outcome: bool = False) -> list[dg.AssetCheckResult]:
    """``export_complete`` and ``latest_refresh`` of the day: ``shown`` is its latest complete
    export (None: none), ``failed`` why the last refresh did not end with it (None: it did).
    ``outcome``: nothing complete, and nothing was published either (a row-ceiling stop): WARN,
    since an ERROR failure of a blocking check fails the step."""
    shown_id = shown["dataset_id"] if shown else "none"
    return [dg.AssetCheckResult(
                asset_key=asset, check_name="export_complete", passed=shown is not None,
                severity=dg.AssetCheckSeverity.WARN if outcome else dg.AssetCheckSeverity.ERROR,
                metadata={"latest_complete": shown_id},
                description=None if shown else f"no complete export of this day: {failed}"),
            dg.AssetCheckResult(
                asset_key=asset, check_name="latest_refresh", passed=failed is None,
                severity=dg.AssetCheckSeverity.WARN, metadata={"latest_complete": shown_id,
                                                               "refresh_failed": failed or "no"},
                description=None if failed is None else f"the last refresh failed ({failed}); the partition "
                                                         f"shows {shown_id}")]


def _incomplete(result: dict[str, Any]) -> str:
    where = f" (stream {result.get('stopped_stream')})" if result.get("stopped_stream") else ""
    written = f"; {result['dataset_id']} was written for inspection only" if result.get("published") else ""
    return f"row_ceiling: the export is incomplete{where}{written}"


def _exported(context: dg.AssetExecutionContext, production: ProductionResource, config: ExportConfig,
              datasets: DatasetsResource, name: str, export: Callable[..., dict[str, Any]],
              metadata: Callable[[dict[str, Any], Path], dict[str, Any]]) -> Iterator:
    """One daily export: skipped with its reason (gate off, day not settled), the materialization
    of a complete export (published or reused) with the common and the asset's own metadata, or
    a refresh that did not end with one (see the module docstring, "Latest good")."""
    reason = production.skip_reason()
    if reason:
        context.log.warning(reason)
        return
    start, end, cut = _window(context, production, config)
    if not config.ingested_before and cut > datetime.now(timezone.utc):
        context.log.warning(f"skipped: the window {_iso(start)} .. {_iso(end)} settles at {_iso(cut)} "
                            f"(settle_seconds={production.settle_seconds}); run it after that or give ingested_before")
        return
    asset = context.asset_key.to_user_string()
    dataset = f"{name}-{context.partition_key}"
    kept = latest_complete(datasets.path, dataset)
    context.log.info(f"exporting {dataset}: window {_iso(start)} .. {_iso(end)}, ingested before "
                     f"{cut if isinstance(cut, str) else _iso(cut)}")
    try:
        result = export(start, end, name=dataset, ingested_before=cut, datasets_dir=datasets.path,
                        max_rows=config.max_rows or production.max_rows,
                        publish_incomplete=config.publish_incomplete, policy=production.readiness_policy(datasets))
    except RLHFError as exc:  # the core's errors are free of secrets; only an unreachable database is retried
        transient = exc.code == "production_unavailable"
        retry = transient and context.retry_number < TRANSIENT_RETRY.max_retries
        if kept is None or retry:
            if not retry:  # the last attempt: the day's checks say why it has nothing
                yield from _day_checks(asset, None, f"{exc.code}: {exc}")
            # the last attempt fails as itself (not retryable), so that the step's final failure, the
            # last thing on the run's page, is this error and not the retry policy's "Exceeded max_retries"
            tried = f" (after {context.retry_number} retries)" if transient and context.retry_number else ""
            raise dg.Failure(description=f"[{exc.code}] {exc}{tried}", allow_retries=retry,
                             metadata={"error_code": exc.code, "latest_complete": "none" if kept is None else
                                       kept["dataset_id"]}) from None
        yield from _refresh_failed(context, asset, kept, exc.code, str(exc))
        return
    if not result["published"] or not result["complete"]:
        if kept is not None:
            yield from _refresh_failed(context, asset, kept, "row_ceiling", _incomplete(result), result)
            return
        yield _not_published(asset, result)
        yield from _day_checks(asset, None, _incomplete(result), outcome=not result["published"])
        if not result["published"]:  # an outcome: nothing was written, the partition stays missing
            context.log.warning(f"not published: {result['message']}")
            return
        raise dg.Failure(
            description=f"{result['dataset_id']} is incomplete (the row ceiling was hit on stream "
                        f"{result['stopped_stream']}): published for inspection only, never shown or built on; "
                        f"this day has no complete export. Export it with a higher max_rows (at most 1,000,000)",
            metadata={"dataset_id": result["dataset_id"], "stop_reason": "row_ceiling",
                      "stopped_stream": result["stopped_stream"] or "none", "latest_complete": "none"},
            allow_retries=False)
    path = Path(result["path"])
    verb = "reused" if result["reused"] else "published"
    context.log.info(f"{verb} {result['dataset_id']}: the day's latest complete export")
    yield dg.MaterializeResult(
        metadata={
            "dataset_id": result["dataset_id"], "version": result["version"], "reused": bool(result["reused"]),
            "latest_complete": result["latest_complete"]["dataset_id"], "path": dg.MetadataValue.path(str(path)),
            "window": dg.MetadataValue.json(result["window"]), "snapshot_at": result["snapshot_at"],
            "complete": True, "streams": dg.MetadataValue.json(result["streams"]),
            "row_counts": dg.MetadataValue.json(result["row_counts"]),
            "pseudonym_key_id": result["pseudonym_key_id"], "pseudonymized": True, **metadata(result, path)},
        check_results=_day_checks(asset, result["latest_complete"], None),
        data_version=dg.DataVersion(manifest_sha256(path)))


def _refresh_failed(context: dg.AssetExecutionContext, asset: str, kept: dict[str, Any], code: str, why: str,
                    result: dict[str, Any] | None = None) -> Iterator:
    """A refresh that did not end with a complete export while ``kept`` is the day's latest
    complete one: logged as an error, observed, and the partition keeps showing ``kept``."""
    context.log.error(f"refresh failed ({code}): {why}. The partition keeps showing {kept['dataset_id']}, the "
                      f"day's latest complete export; fix the cause and materialize the partition again")
    yield dg.AssetObservation(asset_key=asset, metadata={
        "refresh_failed": code, "reason": why, "latest_complete": kept["dataset_id"],
        "incomplete_version": (result or {}).get("dataset_id") or "none",
        "streams": dg.MetadataValue.json((result or {}).get("streams") or {})})
    yield from _day_checks(asset, kept, f"{code}: {why}")


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


def _export_asset(key: str, description: str) -> Callable:
    """A daily export: one asset whose own step evaluates the day's checks (refresh_check_specs).
    A one-asset ``multi_asset`` with ``can_subset``, because only then may a step that skips
    (gate off, day not settled) emit neither the materialization nor the check results."""
    spec = dg.AssetSpec(key, description=description, skippable=True, kinds={"postgres", "parquet"},
                        **{k: v for k, v in CONVENTIONS.items() if k != "output_required"})
    # a lost connection is retried; publication is atomic
    return dg.multi_asset(name=key, specs=[spec], check_specs=refresh_check_specs(key), can_subset=True, pool=POOL,
                          retry_policy=TRANSIENT_RETRY)


@_export_asset("production_v5_export",
               "Pseudonymized V5 export of one UTC day of production battles (`datasets/production-v5-<day>/vN`): "
               "decisions/turns/battles, excluded, metronome, production_battles.")
def production_v5_export(context: dg.AssetExecutionContext, config: ExportConfig, production: ProductionResource,
                         datasets: DatasetsResource):
    yield from _exported(context, production, config, datasets, "production-v5",
                         lambda start, end, **kw: export_production_v5_dataset(end, start_at=start,
                                                                               workers=production.workers, **kw),
                         _v5_metadata)


@_export_asset("returnclock_export",
               "ReturnClock export of the player sessions that ended on one UTC day "
               "(`datasets/returnclock-<day>/vN`): natural returns, censoring, treatments kept for audit.")
def returnclock_export(context: dg.AssetExecutionContext, config: ExportConfig, production: ProductionResource,
                       datasets: DatasetsResource):
    yield from _exported(context, production, config, datasets, "returnclock", export_returnclock_dataset,
                         _returnclock_metadata)


def _source(context: dg.AssetExecutionContext, production: ProductionResource, datasets: DatasetsResource,
            export: str) -> dict[str, Any] | None:
    """The day's latest complete export ``<export>-<day>`` (never merely its latest version), or
    None (logged): the production gate is closed, or the day has none, so there is nothing to
    build on."""
    reason = production.skip_reason()
    if reason:
        context.log.warning(reason)
        return None
    found = latest_complete(datasets.path, f"{export}-{context.partition_key}")
    if found is None:
        context.log.warning(f"skipped: {export}-{context.partition_key} has no complete export "
                            f"(materialize the day's export first)")
    return found


def _reusable(datasets: DatasetsResource, name: str, kind: str, source: dict[str, Any]) -> dict[str, Any] | None:
    """The latest ``name`` version made from exactly this source version (as the local splits do)."""
    return reusable_version(datasets.path, name, same_source_dataset(kind, source["dataset_id"],
                                                                     manifest_sha256(Path(source["path"])), {}))


@dg.asset(
    **CONVENTIONS, deps=[production_v5_export], kinds={"parquet"},
    description="TimeStamp dataset of one day (`datasets/timestamp-<day>/vN`): approved pre-battle inputs, "
                "duration/turn labels and audit times, from the day's production V5 export.",
)
def timestamp_dataset(context: dg.AssetExecutionContext, production: ProductionResource, datasets: DatasetsResource):
    found = _source(context, production, datasets, "production-v5")
    if found is None:
        return
    source, name = found["dataset_id"], f"timestamp-{context.partition_key}"
    policy = production.readiness_policy(datasets)
    kept = _reusable(datasets, name, "timestamp", found)
    if kept is not None:
        # readiness under the current policy, from the evidence the kept version recorded
        readiness = contour_readiness(kept["manifest"]["readiness"].get("evidence") or {}, ReadinessPolicy.coerce(policy))
        result = {"dataset_id": kept["dataset_id"], "path": kept["path"], "row_counts": kept["manifest"]["row_counts"],
                  "approved_inputs": kept["manifest"]["timestamp"]["approved_inputs"],
                  "timestamp_ready": readiness["timestamp_ready"], "timestamp_blockers": readiness["timestamp_blockers"]}
    else:
        result = _core(export_timestamp_dataset, source, name, datasets_dir=datasets.path, policy=policy)
    path = Path(result["path"])
    counts = result["row_counts"]
    yield dg.MaterializeResult(metadata={
        "dataset_id": result["dataset_id"], "source": source, "reused": kept is not None,
        "path": dg.MetadataValue.path(str(path)),
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
    found = _source(context, production, datasets, "production-v5")
    if found is None:
        return
    source = found["dataset_id"]
    readiness = _core(dataset_readiness, dataset=source, datasets_dir=datasets.path,
                      policy=production.readiness_policy(datasets))
    table = Path(found["path"]) / "metronome.parquet"
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
    found = _source(context, production, datasets, "returnclock")
    if found is None:
        return
    source = found["dataset_id"]
    kept = _reusable(datasets, f"{source.rsplit('/', 1)[0]}-split", "returnclock_split", found)
    try:
        result = {"dataset_id": kept["dataset_id"], "path": kept["path"], "row_counts": kept["manifest"]["row_counts"],
                  "split": kept["manifest"]["split"]} if kept else split_returnclock_training_dataset(
            source, datasets_dir=datasets.path, policy=production.readiness_policy(datasets))
    except NotReady as exc:
        context.log.warning(f"skipped: {exc}")
        return
    except RLHFError as exc:
        raise dg.Failure(description=f"[{exc.code}] {exc}", allow_retries=False) from None
    path = Path(result["path"])
    counts, split = result["row_counts"], result["split"]
    yield dg.MaterializeResult(metadata={
        "dataset_id": result["dataset_id"], "source": source, "reused": kept is not None,
        "path": dg.MetadataValue.path(str(path)),
        "dagster/row_count": sum(counts.get(k, 0) for k in ("train", "val", "test")),
        "dagster/column_schema": parquet_schema(path / "train.parquet"),
        "row_counts": dg.MetadataValue.json(counts), "treated_rows_dropped": split["treated_rows_dropped"],
        "split_chart": dg.MetadataValue.md(bar_chart_md("ReturnClock rows per split", [
            (k, counts.get(k, 0), c) for k, c in (("train", "#16a34a"), ("val", "#2563eb"), ("test", "#9333ea"))]))})


# Nemesis splits of the day's V5 export (DESIGN 12.3): contour, readiness key, blockers key, what enters
NEMESIS_VIEWS = {
    "lite": ("nemesis_lite_ready", "nemesis_lite_ready", "nemesis_lite_blockers", "any eligible battle"),
    "standard": ("nemesis_standard_ready", "training_ready_standard", "standard_readiness_blockers",
                 "human-vs-human rows only"),
}


def nemesis_split_key(view: str) -> str:
    return f"production_nemesis_{view}_split"


def _nemesis_split_asset(view: str, description: str, check_description: str) -> Callable:
    """A day's Nemesis split: a one-asset ``multi_asset`` with ``can_subset`` (as the exports), so
    that a step that skips before judging readiness (gate off, no complete export) emits neither
    the materialization nor its readiness check; once judged, the WARN check is always emitted."""
    key = nemesis_split_key(view)
    spec = dg.AssetSpec(key, description=description, deps=[production_v5_export], skippable=True,
                        kinds={"parquet"}, **{k: v for k, v in CONVENTIONS.items() if k != "output_required"})
    check = dg.AssetCheckSpec(NEMESIS_VIEWS[view][0], asset=key, partitions_def=production_days,
                              description=check_description + PER_PARTITION_NOTE)
    return dg.multi_asset(name=key, specs=[spec], check_specs=[check], can_subset=True)


def _nemesis_split(context: dg.AssetExecutionContext, production: ProductionResource, datasets: DatasetsResource,
                   view: str) -> Iterator:
    """The ``view`` split of the day's latest complete V5 export: skipped with its reason while the
    gate is off or the day has no complete export; judged (the WARN check, with the blockers and
    the evidence) and skipped -- an observation ``skipped_reasons``, no materialization, the run
    succeeds -- while the contour is not ready; else split by the core (battle-grouped, default
    fractions and key), reusing the version made from the same export version."""
    found = _source(context, production, datasets, "production-v5")
    if found is None:
        return
    asset = context.asset_key.to_user_string()
    check_name, ready_key, blockers_key, pairs = NEMESIS_VIEWS[view]
    source, policy = found["dataset_id"], production.readiness_policy(datasets)
    readiness = _core(dataset_readiness, dataset=source, datasets_dir=datasets.path, policy=policy)
    blockers = [] if readiness[ready_key] else list(readiness[blockers_key])
    evidence = readiness["evidence"]
    judged = {"dataset_id": source, ready_key: not blockers, blockers_key: _blockers_md(blockers),
              "evidence": dg.MetadataValue.json(evidence),
              "human_vs_human_battles": int(evidence.get("human_vs_human_battles") or 0),
              "human_vs_human_decks": int(evidence.get("human_vs_human_decks") or 0)}
    check = dg.AssetCheckResult(asset_key=asset, check_name=check_name, passed=not blockers,
                                severity=dg.AssetCheckSeverity.WARN, metadata={**judged, "blockers":
                                                                               _blockers_md(blockers)},
                                description=None if not blockers else f"not ready: {'; '.join(blockers)}")
    if blockers:
        yield check
        yield skipped(context, blockers)
        return
    name = f"{source.rsplit('/', 1)[0]}-nemesis-{view}"
    settings = {"view": view, "group_by": "battle", "split_key": DEFAULT_SPLIT_KEY,
                "fractions": dict(zip(SPLITS, DEFAULT_FRACTIONS))}
    source_path = Path(found["path"])
    kept = reusable_version(datasets.path, name, same_source_dataset(
        f"nemesis_{view}_split", source, manifest_sha256(source_path), settings))
    if kept is not None:
        split_id, path, counts = kept["dataset_id"], Path(kept["path"]), kept["manifest"]["row_counts"]
        context.log.info(f"{source} is unchanged since {split_id} was split from it: kept that version")
    else:
        try:
            result = split_nemesis_training_dataset(source, view=view, name=name, datasets_dir=datasets.path,
                                                    policy=policy)
        except NotReady as exc:  # judged ready above; the core judges again from the same evidence
            yield check
            yield skipped(context, exc.blockers or [str(exc)])
            return
        except RLHFError as exc:
            raise dg.Failure(description=f"[{exc.code}] {exc}", allow_retries=False) from None
        split_id, path, counts = result["dataset_id"], Path(result["path"]), result["row_counts"]
        context.log.info(f"split {source} into {split_id}: {counts}")
    schema = table_schema(path, "train")  # train, val and test share one layout
    decisions = {c.name for c in table_schema(source_path, "decisions").columns}
    title = f"Nemesis {view.capitalize()} rows per split"
    yield dg.MaterializeResult(
        asset_key=asset,
        metadata={
            "split_chart": dg.MetadataValue.md(bar_chart_md(title, [
                (k, counts.get(k, 0), c) for k, c in zip(SPLITS, ("#16a34a", "#2563eb", "#9333ea"))])),
            "dataset_id": split_id, "source": source, "reused": kept is not None,
            "path": dg.MetadataValue.path(str(path)), "view": view, "pairs": pairs,
            "dagster/row_count": sum(counts.get(k, 0) for k in SPLITS),  # rows of the split tables only
            "dagster/column_schema": schema,
            "dagster/column_lineage": column_lineage(schema, "production_v5_export", decisions),
            "row_counts": dg.MetadataValue.json(counts), "assignments": counts.get("assignments", 0),
            **{k: v for k, v in judged.items() if k != "dataset_id"}},
        check_results=[check])


def _blockers_md(blockers: list[str]) -> dg.MetadataValue:
    return dg.MetadataValue.md("\n".join(f"- {b}" for b in blockers) or "none")


@_nemesis_split_asset(
    "lite",
    "Battle-grouped Nemesis Lite train/val/test of one day (`datasets/production-v5-<day>-nemesis-lite/vN`): "
    "opponent modelling from every eligible battle of the day's complete V5 export (human-human, human-bot, "
    "model-model).",
    "Nemesis Lite readiness of the day's export (eligible battles, distinct decks). WARN: not ready means the "
    "day has too few battles; the split is skipped with the blockers.")
def production_nemesis_lite_split(context: dg.AssetExecutionContext, production: ProductionResource,
                                  datasets: DatasetsResource):
    yield from _nemesis_split(context, production, datasets, "lite")


@_nemesis_split_asset(
    "standard",
    "Battle-grouped Nemesis Standard train/val/test of one day "
    "(`datasets/production-v5-<day>-nemesis-standard/vN`): human-vs-human rows only (viewer and opponent "
    "both human), built only while `training_ready_standard` holds; skipped with its blockers otherwise. "
    "Production human-vs-human battles are the only source that can ever make it ready.",
    "`training_ready_standard` of the day's export: enough human-vs-human battles and distinct decks "
    "(`min_nemesis_standard_battles`, `min_nemesis_standard_decks`). WARN: not ready is an outcome; the split "
    "is skipped with the blockers.")
def production_nemesis_standard_split(context: dg.AssetExecutionContext, production: ProductionResource,
                                      datasets: DatasetsResource):
    yield from _nemesis_split(context, production, datasets, "standard")
