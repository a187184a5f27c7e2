"""A dataset version's ``manifest.json``: what it is, where it came from, what it holds.

Written last into the version's temp folder (after every Parquet file is closed), so a
manifest present means the files it lists were complete when it was written;
``validate_dataset`` re-checks every recorded hash, count and schema.
"""

from __future__ import annotations

import functools
import json
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

import engine

from ..core.clock import utc_now
from ..core.errors import CorruptRecord, UnsupportedSchema, corrupt_record
from ..core.fileio import read_json_document
from ..runtime.records import kind as shown
from .tables import DATASET_SCHEMA_VERSION, FORMAT_CHANGES, TABLES, describe_columns, sha256_file

MANIFEST = "manifest.json"
KINDS = ("v5_decisions", "v5_policy_split", "nemesis_lite_split", "nemesis_standard_split", "timestamp",
         "returnclock_export", "returnclock_split", "preference_pairs")

__all__ = ["MANIFEST", "KINDS", "PRIVACY_KEYS", "code_version", "privacy_of", "write_manifest", "read_manifest"]


@functools.lru_cache(maxsize=1)
def code_version() -> dict[str, Any]:
    """Versions of the code that wrote a dataset: package, engine, ruleset, and the git commit
    of the source tree when it is a git checkout (null otherwise)."""
    try:
        package = metadata.version("extrarlhf")
    except metadata.PackageNotFoundError:
        package = None
    commit = None
    try:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                              capture_output=True, text=True, timeout=5)
        if proc.returncode == 0 and len(proc.stdout.strip()) == 40:
            commit = proc.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return {"extrarlhf": package, "engine": engine.ENGINE_VERSION, "ruleset": engine.RULESET,
            "git_commit": commit}


PRIVACY_KEYS = ("pseudonymized", "anonymous", "pseudonym_key_id")


def privacy_of(manifest: dict[str, Any]) -> dict[str, Any]:
    """What a dataset made from ``manifest``'s must carry on: a pseudonymized source's
    ``pseudonymized``, ``anonymous`` (False) and ``pseudonym_key_id``; nothing for other data."""
    return {k: manifest.get(k) for k in PRIVACY_KEYS} if manifest.get("pseudonymized") else {}


def write_manifest(folder: Path, *, dataset_id: str, name: str, version: int, kind: str,
                   tables: dict[str, dict[str, Any]], sources: dict[str, Any], readiness: dict[str, Any],
                   extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Hash every file of the folder's tables and write ``manifest.json`` (returns it).

    ``tables`` maps a logical name (``decisions``, ``train``...) to ``{"file", "rows",
    "row_groups", "table"}`` where ``table`` names its column layout in tables.TABLES, and
    ``arrow_bytes`` (the rows' Arrow size as written, :class:`StreamingTable`) when known.
    """
    described = {}
    files = {}
    for logical, info in tables.items():
        path = folder / info["file"]
        sha = sha256_file(path)
        files[info["file"]] = sha
        described[logical] = {
            "file": info["file"], "table": info["table"], "rows": info["rows"],
            "row_groups": pq.ParquetFile(path).metadata.num_row_groups, "bytes": path.stat().st_size,
            "sha256": sha, "columns": describe_columns(TABLES[info["table"]]),
        }
        if isinstance(info.get("arrow_bytes"), int):
            described[logical]["arrow_bytes"] = info["arrow_bytes"]
    manifest = {
        "schema_version": DATASET_SCHEMA_VERSION,
        "dataset_id": dataset_id,
        "name": name,
        "version": version,
        "kind": kind,
        "created_at": utc_now(),
        "code_version": code_version(),
        "ruleset": engine.RULESET,
        "obs_version": engine.OBS_VERSION,
        "obs_dim": engine.OBS_DIM,
        "action_feature_dim": engine.ACTION_FEATURE_DIM,
        "sources": sources,
        "row_counts": {k: v["rows"] for k, v in described.items()},
        "files": files,
        "tables": described,
        "readiness": readiness,
        **(extra or {}),
    }
    text = json.dumps(manifest, ensure_ascii=False, sort_keys=True, indent=2) + "\n"
    (folder / MANIFEST).write_text(text, encoding="utf-8")
    return manifest


def read_manifest(folder: Path) -> dict[str, Any]:
    """The version's manifest; one of an older dataset format is refused with what changed
    since and how to rebuild it, one whose fields readers rely on are malformed (``"tables":
    null``...) is ``corrupt_record`` naming the field (any other problem: read_json_document's
    error)."""
    path = folder / MANIFEST
    try:
        doc = read_json_document(path, DATASET_SCHEMA_VERSION, what="dataset ")
    except UnsupportedSchema:
        version = _format_of(path)
        if version is None or not 1 <= version < DATASET_SCHEMA_VERSION:
            raise
    else:
        _check_shape(doc, path)
        return doc
    changes = "; ".join(f"format {v}: {FORMAT_CHANGES[v]}" for v in range(version + 1, DATASET_SCHEMA_VERSION + 1))
    raise UnsupportedSchema(f"{path}: dataset format {version} was written by an earlier ExtraRLHF; this one reads "
                            f"format {DATASET_SCHEMA_VERSION} ({changes}). Rebuild it from its sources: publish a new "
                            f"version (datasets materialize, a split or an export), or this one with overwrite")


_FIX = ("the manifest was edited or damaged: restore it from a backup, or publish the version again from its "
        "sources (with overwrite)")


def _check_shape(doc: dict[str, Any], path: Path) -> None:
    """The fields every reader of a manifest relies on have their shape (dataset_manifest.schema.json),
    else CorruptRecord naming the file and the field: a reader never fails on, say, ``"tables": null``."""
    def bad(field: str, why: str) -> CorruptRecord:
        return corrupt_record(why, path=path, field=field, hint=_FIX)

    for key in ("kind", "dataset_id"):
        if not isinstance(doc.get(key), str):
            raise bad(key, f"must be text, got {shown(doc.get(key))}")
    for key in ("sources", "readiness", "row_counts", "files", "tables"):
        if not isinstance(doc.get(key), dict):
            raise bad(key, f"must be an object, got {shown(doc.get(key))}")
    for name, count in doc["row_counts"].items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise bad(f"row_counts.{name}", f"must be a count of rows, got {shown(count)}")
    for name, sha in doc["files"].items():
        if not isinstance(sha, str):
            raise bad(f"files.{name}", f"must be a sha256 hex digest, got {shown(sha)}")
    for logical, info in doc["tables"].items():
        if not isinstance(info, dict):
            raise bad(f"tables.{logical}", f"must be an object (file, table, rows, sha256...), got {shown(info)}")
        for key, want in (("file", str), ("table", str), ("sha256", str), ("rows", int)):
            value = info.get(key)
            if not isinstance(value, want) or isinstance(value, bool) or (want is int and value < 0):
                raise bad(f"tables.{logical}.{key}", f"must be {'a count' if want is int else 'text'}, got "
                                                     f"{shown(value)}")


def _format_of(path: Path) -> int | None:
    """The integer ``schema_version`` of a manifest file, None when it has none."""
    try:
        version = json.loads(path.read_text(encoding="utf-8")).get("schema_version")
    except (OSError, ValueError, AttributeError):
        return None
    return None if isinstance(version, bool) or not isinstance(version, int) else version
