"""TimeStamp (battle duration) datasets, fail-closed against target leakage (DESIGN sections 9, 10.1).

:func:`export_timestamp_dataset` derives three separate files from a production V5 export:

- ``inputs.parquet``  what a model may see before the battle: the row's key, both decks
  (card ids and deck ids), the starting player and the approved prebattle features
  (``APPROVED_INPUTS``; all computed from the decks alone, datasets/prebattle.py);
- ``labels.parquet``  ``duration_seconds`` and ``turns``, the targets;
- ``audit.parquet``   ``started_at``, ``finished_at``, ``ingested_at``.

**Row keys.** The three files key their rows with this dataset's own id, not the source's
battle key: the source export holds the labels (``battles.turns``,
``production_battles.duration_seconds``), so its key in ``inputs.parquet`` would give them back
by one join. A row's key is ``"t-" + hex(HMAC-SHA256(K, "timestamp-row:" + source battle
key))[:32]`` with ``K = HMAC-SHA256(salt, "timestamp-dataset" NUL dataset_id NUL source
manifest_sha256)``: the pseudonym salt (the gate is open for the export) keyed by this dataset's
identity, so two TimeStamp datasets (two names, or two versions of one) never share a key, the
same dataset id built from the same source gives the same bytes, and nobody without the salt
can map a row to a battle; ``K`` is written nowhere.
Rows are in key order within each row group of ``ROW_GROUP_ROWS`` (a keyed shuffle), so
their positions do not follow the source's order either. The decks are in both datasets, so
whoever holds the source can still match rows by deck pair: the source stays in private
storage, away from TimeStamp trainers.

:func:`load_inputs` is the only loader a trainer or serving adapter gets: it opens
``inputs.parquet`` alone, after validating the dataset, and refuses any column that is not
on the approved list (in the file or in the request), so neither a label nor anything derived
from one can reach a model through it. The full meta object is never handed out.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa

from ..core.errors import Cancelled, InvalidArgument, NotReady, ValidationFailed
from ..core.readiness import ReadinessPolicy, contour_readiness
from ..datasets.manifest import write_manifest
from ..datasets.paths import DatasetsDir, check_dataset_name, check_pointer_name
from ..datasets.pointers import PointerStep, manifest_sha256
from ..datasets.prebattle import PREBATTLE_FEATURES, derived_inputs
from ..datasets.publish import publish_version
from ..datasets.tables import SCHEMAS, TIMESTAMP_INPUTS, StreamingTable, iter_batches
from ..datasets.validate import validate_dir, validated_source
from .gate import open_gate
from .pseudonyms import keyed_ids

__all__ = ["APPROVED_INPUTS", "LABELS", "ROW_KEY_RULE", "export_timestamp_dataset", "load_inputs", "row_key_secret"]

APPROVED_INPUTS = tuple(column[0] for column in TIMESTAMP_INPUTS)
LABELS = ("duration_seconds", "turns")
AUDIT = ("started_at", "finished_at", "ingested_at")
ROW_GROUP_ROWS = 65_536
ROW_KEY_RULE = ("t- + hex(HMAC-SHA256(K, 'timestamp-row:' + source battle_id))[:32], K = HMAC-SHA256(salt, "
                "'timestamp-dataset' NUL dataset_id NUL sources.manifest_sha256); K is not stored")


def row_key_secret(salt: bytes, dataset_id: str, source_manifest_sha256: str) -> bytes:
    """``K`` of the row keys (module docstring): the salt keyed by this dataset's identity."""
    message = b"\0".join((b"timestamp-dataset", dataset_id.encode(), source_manifest_sha256.encode()))
    return hmac.new(salt, message, hashlib.sha256).digest()


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
                             environ: dict[str, str] | None = None,
                             cancel: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Write a TimeStamp dataset ``<name>/v<N>`` (inputs, labels, audit) from a production V5
    export (see the module docstring). ``cancel()`` true stops it (nothing published)."""
    access = open_gate(environ)  # its salt keys the rows (module docstring)
    name = check_dataset_name(name)
    if promote is not None:
        check_pointer_name(promote)
    policy = ReadinessPolicy.coerce(policy)
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved, source_manifest = _production_source(dirs, source)
    if name == resolved.name:
        raise InvalidArgument("a TimeStamp dataset is a new dataset: give it another name than its source")
    pointer = PointerStep(dirs, promote, name) if promote else None  # its place is checked before any work
    source_sha = manifest_sha256(resolved.path)

    def build(folder: Path, dataset_id: str, version: int) -> dict[str, Any]:
        writers = {t: StreamingTable(folder / f"{t}.parquet", f"timestamp_{t}", ROW_GROUP_ROWS)
                   for t in ("inputs", "labels", "audit")}
        secret = row_key_secret(access.salt, dataset_id, source_sha)
        pending: list[tuple[dict[str, Any], dict[str, Any]]] = []

        def flush() -> None:
            """Key the pending rows, sort them by key and write a row group per table."""
            keys = keyed_ids(secret, "t", "timestamp-row", [battle["battle_id"] for battle, _ in pending])
            ordered = sorted(zip(keys, pending), key=lambda row: row[0])
            keys = [key for key, _ in ordered]
            battles = [battle for _, (battle, _) in ordered]
            audits = [audit for _, (_, audit) in ordered]
            derived = derived_inputs([b["p1_deck"] for b in battles], [b["p2_deck"] for b in battles])
            columns = {"inputs": {"battle_id": keys, **{c: [b[c] for b in battles] for c in
                                                        ("p1_deck", "p2_deck", "starting_player")}, **derived},
                       "labels": {"battle_id": keys, "duration_seconds": [a["duration_seconds"] for a in audits],
                                  "turns": [b["turns"] for b in battles]},
                       "audit": {"battle_id": keys, **{c: [a[c] for a in audits] for c in AUDIT}}}
            for table, values in columns.items():
                writers[table].write([pa.array(values[f.name], f.type) for f in SCHEMAS[f"timestamp_{table}"]])
            pending.clear()

        rows = 0
        for battle, audit in _labelled(resolved.path):
            pending.append((battle, audit))
            rows += 1
            if cancel is not None and cancel():
                raise Cancelled(f"TimeStamp export {name} cancelled after {rows} rows; nothing was published")
            if len(pending) == ROW_GROUP_ROWS:
                flush()
        flush()
        tables = {t: {**w.close(), "table": f"timestamp_{t}"} for t, w in writers.items()}
        evidence = dict((source_manifest.get("readiness") or {}).get("evidence") or {})
        evidence["timestamp_labels"] = rows
        readiness = contour_readiness(evidence, policy)
        block = {"approved_inputs": list(APPROVED_INPUTS), "prebattle_features": PREBATTLE_FEATURES,
                 "labels": list(LABELS), "audit": list(AUDIT), "rows": rows,
                 "row_key": {"rule": ROW_KEY_RULE, "joins": "this dataset's inputs, labels and audit only",
                             "why": "the source export holds the labels: its battle key would give them back by "
                                    "one join; rows are in key order within each row group, not the source's"},
                 "loader": "extrarlhf.production.timestamp.load_inputs (inputs.parquet only; refuses any column "
                           "not in approved_inputs)",
                 "leakage_rule": "inputs are known before the battle starts; duration_seconds, turns, "
                                 "finished_at and anything derived from them live in labels/audit only"}
        manifest = write_manifest(
            folder, dataset_id=dataset_id, name=name, version=version, kind="timestamp", tables=tables,
            sources={"kind": "dataset", "dataset_id": resolved.dataset_id,
                     "manifest_sha256": source_sha,
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
