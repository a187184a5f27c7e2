"""TimeStamp (battle duration) datasets, fail-closed against target leakage (DESIGN sections 9, 10.1).

:func:`export_timestamp_dataset` derives three separate files from a production V5 export:

- ``inputs.parquet``  what a model may see before the battle: the battle key, both decks
  (card ids and deck ids), the starting player and the approved prebattle features
  (``APPROVED_INPUTS``; all computed from the decks alone);
- ``labels.parquet``  ``duration_seconds`` and ``turns``, the targets;
- ``audit.parquet``   ``started_at``, ``finished_at``, ``ingested_at``.

:func:`load_inputs` is the only loader a trainer or serving adapter gets: it opens
``inputs.parquet`` alone, after validating the dataset, and refuses any column that is not
on the approved list (in the file or in the request), so neither a label nor anything derived
from one can reach a model through it. The full meta object is never handed out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa

import engine

from ..datasets.manifest import write_manifest
from ..datasets.paths import DatasetsDir, check_dataset_name, check_pointer_name
from ..datasets.pointers import PointerStep, manifest_sha256
from ..datasets.publish import publish_version
from ..datasets.tables import SCHEMAS, TIMESTAMP_INPUTS, StreamingTable, iter_batches
from ..datasets.validate import validate_dir, validated_source
from ..errors import InvalidArgument, NotReady, ValidationFailed
from ..readiness import ReadinessPolicy, contour_readiness
from .gate import open_gate

__all__ = ["APPROVED_INPUTS", "LABELS", "export_timestamp_dataset", "load_inputs"]

APPROVED_INPUTS = tuple(column[0] for column in TIMESTAMP_INPUTS)
LABELS = ("duration_seconds", "turns")
AUDIT = ("started_at", "finished_at", "ingested_at")
PREBATTLE_FEATURES = {
    "p1_mean_cost": "mean mana cost of player 1's 30 cards", "p2_mean_cost": "mean mana cost of player 2's 30 cards",
    "p1_creatures": "creature cards in player 1's deck", "p2_creatures": "creature cards in player 2's deck",
}
ROW_GROUP_ROWS = 65_536


def _deck_features(deck: list[int]) -> tuple[float, int]:
    cards = [engine.CARDS[c] for c in deck]
    return sum(c.cost for c in cards) / len(cards), sum(c.type == "creature" for c in cards)


def _not_production(manifest: dict[str, Any]) -> str | None:
    if manifest.get("kind") == "v5_decisions" and (manifest.get("sources") or {}).get("kind") == "production":
        return None
    return (f"is not a production V5 export (kind {manifest.get('kind')!r}, source "
            f"{(manifest.get('sources') or {}).get('kind')!r}); TimeStamp labels exist only in exports of the "
            f"production database (export_production_v5_dataset)")


def _production_source(dirs: DatasetsDir, source: str) -> tuple[Any, dict[str, Any]]:
    resolved, manifest = validated_source(dirs, source, _not_production, "re-export it")
    if not manifest.get("complete", False):
        raise NotReady(f"{resolved.dataset_id} is an incomplete export (stop_reason {manifest.get('stop_reason')!r}); "
                       f"it is never training-ready: export a shorter window", ["incomplete export"])
    return resolved, manifest


def _labelled(folder: Path) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(battles row, production_battles row) of every included battle with an observed
    duration; both tables are in export order, battles holding the included subset."""
    battles = (row for batch in iter_batches(folder / "battles.parquet", ["battle_id", "p1_deck", "p2_deck",
                                                                           "p1_deck_id", "p2_deck_id",
                                                                           "starting_player", "turns"])
               for row in batch.to_pylist())
    for batch in iter_batches(folder / "production_battles.parquet", ["battle_id", "included", "duration_seconds",
                                                                      "started_at", "finished_at", "ingested_at"]):
        for audit in batch.to_pylist():
            if not audit["included"]:
                continue
            row = next(battles)
            if row["battle_id"] != audit["battle_id"]:
                raise ValidationFailed(f"battles and production_battles disagree at battle {row['battle_id']}; "
                                       f"re-export the source")
            if audit["duration_seconds"] is not None and audit["duration_seconds"] > 0:
                yield row, audit


