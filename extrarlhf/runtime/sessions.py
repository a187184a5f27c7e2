"""The on-disk session layout (DESIGN section 6): writer and reader.

```
<sessions>/agents_index.json                codename leases (see codenames.py)
<sessions>/<group>/manifest.json            what the group is
<sessions>/<group>/summary.json             aggregates, readiness
<sessions>/<group>/catalog.jsonl            one line per battle event (started, then final status)
<sessions>/<group>/battles/<battle_id>/v5/{meta,turns,actions}.jsonl
```

The catalog is an append-only log: a battle gets a ``started`` line when it begins and a
final line (``finished``, ``abandoned`` or ``crashed``) once its trace is in place; readers
fold it by ``battle_id``, so a battle whose process died shows as ``unfinished``. Battle
folders appear by an atomic rename of a complete temp folder. Every file carries a
``schema_version`` and readers refuse versions they do not know.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import engine

from ..errors import GroupConflict, InvalidArgument, NotFound, UnsupportedSchema
from ..fileio import append_line_locked, atomic_write_json, check_version, fsync_dir, locked, read_json_document
from ..procs import pid_alive
from ..readiness import ReadinessPolicy, session_readiness
from .trace import V5_SCHEMA_VERSION, utc_now

SESSIONS_SCHEMA_VERSION = 1
TRACE_FILES = ("meta.jsonl", "turns.jsonl", "actions.jsonl")
FINAL_STATUSES = ("finished", "abandoned", "crashed")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


# Names the project's own bookkeeping files take beside groups, datasets and checkpoints: a
# group, dataset, pointer or checkpoint may never be called like them.
RESERVED_NAMES = frozenset({"agents_index.json", "index.json", "promoted.json", "promoted_history.jsonl",
                            "promoted.intent.json", "manifest.json", "summary.json", "catalog.jsonl", "benchmarks"})
RESERVED_SUFFIXES = (".lock", ".tmp")


def check_name(value: Any, what: str = "group") -> str:
    """Group, dataset, checkpoint and battle names are one path component: letters, digits,
    ``._-``, no ``..``, and never one of the project's own file names (``RESERVED_NAMES``,
    ``*.lock``, ``*.tmp``)."""
    if not isinstance(value, str) or not _NAME.fullmatch(value) or ".." in value:
        raise InvalidArgument(
            f"{what} name {value!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', starting with "
            f"a letter or digit, without '/', '..' or NUL")
    if value.lower() in RESERVED_NAMES or value.lower().endswith(RESERVED_SUFFIXES):
        raise InvalidArgument(f"{what} name {value!r} is reserved for ExtraRLHF's own files (index, pointer, lock "
                              f"and temp files); choose another name")
    return value


def _is_name(value: str) -> bool:
    try:
        check_name(value)
    except InvalidArgument:
        return False
    return True


def battle_id_for(group: str, index: int, seed: int) -> str:
    """Deterministic, globally distinct battle id: ``b<index>-<10 hex of sha256(group, index, seed)>``."""
    digest = hashlib.sha256(f"{group}:{index}:{seed}".encode()).hexdigest()
    return f"b{index:06d}-{digest[:10]}"


@dataclass(frozen=True)
class BattleRef:
    """A battle of a group as the catalog records it."""

    group: str
    entry: dict[str, Any]
    path: Path  # battles/<battle_id>

    @property
    def battle_id(self) -> str:
        return self.entry["battle_id"]

    @property
    def status(self) -> str:
        return self.entry["status"]

    def meta(self) -> dict[str, Any]:
        return read_meta(self.path)

    def decisions(self) -> Iterator[dict[str, Any]]:
        return iter_records(self.path / "v5" / "actions.jsonl")

    def turns(self) -> Iterator[dict[str, Any]]:
        return iter_records(self.path / "v5" / "turns.jsonl")


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Lazily yield the records of a trace ``.jsonl`` file, checking each schema_version."""
    try:
        handle = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise NotFound(f"{path} does not exist") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UnsupportedSchema(f"{path} line {number} is not valid JSON ({exc}); the trace is corrupt: "
                                        f"restore it or delete the battle folder and re-run the series") from None
            check_version(record, path.with_name(f"{path.name}:{number}"), V5_SCHEMA_VERSION)
            yield record


def read_meta(battle_dir: Path) -> dict[str, Any]:
    path = battle_dir / "v5" / "meta.jsonl"
    records = list(iter_records(path))
    if len(records) != 1:
        raise UnsupportedSchema(f"{path}: expected exactly one record, found {len(records)}")
    return records[0]


