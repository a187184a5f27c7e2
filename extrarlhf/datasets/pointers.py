"""Promoted pointers (``<datasets>/pointers/<pointer>.json``) and reference resolution.

A pointer names one published version and records the sha256 of its ``manifest.json``
when it was promoted; a version overwritten afterwards no longer matches, and resolving the
pointer then fails (``stale_pointer``) instead of silently serving other data. A pointer is
replaced atomically (temp file, fsync, rename) under a lock, so readers see the old or the
new pointer, never a mix.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import RLHFError
from ..fileio import atomic_write_json, locked, read_json_document
from ..runtime.trace import utc_now
from .paths import DatasetRef, DatasetsDir, parse_ref

POINTER_SCHEMA_VERSION = 1
MANIFEST = "manifest.json"

__all__ = ["POINTER_SCHEMA_VERSION", "Resolved", "read_pointer", "write_pointer", "resolve", "manifest_sha256",
           "list_pointers"]


def manifest_sha256(version_dir: Path) -> str:
    return hashlib.sha256((version_dir / MANIFEST).read_bytes()).hexdigest()


def read_pointer(dirs: DatasetsDir, pointer: str) -> dict[str, Any]:
    return read_json_document(dirs.pointer_path(pointer), POINTER_SCHEMA_VERSION, what="pointer ",
                              missing=f"pointer {pointer!r} does not exist (promote a dataset to it first)")


def list_pointers(dirs: DatasetsDir) -> list[dict[str, Any]]:
    folder = Path(dirs.real_root()) / "pointers"
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        name = path.name[:-len(".json")]
        try:
            out.append(read_pointer(dirs, name))
        except RLHFError as exc:
            out.append({"pointer": name, "error": {"code": exc.code, "message": str(exc)}})
    return out


def write_pointer(dirs: DatasetsDir, pointer: str, name: str, version: int, sha256: str) -> dict[str, Any]:
    """Point ``pointer`` at ``name/v<version>`` atomically; returns the new pointer document
    (with ``previous``: the dataset_id it named before, or null)."""
    path = dirs.pointer_path(pointer, create_root=True)
    path.parent.mkdir(exist_ok=True)
    path = dirs.pointer_path(pointer)  # re-check now that the folder exists
    with locked(path):
        previous = None
        if path.exists():
            try:
                previous = read_pointer(dirs, pointer).get("dataset_id")
            except RLHFError:
                previous = None
        doc = {"schema_version": POINTER_SCHEMA_VERSION, "pointer": pointer, "dataset_id": f"{name}/v{version}",
               "name": name, "version": version, "manifest_sha256": sha256, "promoted_at": utc_now(),
               "previous": previous}
        atomic_write_json(path, doc)
    return doc


@dataclass
class Resolved:
    """A dataset reference resolved to one published version."""

    name: str
    version: int
    path: Path
    pointer: dict[str, Any] | None = None
    stale: bool = False

    @property
    def dataset_id(self) -> str:
        return f"{self.name}/v{self.version}"


def resolve(dirs: DatasetsDir, ref: Any, *, allow_stale: bool = False) -> Resolved:
    """Resolve ``NAME``, ``NAME/vN`` or ``@POINTER`` to a published version, confined."""
    parsed = parse_ref(ref) if not isinstance(ref, DatasetRef) else ref
    doc = None
    if parsed.pointer:
        doc = read_pointer(dirs, parsed.pointer)
        parsed = parse_ref(doc["dataset_id"])
    name, version = dirs.locate(parsed)
    path = dirs.version_dir(name, version)
    stale = bool(doc) and manifest_sha256(path) != doc.get("manifest_sha256")
    if stale and not allow_stale:
        raise RLHFError(f"pointer {doc['pointer']!r} is stale: {name}/v{version} was overwritten after it was "
                        f"promoted (its manifest no longer matches); validate the version and promote it again",
                        "stale_pointer")
    return Resolved(name, version, path, doc, stale)