def export_timestamp_dataset(source: str, name: str, *, datasets_dir: str | Path | DatasetsDir = "datasets",
                             overwrite: bool = False, promote: str | None = None,
                             policy: ReadinessPolicy | dict | None = None,
                             environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Write a TimeStamp dataset ``<name>/v<N>`` (inputs, labels, audit) from a production V5
    export (see the module docstring)."""
    open_gate(environ)
    name = check_dataset_name(name)
    if promote is not None:
        check_pointer_name(promote)
    policy = ReadinessPolicy.coerce(policy)
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved, source_manifest = _production_source(dirs, source)
    if name == resolved.name:
        raise InvalidArgument("a TimeStamp dataset is a new dataset: give it another name than its source")
    pointer = PointerStep(dirs, promote, name) if promote else None  # its place is checked before any work

    def build(folder: Path, dataset_id: str, version: int) -> dict[str, Any]:
        writers = {t: StreamingTable(folder / f"{t}.parquet", f"timestamp_{t}", ROW_GROUP_ROWS)
                   for t in ("inputs", "labels", "audit")}
        buffers: dict[str, dict[str, list]] = {t: {n: [] for n in SCHEMAS[f"timestamp_{t}"].names} for t in writers}

        def flush() -> None:
            for table, columns in buffers.items():
                schema = SCHEMAS[f"timestamp_{table}"]
                writers[table].write([pa.array(columns[f.name], f.type) for f in schema])
                for values in columns.values():
                    values.clear()

        rows = 0
        for battle, audit in _labelled(resolved.path):
            key = battle["battle_id"]
            cost1, creatures1 = _deck_features(battle["p1_deck"])
            cost2, creatures2 = _deck_features(battle["p2_deck"])
            values = {"inputs": {"battle_id": key, "p1_deck": battle["p1_deck"], "p2_deck": battle["p2_deck"],
                                 "p1_deck_id": battle["p1_deck_id"], "p2_deck_id": battle["p2_deck_id"],
                                 "starting_player": battle["starting_player"], "p1_mean_cost": cost1,
                                 "p2_mean_cost": cost2, "p1_creatures": creatures1, "p2_creatures": creatures2},
                      "labels": {"battle_id": key, "duration_seconds": audit["duration_seconds"],
                                 "turns": battle["turns"]},
                      "audit": {"battle_id": key, **{k: audit[k] for k in AUDIT}}}
            for table, row in values.items():
                for column, value in row.items():
                    buffers[table][column].append(value)
            rows += 1
            if rows % ROW_GROUP_ROWS == 0:
                flush()
        flush()
        tables = {t: {**w.close(), "table": f"timestamp_{t}"} for t, w in writers.items()}
        evidence = dict((source_manifest.get("readiness") or {}).get("evidence") or {})
        evidence["timestamp_labels"] = rows
        readiness = contour_readiness(evidence, policy)
        block = {"approved_inputs": list(APPROVED_INPUTS), "prebattle_features": PREBATTLE_FEATURES,
                 "labels": list(LABELS), "audit": list(AUDIT), "rows": rows,
                 "loader": "extrarlhf.production.timestamp.load_inputs (inputs.parquet only; refuses any column "
                           "not in approved_inputs)",
                 "leakage_rule": "inputs are known before the battle starts; duration_seconds, turns, "
                                 "finished_at and anything derived from them live in labels/audit only"}
        manifest = write_manifest(
            folder, dataset_id=dataset_id, name=name, version=version, kind="timestamp", tables=tables,
            sources={"kind": "dataset", "dataset_id": resolved.dataset_id,
                     "manifest_sha256": manifest_sha256(resolved.path),
                     "production": {k: (source_manifest.get("production") or {}).get(k)
                                    for k in ("window", "snapshot_at")}},
            readiness=readiness,
            extra={"timestamp": block, "pseudonymized": True, "anonymous": False,
                   "pseudonym_key_id": source_manifest.get("pseudonym_key_id")})
        return {"kind": "timestamp", "source": resolved.dataset_id, "row_counts": manifest["row_counts"],
                "approved_inputs": list(APPROVED_INPUTS), "timestamp_ready": readiness["timestamp_ready"],
                "timestamp_blockers": readiness["timestamp_blockers"]}

    result = publish_version(dirs, name, build, overwrite=overwrite, validate=validate_dir, before_commit=pointer)
    result["pointer"] = pointer.doc if pointer else None
    return result


def load_inputs(dataset: str, *, columns: list[str] | None = None,
                datasets_dir: str | Path | DatasetsDir = "datasets") -> pa.Table:
    """The approved model inputs of a TimeStamp dataset (and nothing else); see the module docstring."""
    if columns is not None:
        refused = [c for c in columns if c not in APPROVED_INPUTS]
        if refused:
            raise InvalidArgument(f"column(s) {refused} are not approved TimeStamp inputs (labels and audit never "
                                  f"reach a model); approved: {list(APPROVED_INPUTS)}")
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved, _manifest = validated_source(
        dirs, dataset, lambda m: None if m.get("kind") == "timestamp" else
        f"is a {m.get('kind')} dataset; load_inputs reads TimeStamp datasets only (export_timestamp_dataset)",
        "re-export it")
    import pyarrow.parquet as pq

    path = resolved.path / "inputs.parquet"
    present = pq.ParquetFile(path).schema_arrow.names
    extra = [c for c in present if c not in APPROVED_INPUTS]
    if extra:
        raise ValidationFailed(f"{resolved.dataset_id}: inputs.parquet holds column(s) {extra} that are not approved "
                               f"inputs; refusing to load it (a label or audit column must never reach a model)")
    return pq.ParquetFile(path).read(columns=list(columns) if columns is not None else list(APPROVED_INPUTS))