class SessionStore:
    """Reads and writes session groups under one sessions directory."""

    def __init__(self, root: str | os.PathLike[str] = "sessions", *, fsync: bool | None = None) -> None:
        """``fsync`` (default: env ``RLHF_FSYNC=1``) flushes every trace file and catalog line to
        disk. Without it writes are still atomic and survive a killed process (the page cache
        outlives it), but not a power cut; each fsync costs milliseconds per battle."""
        self.root = Path(root)
        self.fsync = os.environ.get("RLHF_FSYNC") == "1" if fsync is None else fsync

    # ------------------------------------------------------------------ paths
    def group_dir(self, group: str) -> Path:
        return self.root / check_name(group, "group")

    def battle_dir(self, group: str, battle_id: str) -> Path:
        return self.group_dir(group) / "battles" / check_name(battle_id, "battle")

    def _require_group(self, group: str) -> Path:
        path = self.group_dir(group)
        if not (path / "manifest.json").is_file():
            known = ", ".join(self.list_groups()) or "none yet"
            raise NotFound(f"session group {group!r} does not exist under {self.root} (groups: {known})")
        return path

    # ------------------------------------------------------------------ writing
    def ensure_group(self, group: str, configuration: dict[str, Any], seeds: dict[str, Any],
                     codename: str | None = None) -> dict[str, Any]:
        """Create the group's manifest, or check that an existing group has this configuration.

        ``seeds`` is ``{"mode": "series", "base_seed": s, "n_battles": n}`` (a series; ``n`` may
        grow) or ``{"mode": "explicit"}`` (battles started one by one with their own seeds).
        """
        path = self.group_dir(group)
        (path / "battles").mkdir(parents=True, exist_ok=True)
        manifest_path = path / "manifest.json"
        with locked(path / "manifest.json"):
            if manifest_path.exists():
                manifest = read_json_document(manifest_path, SESSIONS_SCHEMA_VERSION)
                if manifest["configuration"] != configuration:
                    raise GroupConflict(
                        f"group {group!r} was created for {_describe(manifest['configuration'])}, not "
                        f"{_describe(configuration)}; use another group name")
                old = manifest["seeds"]
                if old["mode"] != seeds["mode"] or old.get("base_seed") != seeds.get("base_seed"):
                    raise GroupConflict(
                        f"group {group!r} holds {_describe_seeds(old)}, not {_describe_seeds(seeds)}; "
                        f"use another group name")
                if seeds.get("n_battles", 0) > old.get("n_battles", 0):
                    manifest["seeds"] = seeds
                    atomic_write_json(manifest_path, manifest)
                return manifest
            manifest = {
                "schema_version": SESSIONS_SCHEMA_VERSION,
                "group": group,
                "created_at": utc_now(),
                "engine_version": engine.ENGINE_VERSION,
                "ruleset": engine.RULESET,
                "obs_version": engine.OBS_VERSION,
                "state_schema_version": engine.STATE_SCHEMA_VERSION,
                "trace_schema_version": V5_SCHEMA_VERSION,
                "configuration": configuration,
                "seeds": seeds,
                "codename": codename,
            }
            atomic_write_json(manifest_path, manifest)
            return manifest

    def append_catalog(self, group: str, entry: dict[str, Any]) -> None:
        line = json.dumps({"schema_version": SESSIONS_SCHEMA_VERSION, **entry}, separators=(",", ":"),
                          ensure_ascii=False)
        append_line_locked(self.group_dir(group) / "catalog.jsonl", line, fsync=self.fsync)

    def next_index(self, group: str) -> int:
        """Next free battle index of a group (callers hold the group's allocation lock)."""
        entries = self.read_catalog_raw(group)
        return 1 + max((e["index"] for e in entries), default=-1)

    def allocation_lock(self, group: str):
        """Serializes index allocation for battles started one by one (MCP matches)."""
        return locked(self.group_dir(group) / "battles")

    def write_battle(self, group: str, battle_id: str, files: dict[str, bytes]) -> dict[str, str]:
        """Publish a battle's trace folder atomically; returns the sha256 of each file.

        A folder already at the target was never catalogued as final (callers check the
        catalog first): it is a leftover of a killed writer and is replaced.
        """
        battles = self.group_dir(group) / "battles"
        final = battles / check_name(battle_id, "battle")
        tmp = battles / f".tmp-{battle_id}-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            (tmp / "v5").mkdir(parents=True)
            hashes = {}
            for name in TRACE_FILES:
                data = files[name]
                with open(tmp / "v5" / name, "wb") as handle:
                    handle.write(data)
                    if self.fsync:
                        handle.flush()
                        os.fsync(handle.fileno())
                hashes[name] = hashlib.sha256(data).hexdigest()
            if self.fsync:
                fsync_dir(tmp / "v5")
            if final.exists():
                shutil.rmtree(final)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if self.fsync:
            fsync_dir(battles)
        return hashes

    def remove_stale_temp(self, group: str) -> int:
        """Delete temp folders left by writers that died (their pid is gone)."""
        battles = self.group_dir(group) / "battles"
        removed = 0
        for tmp in battles.glob(".tmp-*"):
            pid = tmp.name.rsplit("-", 2)[-2]
            if pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(tmp, ignore_errors=True)
                removed += 1
        return removed

    def write_summary(self, group: str, policy: ReadinessPolicy | None = None) -> dict[str, Any]:
        summary = self.compute_summary(group, policy)
        with locked(self.group_dir(group) / "summary.json"):
            atomic_write_json(self.group_dir(group) / "summary.json", summary)
        return summary

    # ------------------------------------------------------------------ reading
    def list_groups(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir()
                      if p.is_dir() and _is_name(p.name) and (p / "manifest.json").is_file())

    def read_manifest(self, group: str) -> dict[str, Any]:
        return read_json_document(self._require_group(group) / "manifest.json", SESSIONS_SCHEMA_VERSION)

    def read_summary(self, group: str) -> dict[str, Any]:
        path = self._require_group(group) / "summary.json"
        if not path.exists():
            return self.compute_summary(group)
        return read_json_document(path, SESSIONS_SCHEMA_VERSION)

    def read_catalog_raw(self, group: str) -> list[dict[str, Any]]:
        """Every catalog line in order (a torn last line from a killed writer is skipped)."""
        path = self.group_dir(group) / "catalog.jsonl"
        if not path.exists():
            return []
        entries = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a killed writer; the battle shows as unfinished
            entries.append(check_version(entry, path.with_name(f"catalog.jsonl:{number}"),
                                          SESSIONS_SCHEMA_VERSION))
        return entries

    def read_catalog(self, group: str) -> list[dict[str, Any]]:
        """One entry per battle (its latest line), ``started`` shown as ``unfinished``; by index."""
        self._require_group(group)
        folded: dict[str, dict[str, Any]] = {}
        for entry in self.read_catalog_raw(group):
            folded[entry["battle_id"]] = entry
        out = []
        for entry in folded.values():
            if entry["status"] == "started":
                entry = {**entry, "status": "unfinished"}
            out.append(entry)
        return sorted(out, key=lambda e: (e["index"], e["battle_id"]))

    def battles(self, group: str, statuses: tuple[str, ...] = FINAL_STATUSES) -> Iterator[BattleRef]:
        """Battles of a group with a trace on disk (by default every final status), lazily."""
        for entry in self.read_catalog(group):
            if entry["status"] in statuses:
                yield BattleRef(group, entry, self.battle_dir(group, entry["battle_id"]))

    def battle(self, group: str, battle_id: str) -> BattleRef:
        for entry in self.read_catalog(group):
            if entry["battle_id"] == battle_id:
                if entry["status"] not in FINAL_STATUSES:
                    raise NotFound(f"battle {battle_id!r} of group {group!r} has no trace (status {entry['status']})")
                return BattleRef(group, entry, self.battle_dir(group, battle_id))
        raise NotFound(f"battle {battle_id!r} is not in group {group!r}")

    def compute_summary(self, group: str, policy: ReadinessPolicy | None = None) -> dict[str, Any]:
        """Aggregates of a group, recomputed from its catalog."""
        entries = self.read_catalog(group)
        by_status = {s: 0 for s in (*FINAL_STATUSES, "unfinished")}
        results = {"p1_wins": 0, "draws": 0, "p2_wins": 0}
        decisions = degraded = warnings = peeked = eligible = eligible_decisions = 0
        hashes: set[str] = set()
        decks: set[str] = set()
        tags: dict[str, int] = {}
        for e in entries:
            by_status[e["status"]] = by_status.get(e["status"], 0) + 1
            if e["status"] not in FINAL_STATUSES:
                continue
            decisions += e["decisions"]
            degraded += int(e["degraded"])
            warnings += e["policy_warnings"]
            peeked += int(bool(e.get("omniscient_peeks")))
            hashes.update(h for h in e["weights_hashes"] if h)
            if e["status"] == "finished":
                results[("draws", "p1_wins", "p2_wins")[e["winner"]]] += 1
                tags[e["battle_tag"]] = tags.get(e["battle_tag"], 0) + 1
                if not e["degraded"] and not e.get("omniscient_peeks"):
                    eligible += 1
                    eligible_decisions += e["decisions"]
                    decks.update(e["deck_ids"])
        counts = {"eligible_battles": eligible, "eligible_decisions": eligible_decisions,
                  "distinct_decks": len(decks)}
        return {
            "schema_version": SESSIONS_SCHEMA_VERSION,
            "group": group,
            "updated_at": utc_now(),
            "battles": len(entries),
            "by_status": by_status,
            "results": results,
            "battle_tags": tags,
            "decisions": decisions,
            "degraded": degraded,
            "policy_warnings": warnings,
            "omniscient_peek_battles": peeked,
            "weights_hashes": sorted(hashes),
            **counts,
            "readiness": session_readiness(counts, policy),
        }


def _describe(configuration: dict[str, Any]) -> str:
    p1 = configuration["p1_actor_type"]
    if configuration.get("p1_model"):
        p1 += f" ({configuration['p1_model']['spec']})"
    return f"{p1} vs {configuration['opponent']['spec']}"


def _describe_seeds(seeds: dict[str, Any]) -> str:
    if seeds["mode"] == "series":
        return f"a series with base seed {seeds['base_seed']}"
    return "battles started one by one"
