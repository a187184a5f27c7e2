"""Versions of a production export (DESIGN 12.2): an identical re-export reuses the version it
would copy, and each export name has a ``latest complete`` pointer.

- **Reuse.** An export builds its version in a temp folder as usual; just before the commit
  point, under the dataset's publication lock, :func:`identical_version` compares what would be
  published with the name's latest version: the manifest with the run's own facts left out
  (``created_at``, ``dataset_id``, ``version``, every ``snapshot_at``, a default
  ``ingested_before`` (derived from the snapshot time), the measured memory, the git commit), so every file hash, row
  count, window, readiness and option must be equal. Equal, and that version still validates:
  the temp folder is dropped, no version directory is made, and the result says
  ``reused: true`` with that version. The latest complete export is compared too when it is
  not the latest version (a complete re-export after an incomplete one reuses the complete
  one). Another window, other rows or another policy: a new version.
- **Latest complete.** ``<name>.complete`` (:func:`complete_pointer`, an ordinary promoted
  pointer in ``<datasets>/pointers/``, so ``@production-v5-2026-11-25.complete`` resolves
  anywhere a dataset reference is taken) is written atomically, as the publication's last step,
  when a complete export is published or reused. An incomplete export published on request
  (``publish_incomplete``) never moves it, so a later failed or incomplete refresh never hides
  the complete one: readers (the Dagster assets, ``export-timestamp @NAME.complete``) use it
  rather than the latest version. :func:`latest_complete` reads it (None when there is none).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from ..core.errors import InvalidArgument, RLHFError
from ..datasets.manifest import read_manifest
from ..datasets.paths import DatasetsDir
from ..datasets.pointers import manifest_sha256, read_pointer, resolve, write_pointer

__all__ = ["COMPLETE_SUFFIX", "complete_pointer", "content_digest", "identical_version", "latest_complete",
           "Reused", "complete_step"]

COMPLETE_SUFFIX = ".complete"
_NAME_MAX = 64  # core.names: a pointer name is one path component of at most 64 characters
_RUN_FACTS = frozenset({"created_at", "dataset_id", "version", "snapshot_at"})


def complete_pointer(name: str) -> str:
    """The name of dataset ``name``'s latest-complete pointer (``<name>.complete``)."""
    if len(name) + len(COMPLETE_SUFFIX) > _NAME_MAX:
        raise InvalidArgument(f"dataset name {name!r} is too long for a production export: its latest-complete "
                              f"pointer {name}{COMPLETE_SUFFIX} must fit in {_NAME_MAX} characters (use at most "
                              f"{_NAME_MAX - len(COMPLETE_SUFFIX)})")
    return name + COMPLETE_SUFFIX


def _content(value: Any, parent: str = "") -> Any:
    """The manifest without the facts of the run that wrote it (see the module docstring)."""
    if isinstance(value, dict):
        snapshot_cut = bool(value.get("ingested_before_is_default") or value.get("ingested_before_is_snapshot"))
        return {k: _content(v, k) for k, v in value.items()
                if k not in _RUN_FACTS and not (snapshot_cut and k == "ingested_before")
                and not (parent == "memory" and k == "measured") and not (parent == "code_version"
                                                                           and k == "git_commit")}
    if isinstance(value, list):
        return [_content(v, parent) for v in value]
    return value


def content_digest(manifest: dict[str, Any]) -> str:
    """sha256 of what a manifest says about the data (its run's own facts left out)."""
    text = json.dumps(_content(manifest), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Reused(Exception):
    """Raised from a build whose result equals an existing version (publish_version then drops
    its temp folder); carries that version and the build's result."""

    def __init__(self, version: int, path: Path, result: dict[str, Any]) -> None:
        super().__init__(f"identical to v{version}")
        self.version, self.path, self.result = version, path, result

    def publication(self, name: str) -> dict[str, Any]:
        """The export's result as publish_version's would be, for the reused version."""
        return {**self.result, "dataset_id": f"{name}/v{self.version}", "name": name, "version": self.version,
                "path": str(self.path), "replaced": False, "recovered": [], "card": None, "reused": True}


def identical_version(dirs: DatasetsDir, name: str, manifest: dict[str, Any],
                      validate: Callable[[Path], list[dict[str, Any]]]) -> tuple[int, Path] | None:
    """``(version, path)`` of ``name``'s latest version, or else of its latest complete export,
    when it holds what ``manifest`` describes (:func:`content_digest`) and still validates, else
    None. Call it under the dataset's publication lock (from a publish_version build)."""
    versions = dirs.versions(name)
    if not versions:
        return None
    complete = latest_complete(dirs, name)
    digest = content_digest(manifest)
    for version in dict.fromkeys([max(versions), *([complete["version"]] if complete else [])]):
        path = dirs.version_dir(name, version)
        try:
            candidate = read_manifest(path)
        except RLHFError:  # damaged or of an older format: not reused
            continue
        if content_digest(candidate) == digest and not validate(path):
            return version, path
    return None


def complete_step(dirs: DatasetsDir, name: str) -> Callable[[Path, dict[str, Any], int], None]:
    """The publication step (``before_commit``) writing ``<name>.complete`` for a complete build
    only. Nothing is touched before it runs: an export refused earlier leaves the datasets dir
    as it was."""
    pointer = complete_pointer(name)

    def step(path: Path, built: dict[str, Any], version: int) -> None:
        if built["complete"]:
            write_pointer(dirs, pointer, name, version, manifest_sha256(path))
    return step


def latest_complete(datasets_dir: str | Path | DatasetsDir, name: str) -> dict[str, Any] | None:
    """``{"dataset_id", "path", "version", "promoted_at", "pointer"}`` of dataset ``name``'s latest
    complete export, or None when it has none (no pointer yet, or its version is gone or was
    overwritten since: ``stale``)."""
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    pointer = complete_pointer(name)
    if not dirs.pointer_path(pointer).exists():
        return None
    try:
        doc = read_pointer(dirs, pointer)
        found = resolve(dirs, f"@{pointer}")
    except RLHFError:
        return None
    return {"dataset_id": found.dataset_id, "path": str(found.path), "version": found.version,
            "promoted_at": doc.get("promoted_at"), "pointer": pointer}
