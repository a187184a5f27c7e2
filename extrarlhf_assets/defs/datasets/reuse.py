"""Reusing a published dataset version instead of writing an identical one.

Re-materializing an asset whose sources did not change (same session catalog, same source
dataset manifest, same engine) would publish a new version with the same rows. The assets
ask :func:`reusable_version` first and report ``reused: true`` with the version they kept."""

from pathlib import Path
from typing import Any, Callable

import engine
from extrarlhf.core.errors import RLHFError
from extrarlhf.datasets import inspect_dataset, validate_dataset


def reusable_version(datasets_dir: Path, name: str,
                     same_sources: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    """The latest version of dataset ``name`` when it was written by this engine from the same
    sources (``same_sources(inspect_dataset(...))``) and still validates, else ``None``.
    Returns ``{"dataset_id", "path", "manifest", "validation"}``."""
    try:
        info = inspect_dataset(name, datasets_dir=datasets_dir, check_sources=True)
    except RLHFError:  # no version yet, or a damaged one: build a fresh version
        return None
    manifest = info["manifest"]
    written_by = manifest.get("code_version") or {}
    if (manifest.get("obs_version"), manifest.get("ruleset"), written_by.get("engine")) != (
            engine.OBS_VERSION, engine.RULESET, engine.ENGINE_VERSION) or not same_sources(info):
        return None
    report = validate_dataset(info["dataset_id"], datasets_dir=datasets_dir)
    if not report["valid"]:
        return None
    return {"dataset_id": info["dataset_id"], "path": info["path"], "manifest": manifest, "validation": report}


def same_session_group(group: str, sessions_dir: Path) -> Callable[[dict[str, Any]], bool]:
    """A V5 dataset built from exactly ``group``'s current catalog under ``sessions_dir``, with default options."""
    def check(info: dict[str, Any]) -> bool:
        manifest = info["manifest"]
        sources = manifest.get("sources") or {}
        current = info.get("sources_current") or []
        return (manifest.get("kind") == "v5_decisions"
                and [g.get("group") for g in sources.get("groups") or []] == [group]
                and Path(sources.get("sessions_dir", "")) == sessions_dir.resolve()
                and bool(current) and all(s["state"] == "unchanged" for s in current)
                and not (manifest.get("options") or {}).get("exclude_corrupt", False))
    return check


def same_source_dataset(kind: str, source_id: str, source_manifest_sha256: str,
                        split: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """A split of kind ``kind`` made from exactly this source version (manifest hash) with these split settings."""
    def check(info: dict[str, Any]) -> bool:
        manifest = info["manifest"]
        sources = manifest.get("sources") or {}
        written = manifest.get("split") or {}
        return (manifest.get("kind") == kind and sources.get("dataset_id") == source_id
                and sources.get("manifest_sha256") == source_manifest_sha256
                and all(written.get(k) == v for k, v in split.items()))
    return check
