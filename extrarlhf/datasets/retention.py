"""Trace retention (DESIGN 6.1): once a validated, published dataset version holds a battle,
its raw trace may be kept compact only, or its whole group deleted. Opt-in: nothing here runs
unless asked (``extrarlhf retention prune``, the MCP tool ``prune_traces``, the Dagster op
``prune_traces``); ``make improve`` prunes its own loop groups (``--keep-traces`` keeps them).

**Covered.** A battle is covered when a published ``v5_decisions`` version in the datasets dir
lists it in its ``battles`` table with the catalog's three sha256 digests (so the version
holds the rows of exactly those bytes), and that version validates (``validate_dir``: every
file's checksum, every table's schema and counts). Battles a version left out (unfinished,
abandoned, degraded, corrupt: its ``excluded`` table) are not covered, and neither is a group
no version names.

**What is done** (``keep``):

- ``compact`` (default): every covered battle of the group is stored compact
  (``*.jsonl.zst``, trace_files.py: the same bytes to every reader, about 17x smaller);
- ``none``: a group whose every traced battle is covered is deleted, under the group's lease
  (a group a series or a repair owns is left alone and reported); a group with any battle not
  covered is only compacted, with the reason. A deleted group is renamed out of sight in one
  step (``.<group>..pruned-<token>``, a name no listing shows) and then removed; a leftover of
  a killed prune is removed by the next one.

Every action is appended to ``<sessions>/retention.jsonl`` (group, action, battles, the
dataset versions that cover it, bytes before and after). ``dry_run`` reports what would be
done and writes nothing.
"""

from __future__ import annotations

import os
import secrets
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from ..core.errors import GroupBusy, InvalidArgument, RLHFError
from ..core.fileio import append_line_locked
from ..runtime import ownership, trace_files
from ..runtime.sessions import SessionStore
from .paths import DatasetsDir

__all__ = ["prune_traces", "KEEP", "covered_battles"]

KEEP = ("compact", "none")
LOG = "retention.jsonl"
PRUNED_MARK = "..pruned-"
DIGESTS = ("meta.jsonl", "turns.jsonl", "actions.jsonl")


def covered_battles(dirs: DatasetsDir, groups: set[str] | None = None) -> tuple[dict, list[dict[str, Any]]]:
    """``{(group, battle_id): (digests, [dataset ids])}`` over the published, valid
    ``v5_decisions`` versions naming any of ``groups`` (None: all), and the versions skipped
    with their reason."""
    import pyarrow.parquet as pq

    from .manifest import read_manifest
    from .validate import validate_dir

    covered: dict[tuple[str, str], tuple[tuple[str, str, str], list[str]]] = {}
    skipped = []
    for name in dirs.names():
        try:
            versions = dirs.versions(name)
        except RLHFError:
            continue
        for version in versions:
            dataset_id = f"{name}/v{version}"
            folder = dirs.version_dir(name, version)
            try:
                manifest = read_manifest(folder)
            except RLHFError as exc:
                skipped.append({"dataset_id": dataset_id, "reason": f"manifest unreadable: {exc}"})
                continue
            sources = manifest.get("sources") or {}
            named = {g.get("group") for g in sources.get("groups") or [] if isinstance(g, dict)}
            if manifest.get("kind") != "v5_decisions" or sources.get("kind") != "session_groups":
                continue
            if groups is not None and not named & groups:
                continue
            failures = validate_dir(folder, expected_id=dataset_id)
            if failures:
                skipped.append({"dataset_id": dataset_id, "reason": f"does not validate ({failures[0].get('code')}: "
                                                                    f"{failures[0].get('message')})"})
                continue
            table = pq.read_table(folder / "battles.parquet",
                                  columns=["group", "battle_id", "meta_sha256", "turns_sha256", "actions_sha256"])
            for row in table.to_pylist():
                key = (row["group"], row["battle_id"])
                digests = (row["meta_sha256"], row["turns_sha256"], row["actions_sha256"])
                held = covered.setdefault(key, (digests, []))
                if held[0] == digests:
                    held[1].append(dataset_id)
    return covered, skipped


