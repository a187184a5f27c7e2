"""``list_datasets``, ``inspect_dataset`` and ``promote_dataset``."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ..core.errors import RLHFError, ValidationFailed
from ..core.names import check_name
from .manifest import read_manifest
from .paths import DatasetsDir, check_pointer_name
from .pointers import list_pointers, manifest_sha256, resolve, write_pointer
from .publish import leftovers
from .validate import validate_dir

__all__ = ["list_datasets", "inspect_dataset", "promote_dataset"]


def _dirs(datasets_dir: Any) -> DatasetsDir:
    return datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)


def _version_row(dirs: DatasetsDir, name: str, version: int) -> dict[str, Any]:
    path = dirs.version_dir(name, version)
    try:
        m = read_manifest(path)
    except RLHFError as exc:
        return {"dataset_id": f"{name}/v{version}", "version": version, "error": {"code": exc.code,
                                                                                  "message": str(exc)}}
    contours = (m.get("readiness") or {}).get("contours") or {}
    return {"dataset_id": f"{name}/v{version}", "version": version, "kind": m.get("kind"),
            "created_at": m.get("created_at"), "row_counts": m.get("row_counts"),
            "bytes": sum(t.get("bytes", 0) for t in (m.get("tables") or {}).values()),
            "ready": {k: v.get("ready") for k, v in contours.items()}}


def list_datasets(*, datasets_dir: Any = "datasets") -> dict[str, Any]:
    """Every dataset with its published versions (kind, row counts, size, and readiness per
    contour as recorded at build time), leftovers of unfinished publications, and the pointers. A dataset folder that resolves outside the datasets dir is listed with its
    error and never read."""
    dirs = _dirs(datasets_dir)
    pointers = list_pointers(dirs)
    out = []
    for name in dirs.names():
        try:
            folder = dirs.dataset_dir(name)
            versions = [_version_row(dirs, name, v) for v in dirs.versions(name)]
        except RLHFError as exc:
            out.append({"name": name, "error": {"code": exc.code, "message": str(exc)}})
            continue
        incomplete = leftovers(folder)
        if not versions and not incomplete:
            continue  # a name whose first publication failed: nothing to show
        out.append({"name": name, "versions": versions,
                    "latest": versions[-1]["dataset_id"] if versions else None,
                    "pointers": sorted(p["pointer"] for p in pointers if p.get("name") == name),
                    "incomplete": incomplete})
    return {"datasets_dir": str(dirs.root), "datasets": out, "pointers": pointers}


def inspect_dataset(dataset: str, *, datasets_dir: Any = "datasets", check_sources: bool = True) -> dict[str, Any]:
    """One version: its manifest, files, the pointers naming it and (``check_sources``)
    whether its source session groups changed since it was materialized (this hashes the
    ``catalog.jsonl`` of each recorded group under the recorded sessions dir, and reports
    only ``unchanged``/``changed``/``missing``)."""
    dirs = _dirs(datasets_dir)
    resolved = resolve(dirs, dataset, allow_stale=True)
    manifest = read_manifest(resolved.path)
    sha = manifest_sha256(resolved.path)
    pointers = []
    for p in list_pointers(dirs):
        if p.get("dataset_id") == resolved.dataset_id:
            pointers.append({"pointer": p["pointer"], "promoted_at": p.get("promoted_at"),
                             "stale": p.get("manifest_sha256") != sha})
    result = {"dataset_id": resolved.dataset_id, "path": str(resolved.path), "kind": manifest.get("kind"),
              "manifest_sha256": sha, "manifest": manifest, "pointers": pointers,
              "versions": [f"{resolved.name}/v{v}" for v in dirs.versions(resolved.name)]}
    if check_sources:
        result["sources_current"] = _sources_current(manifest)
    return result


def _sources_current(manifest: dict[str, Any]) -> list[dict[str, Any]] | None:
    sources = manifest.get("sources") or {}
    if sources.get("kind") != "session_groups":
        return None
    out = []
    for g in sources.get("groups") or []:
        try:
            group = check_name(g.get("group"), "group")
        except RLHFError:
            continue
        path = Path(sources.get("sessions_dir", "")) / group / "catalog.jsonl"
        try:
            now = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            out.append({"group": g["group"], "state": "missing"})
            continue
        out.append({"group": g["group"], "state": "unchanged" if now == g["catalog_sha256"] else "changed"})
    return out


def promote_dataset(dataset: str, pointer: str, *, datasets_dir: Any = "datasets") -> dict[str, Any]:
    """Validate a version and point ``pointer`` at it by atomic replace. Refused
    (``validation_failed``, with the failures) when the version does not validate."""
    dirs = _dirs(datasets_dir)
    check_pointer_name(pointer)
    resolved = resolve(dirs, dataset)
    failures = validate_dir(resolved.path, expected_id=resolved.dataset_id)
    if failures:
        raise ValidationFailed(f"{resolved.dataset_id} fails validation; not promoted: "
                               + "; ".join(f"[{f['code']}] {f['message']}" for f in failures[:3]), failures)
    doc = write_pointer(dirs, pointer, resolved.name, resolved.version, manifest_sha256(resolved.path))
    return {**doc, "path": str(dirs.pointer_path(pointer))}
