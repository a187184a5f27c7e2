"""The on-disk session layout (DESIGN section 6): writer, reader and checker.

```
<sessions>/agents_index.json                codename leases (see codenames.py)
<sessions>/<group>/manifest.json            what the group is
<sessions>/<group>/summary.json             aggregates, readiness
<sessions>/<group>/catalog.jsonl            one line per battle event (started, then final status)
<sessions>/<group>/lease.json               the group's owner while a series or a repair runs (ownership.py)
<sessions>/<group>/catalog-repairs.jsonl    what repairs dropped or rebuilt (only after a repair)
<sessions>/<group>/battles/<battle_id>/v5/{meta,turns,actions}.jsonl
                                            (series: turns/actions as .jsonl.zst, trace_files.py)
```

The catalog is an append-only log: a battle gets a ``started`` line when it begins and a
final line (``finished``, ``abandoned`` or ``crashed``) once its trace is in place; readers
fold it by ``battle_id``, so a battle whose process died shows as ``unfinished``. Battle
folders appear by an atomic rename of a complete temp folder and are never replaced. Every
file carries a ``schema_version`` and readers refuse versions they do not know.

**Damaged records.** Every reader checks what it reads (records.py): a catalog line, a
manifest or a ``summary.json`` that is not valid JSON, misses a key, has a wrong type or an
unknown status is :class:`~extrarlhf.core.errors.CorruptRecord` (``corrupt_record``) naming the
file, the line and the field, and nothing is read past it. The one exception is an
unterminated last catalog line that does not parse: an append in progress (readers take no
lock) or one torn by a killed writer; it is skipped, and its battle shows as unfinished.
Writers never act on a damaged record: before a series or an interactive battle adds to a
group, :meth:`SessionStore.reconcile` makes the catalog account for every trace on disk --
a trace folder without a valid final line gets its line rebuilt from the trace when the
trace is intact (its ``meta.jsonl`` and the three files' sha256 give every field), damaged
lines are dropped into ``catalog-repairs.jsonl`` -- or stops with the reason. A trace folder
is never overwritten. :func:`check_sessions` lists every problem of a sessions dir.

**Confinement.** Like datasets (datasets/paths.py), every group, file and folder used is
checked to resolve (symlinks followed) inside the real sessions dir, with a separator
boundary; a symlink that leads out is :class:`~extrarlhf.core.errors.PathOutsideSessionsDir`.
The sessions dir itself may be a symlink. A writer whose group folder vanished is
:class:`~extrarlhf.core.errors.GroupMissing` before it writes anything (nothing is re-created).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import orjson

import engine

from ..core.errors import (
    CorruptRecord,
    GroupBusy,
    GroupConflict,
    GroupMissing,
    IntegrityError,
    ManifestMismatch,
    NotFound,
    PathOutsideSessionsDir,
    RLHFError,
    UnsupportedSchema,
)
from ..core.fileio import append_line_locked, atomic_write_json, check_version, fsync_dir, locked
from ..core.names import check_name, is_name
from ..core.procs import pid_alive
from ..core.readiness import ReadinessPolicy, session_readiness
from . import catalog_index, consistency, ownership, records, settled, trace_files
from .catalog_lines import (REPAIRS_LOG, SESSIONS_SCHEMA_VERSION, CatalogLine, gc_paused, iter_catalog, problem,
                            record_error, shown, valid_lines)
from .catalog_lines import scan_catalog  # noqa: F401 - readers import it from here
from .catalog_summary import SummaryFold
from .records import BATTLE_ID, FINAL_STATUSES, TRACE_FILES
from .trace import V5_SCHEMA_VERSION, utc_now

LEASE_NAME = "lease.json"

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
    """Lazily yield the records of a trace ``.jsonl`` file (plain, or stored compact as
    ``<path>.zst``: trace_files.py), checking each schema_version."""
    stored = trace_files.find(path.parent, path.name)
    if stored is None:
        raise NotFound(f"{path} does not exist") from None
    if stored.name.endswith(trace_files.SUFFIX):
        try:
            lines: Any = trace_files.read(path.parent, path.name).decode("utf-8").splitlines(keepends=True)
        except (trace_files.CompactFileError, UnicodeDecodeError) as exc:
            raise UnsupportedSchema(f"{stored}: {exc}; the trace is corrupt: restore it or delete the battle folder "
                                    f"and re-run the series") from None
        handle: Any = contextlib.nullcontext()
    else:
        try:
            handle = open(stored, encoding="utf-8")
        except FileNotFoundError:
            raise NotFound(f"{path} does not exist") from None
        lines = handle
    with handle:
        for number, line in enumerate(lines, 1):
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
    found = list(iter_records(path))
    if len(found) != 1:
        raise UnsupportedSchema(f"{path}: expected exactly one record, found {len(found)}")
    return found[0]




def _within(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or inside it (both absolute and normalized)."""
    root = root.rstrip(os.sep) or os.sep
    return path == root or path.startswith(root if root.endswith(os.sep) else root + os.sep)


class Passes:
    """An iterable whose every loop is a fresh pass (``make()``): a catalog read again, not held."""

    def __init__(self, make: Callable[[], Iterable[Any]]) -> None:
        self.make = make

    def __iter__(self) -> Iterator[Any]:
        return iter(self.make())


