"""Checks of the production assets (DESIGN 12.1):

- ``export_complete`` (blocking) and ``latest_refresh`` (WARN) on both exports are evaluated
  by the export's own step (assets.py, "Latest good"), so they carry the partition whatever the
  refresh did; the checks here run after a materialization, i.e. on the day's latest complete
  export.
- ``replay_verified`` (WARN) on ``production_v5_export``: battles the engine could not replay
  (unknown ruleset, illegal action, winner/turn mismatch, missing actions) counted by reason;
  unfinished battles are not replay failures.
- ``no_raw_identifiers`` (blocking) on every production dataset: the raw ids of the window,
  read from the production database (so ``pool="production_db"``), are looked for in every
  file the asset wrote (extrarlhf.production.leaks). Never an id in the result.
- ``organic_only`` (blocking) on ``returnclock_training_split``: no treated session of the
  source export is in any split, and the manifest says organic-only.
"""


from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from extrarlhf.datasets.manifest import read_manifest
from extrarlhf.datasets.paths import DatasetsDir
from extrarlhf.datasets.pointers import resolve
from extrarlhf.production.export import DETAIL as EXCLUSION_REASONS
from extrarlhf.production.leaks import scan_for_identifiers, window_identifiers

from ...metadata import upstream_metadata
from ...partitions import PER_PARTITION_NOTE, expect_partitioned_checks
from ...resources import DatasetsResource, ProductionResource
from .assets import (POOL, production_days, production_nemesis_lite_split, production_nemesis_standard_split,
                     production_v5_export, returnclock_export, returnclock_training_split, timestamp_dataset)

expect_partitioned_checks()

REPLAY_FAILURES = frozenset(EXCLUSION_REASONS) - {"unfinished"}  # unfinished battles are not replayed at all


@dg.asset_check(asset=production_v5_export, partitions_def=production_days,
                description="Every finished battle of the day replays to its recorded winner and turn count "
                            "(excluded battles counted by reason; WARN: they are excluded, never kept)." + PER_PARTITION_NOTE)
def replay_verified(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    meta = upstream_metadata(context.op_execution_context, "production_v5_export", context.partition_key)
    by_reason = (meta.get("exclusions") or {}).get("by_reason") or {}
    failures = {r: n for r, n in by_reason.items() if r in REPLAY_FAILURES}
    return dg.AssetCheckResult(
        passed=not failures, severity=dg.AssetCheckSeverity.WARN,
        description=None if not failures else f"{sum(failures.values())} battles did not replay and were excluded",
        metadata={"dataset_id": meta["dataset_id"], "replay_failures": sum(failures.values()),
                  "by_reason": dg.MetadataValue.json(by_reason),
                  "replay_verified": int((meta.get("exclusions") or {}).get("replay_verified") or 0)})


def _identifier_check(asset: dg.AssetsDefinition, kind: str) -> dg.AssetChecksDefinition:
    name = asset.key.to_user_string()

    @dg.asset_check(asset=asset, name="no_raw_identifiers", partitions_def=production_days, blocking=True, pool=POOL,
                    description=f"No raw player, battle, session or assignment id of the day's window in any "
                                f"file of {name} (Parquet decoded)." + PER_PARTITION_NOTE)
    def check(context: dg.AssetCheckExecutionContext, production: ProductionResource) -> dg.AssetCheckResult:
        meta = upstream_metadata(context.op_execution_context, name, context.partition_key)
        reason = production.skip_reason()
        if reason:
            return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN,
                                       description=f"not verified: {reason}", metadata={"dataset_id": meta["dataset_id"]})
        window = production_days.time_window_for_partition_key(context.partition_key)
        report = scan_for_identifiers(Path(meta["path"]), window_identifiers(kind, window.start, window.end))
        return dg.AssetCheckResult(
            passed=report["clean"], severity=dg.AssetCheckSeverity.ERROR,
            description=None if report["clean"] else "raw identifiers found in written files (names of the "
                                                     "files in findings; the ids are not shown)",
            metadata={"dataset_id": meta["dataset_id"], "files_scanned": report["files_scanned"],
                      "identifiers_scanned": report["identifiers_scanned"],
                      "identifiers_not_scanned": report["identifiers_not_scanned"],
                      "findings": dg.MetadataValue.json(report["findings"])})

    return check


# metronome_dataset writes no file of its own (it is a table of the V5 export, scanned there).
no_raw_identifiers = [_identifier_check(production_v5_export, "v5"), _identifier_check(timestamp_dataset, "v5"),
                      _identifier_check(production_nemesis_lite_split, "v5"),
                      _identifier_check(production_nemesis_standard_split, "v5"),
                      _identifier_check(returnclock_export, "returnclock"),
                      _identifier_check(returnclock_training_split, "returnclock")]


@dg.asset_check(asset=returnclock_training_split, partitions_def=production_days, blocking=True,
                description="The split holds organic rows only: no session the source export marks treated."
                            + PER_PARTITION_NOTE)
def organic_only(context: dg.AssetCheckExecutionContext, datasets: DatasetsResource) -> dg.AssetCheckResult:
    meta = upstream_metadata(context.op_execution_context, "returnclock_training_split", context.partition_key)
    split_path = Path(meta["path"])
    manifest = read_manifest(split_path)
    source = resolve(DatasetsDir(datasets.path), manifest["sources"]["dataset_id"]).path
    export = pq.read_table(source / "returnclock.parquet", columns=["session_key", "treated"])
    treated = export.filter(export.column("treated")).column("session_key").combine_chunks()
    leaked = 0
    for split in ("train", "val", "test"):
        keys = pq.read_table(split_path / f"{split}.parquet", columns=["session_key"]).column("session_key")
        leaked += pc.sum(pc.is_in(keys, value_set=treated).cast(pa.int64())).as_py() or 0
    flagged = bool((manifest.get("split") or {}).get("organic_only"))
    return dg.AssetCheckResult(
        passed=leaked == 0 and flagged, severity=dg.AssetCheckSeverity.ERROR,
        description=None if leaked == 0 and flagged else f"{leaked} treated sessions in the split"
                                                         + ("" if flagged else "; manifest not organic-only"),
        metadata={"dataset_id": meta["dataset_id"], "treated_in_source": len(treated), "treated_in_split": leaked,
                  "manifest_organic_only": flagged})