def _stored_bytes(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                pass
    return total


def _all_compact(v5: Path) -> bool:
    return all(path.name.endswith(trace_files.SUFFIX) for name, path in trace_files.stored_files(v5).items()
               if name in trace_files.COMPACT_FILES)


def _remove_leftovers(root: Path) -> None:
    if root.is_dir():
        for child in root.iterdir():
            if child.name.startswith(".") and PRUNED_MARK in child.name and child.is_dir():
                shutil.rmtree(child, ignore_errors=True)


def _group_plan(store: SessionStore, group: str, covered: dict) -> dict[str, Any]:
    battles = traced = 0
    holders: set[str] = set()
    covered_keys = []
    for e in store.iter_latest(group):  # streamed: never every entry at once (a million-battle group)
        battles += 1
        if not e.get("files"):
            continue
        traced += 1
        held = covered.get((group, e["battle_id"]))
        if held and held[0] == tuple(e["files"][name] for name in DIGESTS):
            covered_keys.append((e["index"], e["battle_id"]))
            holders.update(held[1])
    return {"group": group, "battles": battles, "traced": traced, "covered": len(covered_keys),
            "covered_ids": [b for _, b in sorted(covered_keys)], "datasets": sorted(holders),
            "unfinished": battles - traced}


def prune_traces(*, sessions_dir: str | os.PathLike[str] = "sessions",
                 datasets_dir: str | os.PathLike[str] | DatasetsDir = "datasets", groups: list[str] | None = None,
                 keep: str = "compact", dry_run: bool = False,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Apply the retention policy (module docstring) to ``groups`` (None: every group of the
    sessions dir); returns per group what was (or, ``dry_run``, would be) done and the bytes
    freed."""
    if keep not in KEEP:
        raise InvalidArgument(f"keep must be one of {', '.join(KEEP)} (compact: keep compact copies of covered "
                              f"battles; none: delete groups a published version wholly holds), got {keep!r}")
    if not isinstance(dry_run, bool):
        raise InvalidArgument(f"dry_run must be true or false, got {dry_run!r}")
    store = SessionStore(sessions_dir)
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    if groups is None:
        names = store.list_groups()
    else:
        if not isinstance(groups, list) or not groups:
            raise InvalidArgument("groups must be a non-empty list of group names (or omitted for every group)")
        names = []
        for group in groups:
            store.read_manifest(group)  # refused with the groups that exist when it does not
            names.append(group)
    if not dry_run:
        _remove_leftovers(store.root)
    covered, skipped = covered_battles(dirs, set(names))
    out: list[dict[str, Any]] = []
    for done, group in enumerate(names, 1):
        plan = _group_plan(store, group, covered)
        folder = store.confine_group(group)
        before = _stored_bytes(folder)
        row = {k: v for k, v in plan.items() if k != "covered_ids"}
        row["bytes_before"] = before
        if not plan["covered"]:
            row.update(action="none", reason="no valid published dataset version holds any of its battles",
                       bytes_after=before)
        elif keep == "none" and plan["covered"] == plan["traced"]:
            row.update(action="deleted", bytes_after=0,
                       reason=f"every traced battle is held by {', '.join(plan['datasets'])}")
            if not dry_run:
                row.update(_delete_group(store, group))
        else:
            if keep == "none":
                row["reason"] = (f"{plan['traced'] - plan['covered']} traced battles are held by no valid published "
                                 f"version: only the covered ones are compacted")
            plain = [b for b in plan["covered_ids"] if not _all_compact(store.battle_dir(group, b) / "v5")]
            row["action"] = "compacted" if plain else "already_compact"
            row["compacted"] = len(plain)
            if not dry_run:
                for battle_id in plain:
                    trace_files.compact_battle(store.battle_dir(group, battle_id) / "v5")
                row["bytes_after"] = _stored_bytes(folder)
            else:
                row["bytes_after"] = None if plain else before  # known once done
        if not dry_run and row["action"] not in ("none", "already_compact"):
            append_line_locked(store.root / LOG, _log_line(row, keep))
        out.append(row)
        if progress:
            progress(done, len(names))
    freed = sum(r["bytes_before"] - r["bytes_after"] for r in out if r.get("bytes_after") is not None)
    return {"sessions_dir": str(store.root), "datasets_dir": str(dirs.root), "keep": keep, "dry_run": dry_run,
            "groups": out, "bytes_freed": freed, "datasets_skipped": skipped,
            "log": None if dry_run else str(store.root / LOG)}


def _delete_group(store: SessionStore, group: str) -> dict[str, Any]:
    """Delete a group under its lease: one rename out of sight, then the removal."""
    try:
        lease = ownership.acquire(store, group, purpose="retention", heartbeat=False)
    except GroupBusy as exc:
        return {"action": "none", "reason": f"not deleted: {exc}", "bytes_after": None}
    with lease:
        hidden = store.root / f".{group}{PRUNED_MARK}{secrets.token_hex(4)}"
        os.rename(store.group_dir(group), hidden)
    shutil.rmtree(hidden, ignore_errors=True)
    return {}


def _log_line(row: dict[str, Any], keep: str) -> str:
    import json

    doc = {"schema_version": 1, "at": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"), "keep": keep,
           **{k: row.get(k) for k in ("group", "action", "battles", "traced", "covered", "datasets", "bytes_before",
                                      "bytes_after", "reason")}}
    return json.dumps(doc, separators=(",", ":"))