class SessionStore:
    """Reads and writes session groups under one sessions directory."""

    def __init__(self, root: str | os.PathLike[str] = "sessions", *, fsync: bool | None = None) -> None:
        """``fsync`` (default: env ``RLHF_FSYNC=1``) flushes every trace file and catalog line to
        disk. Without it writes are still atomic and survive a killed process (the page cache
        outlives it), but not a power cut; each fsync costs milliseconds per battle."""
        self.root = Path(root)
        self.fsync = os.environ.get("RLHF_FSYNC") == "1" if fsync is None else fsync
        # battles started one by one: each group's last clean reconcile here (settled.py), and its summary's index
        self.settled: dict[str, settled.SettledCatalog] = {}
        self.followed: dict[str, catalog_index.LiveIndex] = {}

    # ------------------------------------------------------------------ paths (confined)
    def _confine(self, path: Path, what: str, root: str | None = None) -> Path:
        """``path`` when its real path (symlinks followed; missing components appended as they
        are) lies inside the real sessions dir (``root``, when the caller resolved it), else
        PathOutsideSessionsDir."""
        root = os.path.realpath(self.root) if root is None else root
        real = os.path.realpath(path)
        if not _within(real, root):
            raise PathOutsideSessionsDir(
                f"{what} ({path}) resolves to {real}, outside the sessions dir {root} (through a symlink); session "
                f"groups are confined to the sessions dir: remove the link, or move the group's folder inside")
        return path

    def group_dir(self, group: str, root: str | None = None) -> Path:
        name = check_name(group, "group")
        return self._confine(self.root / name, f"session group {name!r}", root)

    def _in_group(self, group: str, *parts: str) -> Path:
        root = os.path.realpath(self.root)  # resolved once for both checks
        path = self.group_dir(group, root).joinpath(*parts)
        return self._confine(path, f"{'/'.join(parts)} of session group {group!r}", root)

    def manifest_path(self, group: str) -> Path:
        return self._in_group(group, "manifest.json")

    def index_path(self, group: str) -> Path:
        return self._in_group(group, catalog_index.INDEX_FILE)

    def summary_path(self, group: str) -> Path:
        return self._in_group(group, "summary.json")

    def catalog_path(self, group: str) -> Path:
        return self._in_group(group, "catalog.jsonl")

    def lease_path(self, group: str) -> Path:
        return self._in_group(group, LEASE_NAME)

    def repairs_path(self, group: str) -> Path:
        return self._in_group(group, REPAIRS_LOG)

    def battles_path(self, group: str) -> Path:
        return self._in_group(group, "battles")

    def battle_dir(self, group: str, battle_id: str) -> Path:
        return self._in_group(group, "battles", check_name(battle_id, "battle"))

    def battle_dirs(self, group: str) -> Callable[[str], Path]:
        """:meth:`battle_dir` for many battles of one group, with the same confinement: the
        sessions dir, the group folder and its ``battles`` folder are resolved once; then a
        battle's folder that is a directory and not a link (one ``lstat``) lies in that resolved
        folder, and any other (a link, a missing folder) is resolved as battle_dir does it."""
        root = os.path.realpath(self.root)
        folder = self.group_dir(group, root) / "battles"
        plain_folder = _within(os.path.realpath(folder), root)

        def battle_dir(battle_id: str) -> Path:
            name = check_name(battle_id, "battle")
            path = folder / name
            if plain_folder:
                try:
                    if stat.S_ISDIR(os.lstat(path).st_mode):
                        return path
                except OSError:
                    pass
            return self._confine(path, f"battles/{name} of session group {group!r}", root)
        return battle_dir

    def confine_group(self, group: str) -> Path:
        """Check the group folder and every file and folder of it that ExtraRLHF uses (before a
        writer starts, so that it does not stop half-way); returns the group folder."""
        folder = self.group_dir(group)
        for name in ("manifest.json", "summary.json", "catalog.jsonl", LEASE_NAME, REPAIRS_LOG, "battles"):
            self._in_group(group, name)
        return folder

    def _require_group(self, group: str) -> Path:
        """The group's manifest path; NotFound when the group does not exist."""
        path = self.manifest_path(group)
        if not path.is_file():
            known = ", ".join(self.list_groups()) or "none yet"
            raise NotFound(f"session group {group!r} does not exist under {self.root} (groups: {known})")
        return path

    def require_present(self, group: str, doing: str) -> None:
        """Before writing into an existing group: its folder, manifest and battles folder are
        still there (and confined). GroupMissing otherwise, naming what vanished; nothing is
        written and nothing is re-created."""
        if not self.root.is_dir():
            raise GroupMissing(f"{doing}: the sessions dir {self.root} no longer exists (it was deleted or moved); "
                               f"nothing was written. Restore it and retry, or start again in a new sessions dir")
        folder = self.group_dir(group)
        missing = [p for p in (self.manifest_path(group), self.battles_path(group)) if not p.exists()]
        if not folder.is_dir() or missing:
            what = folder if not folder.is_dir() else missing[0]
            raise GroupMissing(f"{doing}: {what} no longer exists (the session group {group!r} was deleted or moved); "
                               f"nothing was written. Restore the group's folder and retry, or start again in "
                               f"another group")

    # ------------------------------------------------------------------ record files
    def _read_record_file(self, path: Path, check: Any, what: str, fix: str) -> dict[str, Any]:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise NotFound(f"{path} does not exist") from None
        except IsADirectoryError:
            raise CorruptRecord(f"{path} is a directory, not the group's {what}; move it aside", path) from None
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise CorruptRecord(f"{path}: the {what} is not valid JSON ({exc}); {fix}", path) from None
        try:
            return check(doc, SESSIONS_SCHEMA_VERSION)
        except records.OtherVersion as exc:
            raise UnsupportedSchema(f"{path}: {exc}; upgrade ExtraRLHF to read it") from None
        except records.Bad as exc:
            error = record_error(path, None, exc, what)
            raise CorruptRecord(f"{error}; {fix}", path, None, exc.field) from None

    def _read_manifest_file(self, path: Path) -> dict[str, Any]:
        return self._read_record_file(path, records.check_manifest, "manifest",
                                      "restore it from a backup (a group's configuration cannot be rebuilt from its "
                                      "traces)")

    # ------------------------------------------------------------------ writing
    def ensure_group(self, group: str, configuration: dict[str, Any], seeds: dict[str, Any],
                     codename: str | None = None) -> dict[str, Any]:
        """Create the group's manifest, or check that an existing group has this configuration.

        ``seeds`` is ``{"mode": "series", "base_seed": s, "n_battles": n}`` (a series; ``n`` may
        grow) or ``{"mode": "explicit"}`` (battles started one by one with their own seeds).
        """
        self.battles_path(group).mkdir(parents=True, exist_ok=True)
        manifest_path = self.manifest_path(group)
        with locked(manifest_path):
            if manifest_path.exists():
                manifest = self._read_manifest_file(manifest_path)
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
        path = self.catalog_path(group)
        try:
            append_line_locked(path, line, fsync=self.fsync)
        except FileNotFoundError:
            raise GroupMissing(f"cannot record battle {entry.get('battle_id')} of group {group!r}: the group's folder "
                               f"{path.parent} no longer exists (deleted or moved); nothing was appended") from None

    def allocation_lock(self, group: str):
        """Serializes index allocation and the publication of battles started one by one (MCP
        matches) with repairs of the group."""
        return locked(self.battles_path(group))

    def write_battle(self, group: str, battle_id: str, files: dict[str, bytes],
                     compact: bool = False) -> tuple[dict[str, str], str | None]:
        """Publish a battle's trace folder atomically; returns the sha256 of each file (of its
        plain bytes) and, when ``compact`` (``turns`` and ``actions`` stored as zstd,
        trace_files.py), the stored files' ``compact_sha256`` (else None).

        A trace folder is written once: one already at the target is never replaced
        (IntegrityError; :meth:`reconcile` accounts for such folders before a series plays).
        A group folder that vanished is GroupMissing, and nothing is re-created.
        """
        battles = self.battles_path(group)
        final = self.battle_dir(group, battle_id)
        if os.path.lexists(final):
            raise IntegrityError(f"battle {battle_id} of group {group!r} already has a trace folder {final}; a trace "
                                 f"is written once and it was not overwritten (check the group with check_sessions)")
        tmp = battles / f".tmp-{battle_id}-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            tmp.mkdir()  # no parents: a vanished group is not re-created
            (tmp / "v5").mkdir()
            hashes = {name: hashlib.sha256(files[name]).hexdigest() for name in TRACE_FILES}
            stored = trace_files.encode({name: files[name] for name in TRACE_FILES}, compact)
            for name, data in stored.items():
                with open(tmp / "v5" / name, "wb") as handle:
                    handle.write(data)
                    if self.fsync:
                        handle.flush()
                        os.fsync(handle.fileno())
            if self.fsync:
                fsync_dir(tmp / "v5")
            try:
                os.rename(tmp, final)
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise IntegrityError(f"battle {battle_id} of group {group!r} got a trace folder {final} while "
                                         f"this one was written; it was not overwritten") from None
                raise
        except FileNotFoundError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise GroupMissing(f"cannot write the trace of battle {battle_id}: the folder {battles} of session group "
                               f"{group!r} no longer exists (deleted or moved); nothing was written") from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if self.fsync:
            fsync_dir(battles)
        return hashes, trace_files.compact_digest(stored) if compact else None

    def remove_stale_temp(self, group: str) -> int:
        """Delete temp folders left by writers that died (their pid is gone)."""
        battles = self.battles_path(group)
        removed = 0
        for tmp in battles.glob(".tmp-*"):
            pid = tmp.name.rsplit("-", 2)[-2]
            if pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(tmp, ignore_errors=True)
                removed += 1
        return removed

    def write_summary(self, group: str, policy: ReadinessPolicy | None = None,
                      live: catalog_index.LiveIndex | None = None) -> dict[str, Any]:
        """Recompute the summary from the catalog and write it, with the catalog's index
        (catalog_index.py) that lets readers of a large group skip the fold; ``live`` (from
        :meth:`live_index`, kept by the one process appending, or :meth:`followed_index`) folds
        only what was appended since its last call."""
        self._require_group(group)
        if live is not None:
            index = live.refresh(lambda fold: fold.summary(group, policy))
        else:
            index = catalog_index.build(self.catalog_path(group),
                                        lambda entries: self._summarize(group, entries, policy))
        path = self.summary_path(group)
        with locked(path):
            atomic_write_json(path, index.summary)
            catalog_index.save(index, self.index_path(group))
        return index.summary

    def live_index(self, group: str) -> catalog_index.LiveIndex:
        """A catalog index kept current by the process appending to ``group`` (a series), for
        :meth:`write_summary`."""
        self._require_group(group)
        return catalog_index.LiveIndex(self.catalog_path(group), SummaryFold)

    def followed_index(self, group: str) -> catalog_index.LiveIndex:
        """The catalog index this store keeps for a group of battles started one by one (their
        summary after each battle: match.py), under the group's allocation lock. Other processes
        may append to the group too, so each refresh checks the bytes folded before (``verify``)."""
        live = self.followed.get(group)
        if live is None:
            self._require_group(group)
            live = self.followed[group] = catalog_index.LiveIndex(self.catalog_path(group), SummaryFold,
                                                                  verify=True)
        return live

    # ------------------------------------------------------------------ reading
    def list_groups(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir()
                      if p.is_dir() and is_name(p.name) and (p / "manifest.json").is_file())

    def read_manifest(self, group: str) -> dict[str, Any]:
        return self._read_manifest_file(self._require_group(group))

    def read_summary(self, group: str) -> dict[str, Any]:
        self._require_group(group)
        path = self.summary_path(group)
        if not path.exists():
            return self.compute_summary(group)
        return self._read_record_file(path, records.check_summary, "summary",
                                      "it is recomputed from the catalog by the group's next battle or series, or "
                                      "by `extrarlhf check --repair`")

    def read_catalog_raw(self, group: str) -> list[dict[str, Any]]:
        """Every valid catalog line in order. A damaged line is CorruptRecord (file, line, field),
        another schema_version UnsupportedSchema; an unterminated last line that does not parse
        (an append in progress, or torn by a killed writer) is skipped."""
        return list(self.iter_catalog_raw(group))

    def iter_catalog_raw(self, group: str) -> Iterator[dict[str, Any]]:
        """:meth:`read_catalog_raw` one line at a time."""
        for line in self._valid_lines(group):
            yield line.entry  # type: ignore[misc]

    def _valid_lines(self, group: str, upto: int | None = None) -> Iterator[CatalogLine]:
        for line in iter_catalog(self.catalog_path(group)):
            if upto is not None and line.number > upto:
                return
            yield from valid_lines((line,))

    def read_catalog_index(self, group: str) -> catalog_index.CatalogIndex | None:
        """The group's catalog index while it still describes the catalog, else None."""
        self._require_group(group)
        return catalog_index.load(self.index_path(group), self.catalog_path(group))

    def catalog_view(self, group: str) -> catalog_index.CatalogView:
        """The battles by (index, battle id) and their latest entries a page at a time: from the
        catalog index when it is fresh (a page costs its lines), else by folding the catalog
        (about a hundred bytes a battle, its entries read again for each page)."""
        built = self.read_catalog_index(group)
        if built is not None:
            return catalog_index.indexed_view(built, self.catalog_path(group))
        with gc_paused():
            latest = {line.entry["battle_id"]: (line.entry["index"], line.number)  # type: ignore[index]
                      for line in self._valid_lines(group)}
        keys = sorted((index, battle_id) for battle_id, (index, _) in latest.items())

        def entries(start: int, stop: int) -> dict[str, dict[str, Any]]:
            wanted = {latest[b][1]: b for _, b in keys[start:stop]}
            out: dict[str, dict[str, Any]] = {}
            for line in self._valid_lines(group, upto=max(wanted, default=0)):
                if line.number in wanted:
                    out[wanted[line.number]] = shown(line.entry)  # type: ignore[arg-type]
            return out

        return catalog_index.CatalogView(keys, entries, False)

    def iter_latest(self, group: str) -> Iterator[dict[str, Any]]:
        """Each battle's latest entry (``started`` shown as ``unfinished``) in catalog order, in
        two passes over the catalog: memory holds the fold's line numbers during the first (about
        150 bytes a battle), a byte a line during the second, never the entries. Lines appended
        after the first pass are not seen (a consistent snapshot)."""
        self._require_group(group)
        with gc_paused():
            latest = {line.entry["battle_id"]: line.number for line in self._valid_lines(group)}  # type: ignore
        marks = bytearray(max(latest.values(), default=0) + 1)  # 1 at each latest line: a byte a line
        for number in latest.values():
            marks[number] = 1
        del latest
        for line in self._valid_lines(group, upto=len(marks) - 1):
            if marks[line.number]:
                yield shown(line.entry)  # type: ignore[arg-type]

    def read_catalog(self, group: str) -> list[dict[str, Any]]:
        """One entry per battle (its latest line), ``started`` shown as ``unfinished``; by index."""
        with gc_paused():
            return self._read_catalog(group)

    def _read_catalog(self, group: str) -> list[dict[str, Any]]:
        self._require_group(group)
        folded: dict[str, dict[str, Any]] = {}
        for entry in self.iter_catalog_raw(group):  # folded as read: a battle's started line is dropped
            folded[entry["battle_id"]] = entry
        return sorted(map(shown, folded.values()), key=lambda e: (e["index"], e["battle_id"]))

    def battles(self, group: str, statuses: tuple[str, ...] = FINAL_STATUSES) -> Iterator[BattleRef]:
        """Battles of a group with a trace on disk (by default every final status), lazily."""
        for entry in self.read_catalog(group):
            if entry["status"] in statuses:
                yield BattleRef(group, entry, self.battle_dir(group, entry["battle_id"]))

    def battle(self, group: str, battle_id: str) -> BattleRef:
        """One battle with a trace: its latest line found through the catalog index when it is
        fresh (one line read), else by reading the catalog."""
        built = self.read_catalog_index(group)
        if built is not None:
            at = catalog_index.position(built, battle_id)
            entry = None if at is None else catalog_index.indexed_view(built, self.catalog_path(group)).entries(
                at, at + 1)[battle_id]
        else:
            entry = next((e for e in self.read_catalog(group) if e["battle_id"] == battle_id), None)
        if entry is None:
            raise NotFound(f"battle {battle_id!r} is not in group {group!r}")
        if entry["status"] not in FINAL_STATUSES:
            raise NotFound(f"battle {battle_id!r} of group {group!r} has no trace (status {entry['status']})")
        return BattleRef(group, entry, self.battle_dir(group, battle_id))

    def compute_summary(self, group: str, policy: ReadinessPolicy | None = None, *,
                        fresh: bool = False) -> dict[str, Any]:
        """Aggregates of a group, recomputed from its catalog (streamed: :meth:`iter_latest`),
        or taken from its catalog index while that still describes the catalog (``fresh``: never)."""
        index = None if fresh else self.read_catalog_index(group)
        if index is not None:
            summary = index.summary
            counts = {k: summary[k] for k in ("eligible_battles", "eligible_decisions", "distinct_decks")}
            return {**summary, "group": group, "updated_at": utc_now(), "readiness": session_readiness(counts, policy)}
        return self._summarize(group, self.iter_latest(group), policy)

    def _summarize(self, group: str, entries: Iterable[dict[str, Any]],
                   policy: ReadinessPolicy | None) -> dict[str, Any]:
        return catalog_index.folded(SummaryFold(), entries).summary(group, policy)

    # ------------------------------------------------------------------ traces -> catalog lines
    def battle_folders(self, group: str) -> list[str]:
        """Names of the battle folders of a group (temp folders and stray names left out)."""
        return sorted(self._folder_names(group))

    def _folder_names(self, group: str) -> Iterator[str]:
        """:meth:`battle_folders` unsorted, as the directory lists them (none held)."""
        try:
            with os.scandir(self.battles_path(group)) as entries:
                yield from (e.name for e in entries if BATTLE_ID.fullmatch(e.name))
        except (FileNotFoundError, NotADirectoryError):
            return

    def _trace_records(self, path: Path, data: bytes) -> list[dict[str, Any]]:
        out = []
        for number, raw in enumerate(data.split(b"\n"), 1):
            if not raw.strip():
                continue
            try:
                doc = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise CorruptRecord(f"{path} line {number}: the record is not valid JSON ({exc})", path,
                                    number) from None
            try:
                out.append(records.check_object(doc, V5_SCHEMA_VERSION))
            except records.OtherVersion as exc:
                raise UnsupportedSchema(f"{path} line {number}: {exc}") from None
            except records.Bad as exc:
                raise record_error(path, number, exc, "record") from None
        return out

    def rebuild_entry(self, group: str, battle_id: str, *, folder: Path | None = None,
                      written: dict[str, str] | None = None) -> dict[str, Any]:
        """The final catalog line of a battle, rebuilt from its trace folder alone.

        The trace must be intact: three files, one meta record naming this group and battle
        (with index and seed that give this battle id), one actions record per recorded
        decision in order, turns that end at the recorded final state. Otherwise
        CorruptRecord / IntegrityError (file, line, field) and nothing is rebuilt.
        ``folder``: the battle's folder as :meth:`battle_dirs` gives it (else resolved here).
        ``written``: the files' sha256 as its catalog line records them; files that hash to
        them are the writer's bytes, and their records are decoded for the fields the line
        needs only (records.line_fields; ``check`` at a million battles)."""
        v5 = (folder or self.battle_dir(group, battle_id)) / "v5"
        data: dict[str, bytes] = {}
        shown = {name: trace_files.find(v5, name) or v5 / name for name in TRACE_FILES}  # the stored files
        stored = trace_files.read_compact(v5)  # turns and actions as stored, when both are compact
        for name in TRACE_FILES:
            try:
                data[name] = trace_files.read_from(v5, name, stored)
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                raise CorruptRecord(f"{v5 / name} is missing: the trace of battle {battle_id} is incomplete",
                                    v5 / name) from None
            except trace_files.CompactFileError as exc:
                raise CorruptRecord(str(exc), v5 / (name + trace_files.SUFFIX)) from None
        meta_path = v5 / "meta.jsonl"
        metas = self._trace_records(meta_path, data["meta.jsonl"])
        if len(metas) != 1:
            raise CorruptRecord(f"{meta_path}: expected exactly one record, found {len(metas)}", meta_path)
        try:
            meta = records.check_meta(metas[0], V5_SCHEMA_VERSION)
        except records.Bad as exc:
            raise record_error(meta_path, 1, exc, "record") from None
        for key, expected in (("battle_id", battle_id), ("group", group)):
            if meta[key] != expected:
                raise IntegrityError(f"{meta_path} line 1: field {key!r} is {meta[key]!r}, not {expected!r} (the "
                                     f"folder it is in)")
        if battle_id_for(group, meta["index"], meta["seed"]) != battle_id:
            raise IntegrityError(f"{meta_path} line 1: fields 'index' {meta['index']} and 'seed' {meta['seed']} do not "
                                 f"give battle id {battle_id!r}")
        result = meta["result"]
        final_hash = result["final_state_hash"]
        files = {name: hashlib.sha256(data[name]).hexdigest() for name in TRACE_FILES}

        def records_of(name: str) -> list[dict[str, Any]]:
            fields = records.line_fields(name, data[name], V5_SCHEMA_VERSION) if files == written else None
            return self._trace_records(shown[name], data[name]) if fields is None else fields

        actions_path = shown["actions.jsonl"]  # a compact file's line numbers are of its plain bytes
        actions = records_of("actions.jsonl")
        if len(actions) != result["decisions"]:
            raise IntegrityError(f"{actions_path}: {len(actions)} decision records, but {meta_path} field "
                                 f"'result.decisions' says {result['decisions']}")
        for i, record in enumerate(actions):
            if record.get("battle_id") != battle_id or record.get("decision_index") != i:
                raise IntegrityError(f"{actions_path} line {i + 1}: field 'decision_index' (or 'battle_id') is not "
                                     f"decision {i} of battle {battle_id}", )
        if actions and actions[-1].get("state_hash_after") != final_hash:
            raise IntegrityError(f"{actions_path} line {len(actions)}: field 'state_hash_after' is not the final "
                                 f"state hash recorded in {meta_path}")
        turns_path = shown["turns.jsonl"]
        turns = records_of("turns.jsonl")
        if not turns or any(t.get("battle_id") != battle_id for t in turns):
            raise IntegrityError(f"{turns_path}: no turn records, or records of another battle")
        if turns[-1].get("state_end_hash") != final_hash:
            raise IntegrityError(f"{turns_path} line {len(turns)}: field 'state_end_hash' is not the final state hash "
                                 f"recorded in {meta_path}")
        actors = meta["actors"]
        return {
            "battle_id": battle_id, "index": meta["index"], "status": result["status"], "seed": meta["seed"],
            "battle_tag": meta["battle_tag"], "codename": meta["codename"],
            "winner": result["winner"], "turns": result["turns"], "decisions": result["decisions"],
            "degraded": meta["degraded"], "policy_warnings": len(meta["policy_warnings"]),
            "omniscient_peeks": len(meta["omniscient_peeks"]),
            "weights_hashes": sorted({a["weights_hash"] for a in (actors["p1"], actors["p2"]) if a["weights_hash"]}),
            "deck_ids": [meta["deck_ids"]["p1"], meta["deck_ids"]["p2"]],
            "files": files,
            **({} if stored is None else {"compact_sha256": trace_files.compact_digest(stored)}),
        }

    def configuration_mismatches(self, group: str, configuration: dict[str, Any], entries: Iterable[dict[str, Any]],
                                 sample: int | None = None) -> list[tuple[str, str, Any, Any]]:
        """``(battle_id, field, manifest value, trace value)``, at most one per battle, for the
        final battles among ``entries`` (catalog entries) whose catalog line or trace meta record
        disagrees with ``configuration`` (the manifest's). Every line is compared; the meta
        records of all the battles, or of ``sample`` of them evenly spaced. A trace that cannot
        be read is left out here (it is reported, and refused, on its own). ``entries`` is
        looped over once, twice with ``sample`` (a list, or a :class:`Passes`), and not held."""
        picked = None
        if sample is not None:
            picked = set(consistency.evenly(range(sum(1 for e in entries if e["status"] in FINAL_STATUSES)),
                                            sample))
        lines = consistency.LineCheck(configuration)
        by_line = lines.found  # a line's mismatch wins over its trace's
        by_meta: dict[str, tuple[str, str, Any, Any]] = {}
        battle_dir = self.battle_dirs(group)  # the sessions dir and the group folder resolved once
        position = -1
        for entry in entries:
            if entry["status"] not in FINAL_STATUSES:
                continue
            position += 1
            battle_id = entry["battle_id"]
            lines.see(entry)
            if battle_id in by_line or battle_id in by_meta or (picked is not None and position not in picked):
                continue
            mismatch = self._meta_mismatch(battle_dir, configuration, battle_id)
            if mismatch is not None:
                by_meta[battle_id] = mismatch
        return sorted({**by_meta, **by_line}.values(), key=lambda m: m[0])

    @staticmethod
    def _meta_mismatch(battle_dir: Callable[[str], Path], configuration: dict[str, Any],
                       battle_id: str) -> tuple[str, str, Any, Any] | None:
        """The mismatch of a battle's trace meta record with ``configuration``, or None (also
        for a trace that cannot be read: it is reported, and refused, on its own)."""
        try:
            meta = read_meta(battle_dir(battle_id))
        except (ValueError, OSError):  # RLHFError is a ValueError
            return None
        mismatch = consistency.meta_mismatch(configuration, meta)
        return None if mismatch is None else (battle_id, *mismatch)

    def require_agreeing_manifest(self, group: str, entries: Iterable[dict[str, Any]], consequence: str) -> None:
        """ManifestMismatch (``consequence`` says what was not done) when the group's manifest
        disagrees with the actors its battles record (``entries``: catalog entries, as for
        :meth:`configuration_mismatches`; the trace meta
        records of up to consistency.RESUME_SAMPLE of them are read): whatever adds battles to the
        group, or publishes them under its configuration, must not."""
        found = self.configuration_mismatches(group, self.read_manifest(group)["configuration"], entries,
                                              consistency.RESUME_SAMPLE)
        if found:
            raise manifest_mismatch(self, group, found, consequence)

    def reconcile(self, group: str,
                  live: catalog_index.LiveIndex | settled.SettledCatalog | None = None) -> dict[str, Any]:
        """Before adding battles to a group: make its catalog account for every trace on disk.

        A trace folder without a valid final line gets that line rebuilt from its intact trace,
        and damaged lines are dropped (kept in ``catalog-repairs.jsonl``), when that is provably
        safe; otherwise CorruptRecord (file, line, field) with every reason, and nothing is
        changed. A manifest that disagrees with the actors the battles record (an opponent
        edited after its battles were played: every final line, and the trace meta records of
        up to consistency.RESUME_SAMPLE final battles) is ManifestMismatch, and nothing is
        changed. Callers own the group (its lease, or its allocation lock for battles started
        one by one). All of it takes one pass over the catalog (the diagnosis'), which also
        folds it into ``live`` when given (:meth:`live_index`: the series' first summary then
        reads only what it appended; a :class:`settled.SettledCatalog`: the next battle started
        one by one reads only what was appended since). Returns ``{"rebuilt": [battle ids],
        "dropped_lines": [line numbers], "next_index": int, "finished": bytearray}``,
        ``finished`` 1 at each battle index with a final line (after the repair)."""
        from . import diagnosis  # diagnosis imports this module

        path = self.catalog_path(group)
        with locked(path):
            configuration = self.read_manifest(group)["configuration"]
            lines = consistency.LineCheck(configuration)

            def observe(line: CatalogLine) -> None:
                if line.entry is not None:
                    lines.see(line.entry)
                if live is not None:
                    live.take(line)

            with diagnosis.diagnose(self, group, settled=True, observe=observe) as diag:
                if diag.blockers:
                    raise _unsafe_repair(group, path, diag)
                for entry in diag.rebuilt.values():
                    lines.see(entry)
                found = dict(lines.found)  # a line's mismatch wins over its trace's
                battle_dir = self.battle_dirs(group)
                for battle_id in consistency.evenly(list(diag.final_battles())):
                    if battle_id not in found:
                        mismatch = self._meta_mismatch(battle_dir, configuration, battle_id)
                        if mismatch is not None:
                            found[battle_id] = mismatch
                if found:
                    raise manifest_mismatch(self, group, sorted(found.values(), key=lambda m: m[0]),
                                            "nothing was played")
                finished = diag.finished()
                if diag.needs_repair:
                    diagnosis.apply_repair(self, group, diag)  # a new file: the live index folds it whole
                elif live is not None and diag.handle is not None:
                    live.taken(diag.handle, diag.end)
        return {"rebuilt": sorted(diag.rebuilt), "dropped_lines": [line.number for line in diag.drop],
                "next_index": diag.top_index + 1, "finished": finished}


