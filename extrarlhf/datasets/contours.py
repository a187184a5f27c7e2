"""``dataset_readiness``: every training contour of DESIGN section 9, for a session group or a
published dataset, with its blockers (the judging itself is extrarlhf/core/readiness.py).

- A **session group** is judged from its folded catalog: eligible = finished, non-degraded
  battles in which the omniscient view was never shown, whose trace files still hash to their catalog digests (``verify=True``, the
  default, re-hashes them; a mismatch blocks every contour as an integrity failure).
- A **dataset** is judged from its manifest's evidence after a full validation
  (``validate_dataset``); any validation failure blocks every contour.

Session data is headless or local: Nemesis Standard, Metronome and TimeStamp are never
ready from it, and their blockers say why. The one exception: a readiness policy that sets
``metronome_arena_labels`` counts the observed think times of browser-arena battles (human
groups; ``meta.audit.think_times``) toward Metronome.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import engine

from ..core.errors import InvalidArgument
from ..core.names import check_name
from ..core.readiness import ReadinessPolicy, contour_readiness
from ..runtime import trace_files
from ..runtime.sessions import SessionStore
from .manifest import read_manifest
from .materialize import GroupSnapshot, arena_think_times, snapshot_group
from .paths import DatasetsDir
from .pointers import resolve
from .validate import validate_dir

__all__ = ["dataset_readiness", "group_evidence"]

MAX_LISTED = 5


def group_evidence(store: SessionStore, group: str, *, verify: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    """(evidence, source) of a session group."""
    snap = snapshot_group(store, group)
    try:
        return _evidence(store, group, snap, verify)
    finally:
        snap.close()


def _evidence(store: SessionStore, group: str, snap: GroupSnapshot, verify: bool) \
        -> tuple[dict[str, Any], dict[str, Any]]:
    eligible = decisions = 0
    decks: set[str] = set()
    problems: list[str] = []
    obs_version = snap.manifest.get("obs_version")
    if obs_version != engine.OBS_VERSION:
        problems.append(f"group obs_version {obs_version!r} differs from this engine's {engine.OBS_VERSION}")
    unverified = arena_labels = 0
    configuration = snap.manifest.get("configuration") or {}
    human = configuration.get("p1_actor_type") == "human"  # only a human's think times are ever observed
    for entry in snap.entries():  # read again from the open catalog: never all held
        battle_id, files = entry["battle_id"], entry.get("files")
        if entry["status"] != "finished" or entry.get("degraded") or entry.get("omniscient_peeks"):
            continue
        if verify:
            bad = _bad_files(store.battle_dir(group, battle_id) / "v5", files or {})
            if bad:
                unverified += 1
                if unverified <= MAX_LISTED:
                    problems.append(f"battle {battle_id}: {bad} does not match its catalog digest")
                continue
        eligible += 1
        decisions += entry.get("decisions") or 0
        decks.update(entry.get("deck_ids") or ())
        if human:
            arena_labels += arena_think_times(store.battle_dir(group, battle_id))
    if unverified > MAX_LISTED:
        problems.append(f"... {unverified - MAX_LISTED} more battles fail their catalog digests")
    evidence = {"source_kind": "session_group", "eligible_battles": eligible, "eligible_decisions": decisions,
                "distinct_decks": len(decks), "human_vs_human_battles": 0, "human_vs_human_decks": 0,
                "metronome_labels": 0, "arena_metronome_labels": arena_labels, "timestamp_labels": 0,
                "verified": verify,
                "unverified_battles": unverified, "integrity_failures": problems}
    source = {**snap.source(), "kind": "session_group", "battle_tag": configuration.get("battle_tag"),
              "sessions_dir": str(store.root.resolve())}
    return evidence, {k: source[k] for k in ("kind", "group", "sessions_dir", "catalog_sha256", "catalog_lines",
                                              "battles", "by_status", "battle_tag")}


def _bad_files(v5: Path, files: dict[str, str]) -> str | None:
    for name in trace_files.TRACE_FILES:
        try:
            digest = hashlib.sha256(trace_files.read(v5, name)).hexdigest()
        except FileNotFoundError:
            return f"{name} (missing)"
        except trace_files.CompactFileError:
            return f"{name} (damaged compact file)"
        if digest != files.get(name):
            return name
    return None


def dataset_readiness(group: str | None = None, dataset: str | None = None, *, sessions_dir: Any = "sessions",
                      datasets_dir: Any = "datasets", policy: ReadinessPolicy | dict | None = None,
                      verify: bool = True) -> dict[str, Any]:
    """Readiness of every contour for one session ``group`` or one ``dataset`` reference
    (exactly one of them). Returns ``{"source": {...}, "policy", "evidence",
    "v5_policy_training_ready", "v5_policy_blockers", "training_ready", "training_ready_scope",
    "nemesis_lite_ready", ..., "contours": {name: {"ready", "blockers"}}}``."""
    if (group is None) == (dataset is None):
        raise InvalidArgument("give exactly one of group (a session group) or dataset (a dataset reference)")
    policy = ReadinessPolicy.coerce(policy)
    if group is not None:
        evidence, source = group_evidence(SessionStore(sessions_dir), check_name(group, "group"), verify=verify)
        return {"source": source, **contour_readiness(evidence, policy)}
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved = resolve(dirs, dataset)
    failures = validate_dir(resolved.path, expected_id=resolved.dataset_id)
    try:
        manifest = read_manifest(resolved.path)
    except Exception:  # noqa: BLE001 - reported through the validation failures
        manifest = {}
    evidence = dict((manifest.get("readiness") or {}).get("evidence") or {"source_kind": "dataset"})
    problems = list(evidence.get("integrity_failures") or [])
    problems += [f"validation [{f['code']}] {f['message']}" for f in failures[:MAX_LISTED]]
    if len(failures) > MAX_LISTED:
        problems.append(f"... {len(failures) - MAX_LISTED} more validation failures (validate_dataset lists them)")
    evidence["integrity_failures"] = problems
    source = {"kind": "dataset", "dataset_id": resolved.dataset_id, "dataset_kind": manifest.get("kind"),
              "path": str(resolved.path), "valid": not failures,
              "groups": [g.get("group") for g in (manifest.get("sources") or {}).get("groups") or []]}
    return {"source": source, **contour_readiness(evidence, policy)}