def _unsafe_repair(group: str, path: Path, diag: Any) -> CorruptRecord:
    """The error of a reconcile whose repair is not provably safe (``diag.blockers``)."""
    first = next((p for p in diag.problems if p["code"] in ("corrupt_record", "integrity_error",
                                                              "unsupported_schema")), None)
    reasons = "; ".join(diag.blockers)
    damaged = "; ".join(p["message"] for p in diag.problems if p["code"] == "corrupt_record")
    return CorruptRecord(
        f"session group {group!r} needs a repair that is not provably safe, so nothing was played and nothing was "
        f"overwritten: {reasons}" + (f". Damaged: {damaged}" if damaged else ""),
        first["path"] if first else path, first["line"] if first else None, first["field"] if first else None)


def check_sessions(sessions_dir: str | os.PathLike[str], repair: bool = False, *,
                   hashes: bool = True, workers: int | None = 1) -> list[dict[str, Any]]:
    """Check every group of a sessions dir; returns the list of problems found (empty: all good).

    Each problem is a dict::

        {"group":      str | None,  the group (None: the sessions dir's own files)
         "path":       str,         the file or folder at fault
         "line":       int | None,  1-based line of a .jsonl file, None for a whole file/folder
         "field":      str | None,  dotted field of the record (e.g. "configuration.opponent.spec",
                                    "files.meta.jsonl", "winner"); None when the record as a whole is bad
         "code":       str,         stable: corrupt_record, unsupported_schema, integrity_error,
                                    uncatalogued_trace, path_outside_sessions_dir, group_busy,
                                    corrupt_index (agents_index.json), summary_mismatch,
                                    manifest_mismatch
         "message":    str,         what is wrong and what to do
         "repairable": bool,        repair=True fixes it (it is provably safe)
         "repaired":   bool}        it was fixed by this call (always False when repair=False)

    What is checked: ``agents_index.json``; for each group its folder (a symlink leading out
    of the sessions dir is refused, not followed), ``manifest.json``, ``summary.json``, the
    group lease, every catalog line, every final line's trace folder (and, with ``hashes``,
    its files against their sha256 and the line's fields against the trace), and trace
    folders without a final line; with ``hashes`` also ``summary.json`` against the summary
    computed from the catalog (``summary_mismatch``, repairable: it is derived data; not while a
    series owns the group, nor when the catalog itself has a problem) and the manifest's
    configuration against the actors each battle records in its catalog line and its trace's
    meta (``manifest_mismatch``: it was edited after they were played; never repaired, and
    :meth:`SessionStore.reconcile` refuses the group until it agrees). Read-only unless
    ``repair``; then, per group and holding
    its lease: damaged catalog lines are dropped (kept in ``catalog-repairs.jsonl``) and the
    final lines of intact traces rebuilt (see :meth:`SessionStore.reconcile`), and a damaged
    ``summary.json`` is recomputed. Damaged manifests, traces and leases are
    never repaired. A group owned by a running series is checked without its in-flight
    writes (trace folders not yet catalogued, a line being appended) and not repaired
    (``group_busy``). A sessions dir that does not exist has no problems. ``workers``: the
    processes (this one included) that check the trace files of a group (None: as materialize
    chooses, e.g. up to 4 for 64 battles or more); the problems and their order do not depend on it.
    """
    from . import codenames  # codenames imports this module

    store = SessionStore(sessions_dir)
    root = store.root
    if not root.is_dir():
        return []
    problems: list[dict[str, Any]] = []
    index = codenames.index_path(root)
    if os.path.lexists(index):
        try:
            codenames._load(index)
        except RLHFError as exc:
            problems.append(problem(None, index, None, None, exc.code, str(exc), False))
    for child in sorted(root.iterdir(), key=lambda p: p.name):
        if child.name.startswith(".") or not is_name(child.name) or not child.is_dir():
            continue
        problems += _check_group(store, child.name, repair, hashes, workers)
    return problems


def _check_group(store: SessionStore, group: str, repair: bool, hashes: bool,
                 workers: int | None) -> list[dict[str, Any]]:
    from . import diagnosis  # diagnosis imports this module

    try:
        store.confine_group(group)
    except PathOutsideSessionsDir as exc:
        return [problem(group, store.root / group, None, None, exc.code, str(exc), False)]
    manifest, catalog = store.manifest_path(group), store.catalog_path(group)
    found: list[dict[str, Any]] = []
    if not manifest.is_file():
        if catalog.exists() or store.battle_folders(group):
            found.append(problem(group, manifest, None, None, CorruptRecord.code,
                                 f"{manifest} is missing but the folder holds battles; restore it from a backup",
                                 False))
        return found
    configuration = None
    try:
        configuration = store.read_manifest(group)["configuration"]
    except RLHFError as exc:
        found.append(problem(group, manifest, None, getattr(exc, "field", None), exc.code, str(exc), False))
    busy = None
    try:
        busy = ownership.current_owner(store, group)
    except RLHFError as exc:
        found.append(problem(group, store.lease_path(group), None, getattr(exc, "field", None), exc.code, str(exc),
                             False))
    try:
        with diagnosis.diagnose(store, group, settled=busy is None, folders=busy is None, hashes=hashes,
                                workers=workers) as diag:
            mismatches = (store.configuration_mismatches(group, configuration, diag.entries())
                          if configuration is not None and hashes else [])
    except RLHFError as exc:
        return found + [problem(group, catalog, None, None, exc.code, str(exc), False)]
    found += diag.problems
    if mismatches:
        error = manifest_mismatch(store, group, mismatches, "a resume refuses the group until then")
        found.append(problem(group, manifest, None, error.field, error.code, str(error), False))
    summary_path = store.summary_path(group)
    summary_bad = None
    if summary_path.exists():
        try:
            stored = store.read_summary(group)
        except RLHFError as exc:
            summary_bad = problem(group, summary_path, None, getattr(exc, "field", None), exc.code, str(exc),
                                  isinstance(exc, CorruptRecord) and not diag.blockers)
            found.append(summary_bad)
        else:
            # compared with a catalog that accounts for every battle (else that is the problem), and not while a
            # series runs (it refreshes its summary every few seconds: it lags meanwhile)
            if hashes and busy is None and not diag.problems:
                summary_bad = _summary_problem(store, group, stored, not diag.blockers)
                if summary_bad is not None:
                    found.append(summary_bad)
    if not repair or not any(p["repairable"] for p in found):
        return found
    if busy is not None:
        found.append(problem(group, store.lease_path(group), None, None, GroupBusy.code,
                             f"not repaired: session group {group!r} is owned by a running "
                             f"{busy['purpose']} (pid {busy['owner_pid']} on host {busy['owner_host']}); repair it "
                             f"when that ends", False))
        return found
    try:
        with ownership.acquire(store, group, purpose="repair"), store.allocation_lock(group):
            store.reconcile(group)  # diagnosed again under the locks; raises if no longer provably safe
            if summary_bad is not None or diag.needs_repair:
                store.write_summary(group)
    except GroupBusy as exc:
        found.append(problem(group, store.lease_path(group), None, None, exc.code, f"not repaired: {exc}", False))
        return found
    except RLHFError as exc:
        found.append(problem(group, catalog, getattr(exc, "line", None), getattr(exc, "field", None), exc.code,
                             f"not repaired: {exc}", False))
        return found
    for item in found:
        if item["repairable"]:
            item["repaired"] = True
    return found


def manifest_mismatch(store: SessionStore, group: str, found: list[tuple[str, str, Any, Any]],
                      consequence: str) -> ManifestMismatch:
    """The error for a manifest that disagrees with ``found`` (see configuration_mismatches)."""
    path = store.manifest_path(group)
    return ManifestMismatch(
        f"session group {group!r}: its manifest {path} disagrees with what {len(found)} of its battles record, so "
        f"it was edited after they were played ({consequence}); the first: {consistency.describe(found[0])}. "
        f"Restore manifest.json from a backup (its configuration must be the one the battles record), or play the "
        f"new configuration into another group",
        path, None, consistency.MANIFEST_FIELD.get(found[0][1], found[0][1]))


def _summary_problem(store: SessionStore, group: str, stored: dict[str, Any], repairable: bool) \
        -> dict[str, Any] | None:
    """A ``summary_mismatch`` problem when summary.json (well formed) disagrees with the
    summary computed from the catalog, else None (also when the catalog cannot be read: that
    is reported on its own)."""
    try:
        computed = store.compute_summary(group, fresh=True)
    except RLHFError:
        return None
    differences = consistency.summary_differences(stored, computed)
    if not differences:
        return None
    path = store.summary_path(group)
    shown = "; ".join(f"{name} is {mine!r} there but {theirs!r} from the catalog"
                      for name, mine, theirs in differences[:5])
    more = f" (and {len(differences) - 5} more)" if len(differences) > 5 else ""
    return problem(group, path, None, differences[0][0], "summary_mismatch",
                   f"{path} disagrees with the group's catalog: {shown}{more}. The summary is derived from the "
                   f"catalog (it was edited, or a process was killed before it refreshed it): `extrarlhf check "
                   f"--repair` recomputes it, as does the group's next battle or series", repairable)


def _describe(configuration: dict[str, Any]) -> str:
    p1 = configuration["p1_actor_type"]
    if configuration.get("p1_model"):
        p1 += f" ({configuration['p1_model']['spec']})"
    return f"{p1} vs {configuration['opponent']['spec']}"


def _describe_seeds(seeds: dict[str, Any]) -> str:
    if seeds["mode"] == "series":
        return f"a series with base seed {seeds['base_seed']}"
    return "battles started one by one"
