"""What is wrong with a session group's catalog and trace folders, and what a repair would do
(``check_sessions`` and a resume's :meth:`SessionStore.reconcile`; split from sessions.py).

The diagnosis streams the catalog: it keeps one packed int per battle and reads the open file
again for each pass, so its memory stays at about 150 bytes a battle whatever the group's size
(docs/benchmarks.md, groups of many battles); the problems come in the order a fold of every
line would give them.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterator

from adapters import work

from ..core.errors import CorruptRecord, IntegrityError, PathOutsideSessionsDir, RLHFError, UnsupportedSchema
from ..core.fileio import append_line_locked, atomic_write_chunks
from ..core.procpool import auto_workers, map_chunks
from . import trace_files
from .records import BATTLE_ID, FINAL_STATUSES, TRACE_FILES
from .catalog_lines import SESSIONS_SCHEMA_VERSION, CatalogLine, catalog_lines, gc_paused, open_catalog, problem
from .trace import utc_now

TRACES_PER_TASK = 64  # traces a worker process checks per task
CHECK_TRACES = "extrarlhf.runtime.trace_check:check_traces"  # the worker task (by name: no import)

if TYPE_CHECKING:
    from .sessions import SessionStore

__all__ = ["Diagnosis", "diagnose", "apply_repair"]

# A battle in the fold of a Diagnosis: one int packing the battle index of its latest line (above
# bit 70), its first and latest line numbers (34 bits each), whether its trace folder is on disk,
# and whether its latest line is final.
_FINAL, _ON_DISK, _LATEST_SHIFT, _FIRST_SHIFT, _INDEX_SHIFT, _LINE_MASK = 1, 2, 2, 36, 70, (1 << 34) - 1


class Diagnosis:
    """What is wrong with a group's catalog and traces, and what a repair would do.

    It holds no catalog entry, so its memory stays small whatever the group's size: the
    catalog stays open and is read again for each pass (:meth:`lines`: its bytes as the first
    pass read them, whatever is appended or renamed over it since), and the fold keeps one
    packed int per battle. The damaged lines and the rebuilt entries are held (a repair writes
    them)."""

    def __init__(self, path: Path, handle: BinaryIO | None) -> None:
        self.path, self.handle, self.end = path, handle, 0
        self.fold: dict[str, int] = {}  # battle_id -> packed (see _FINAL)
        self.problems: list[dict[str, Any]] = []
        self.drop: list[CatalogLine] = []  # damaged lines a repair removes
        self.rebuilt: dict[str, dict[str, Any]] = {}  # battle_id -> final line from its trace
        self.blockers: list[str] = []  # why a repair is not provably safe
        self.top_index = -1  # highest battle index seen (lines and folders)

    @property
    def needs_repair(self) -> bool:
        return bool(self.drop or self.rebuilt)

    def lines(self) -> Iterator[CatalogLine]:
        """The catalog's lines as the first pass read them (a pass over the file)."""
        if self.handle is not None:
            self.handle.seek(0)
            yield from catalog_lines(self.path, self.handle, self.end)

    def entries(self) -> Iterator[dict[str, Any]]:
        """The entries of the valid lines, in catalog order (a pass over the file)."""
        return (line.entry for line in self.lines() if line.entry is not None)

    def finished(self) -> bytearray:
        """1 at each battle index that has a final entry once a repair is applied (the latest
        valid line of one of its battles is final, or its line is rebuilt): a byte per index,
        from the fold (no pass over the file)."""
        done = bytearray(self.top_index + 1)  # a rebuilt battle's index is its folder's, counted there
        for packed in self.fold.values():
            if packed & _FINAL:
                done[packed >> _INDEX_SHIFT] = 1
        for entry in self.rebuilt.values():
            done[entry["index"]] = 1
        return done

    def final_battles(self) -> Iterator[str]:
        """The battles whose latest valid line is final, in the order they first appear, then
        those whose line is rebuilt (from the fold: no pass over the file)."""
        yield from (battle_id for battle_id, packed in self.fold.items() if packed & _FINAL)
        yield from self.rebuilt



@contextlib.contextmanager
def diagnose(store: SessionStore, group: str, *, settled: bool, folders: bool = True,
             hashes: bool = False, workers: int | None = 1,
             observe: Callable[[CatalogLine], None] | None = None) -> Iterator[Diagnosis]:
    """What is wrong with a group's catalog and its trace folders (nothing is changed); the
    catalog stays open for the diagnosis' passes until the ``with`` block ends.

    ``settled``: no append can be in progress (the caller holds the locks, or nobody
    writes), so an unterminated last line that does not parse is damage. ``folders``:
    look for trace folders without a final line (off while a series writes the group).
    ``hashes``: check the trace files of final lines against their sha256, on ``workers``
    processes counting this one (None: as many as materialize would use for the battles).
    ``observe(line)``: called with each line of the first pass, damaged or not, so that a
    caller needing more of the catalog (a resume) need not read it again."""
    path = store.catalog_path(group)
    handle = open_catalog(path)
    with handle or contextlib.nullcontext():
        diag = Diagnosis(path, handle)
        with gc_paused():
            orphans = _fold_catalog(store, group, diag, settled=settled, folders=folders, observe=observe)
            _check_final_lines(store, group, diag, hashes, workers)
            _check_orphans(store, group, diag, orphans)
        if diag.blockers:
            for item in diag.problems:
                if item["repairable"]:
                    item["repairable"] = False
                    item["message"] += f" (not repaired automatically: {'; '.join(diag.blockers)})"
        try:
            yield diag
        finally:
            diag.fold.clear()

def _fold_catalog(store: SessionStore, group: str, diag: Diagnosis, *, settled: bool, folders: bool,
                  observe: Callable[[CatalogLine], None] | None) -> list[str]:
    """The first pass: damaged lines, the fold, the trace folders; returns the trace folders
    without a final line (sorted; none unless ``folders``)."""
    path, fold = diag.path, diag.fold
    if diag.handle is not None:
        for line in catalog_lines(path, diag.handle):
            if observe is not None:
                observe(line)
            error, entry = line.error, line.entry
            if entry is not None:
                diag.top_index = max(diag.top_index, entry["index"])
                old = fold.get(entry["battle_id"])
                first = line.number if old is None else old >> _FIRST_SHIFT & _LINE_MASK
                fold[entry["battle_id"]] = (entry["index"] << _INDEX_SHIFT | first << _FIRST_SHIFT
                                            | line.number << _LATEST_SHIFT | (entry["status"] in FINAL_STATUSES))
            elif isinstance(error, UnsupportedSchema):
                diag.problems.append(problem(group, path, line.number, "schema_version", error.code, str(error),
                                             False))
                diag.blockers.append(f"line {line.number} has a schema_version this ExtraRLHF does not read "
                                     f"(such a line is never dropped)")
            elif line.terminated or settled:
                assert isinstance(error, CorruptRecord)
                diag.drop.append(line)
                diag.problems.append(problem(group, path, line.number, error.field, error.code, str(error), True))
        diag.end = diag.handle.tell()
    orphans = []
    for battle_id in store._folder_names(group):
        diag.top_index = max(diag.top_index, int(BATTLE_ID.fullmatch(battle_id).group(1)))  # type: ignore
        packed = fold.get(battle_id)
        if packed is not None:
            fold[battle_id] = packed | _ON_DISK
        if folders and (packed is None or not packed & _FINAL):
            orphans.append(battle_id)
    return sorted(orphans)

def _check_final_lines(store: SessionStore, group: str, diag: Diagnosis, hashes: bool,
                       workers: int | None = 1) -> None:
    """Each battle's final line against its trace folder (there; with ``hashes``, its files'
    sha256 and the line against the trace, in chunks on ``workers`` processes), in the order
    the battles first appear."""
    def wanted(packed: int) -> bool:
        return bool(packed & _FINAL) and (hashes or not packed & _ON_DISK)

    n_wanted = sum(1 for packed in diag.fold.values() if wanted(packed))
    if not n_wanted:
        return
    battles = store.battles_path(group)
    battle_dir = store.battle_dirs(group) if hashes else None  # the sessions dir and the group resolved once
    found: list[tuple[int, list[dict[str, Any]]]] = []  # (first line of the battle, its problems), problems only

    def traces() -> Iterator[tuple]:
        """The traces to check, as worker tasks; the other problems go to ``found`` as met."""
        for line in diag.lines():
            entry = line.entry
            if entry is None:
                continue
            battle_id = entry["battle_id"]
            packed = diag.fold[battle_id]
            if packed >> _LATEST_SHIFT & _LINE_MASK != line.number or not wanted(packed):
                continue
            first, folder = packed >> _FIRST_SHIFT & _LINE_MASK, battles / battle_id
            if battle_dir is not None:
                try:
                    battle_dir(battle_id)
                except PathOutsideSessionsDir as exc:
                    found.append((first, [problem(group, folder, None, None, exc.code, str(exc), False)]))
                    continue
            if not packed & _ON_DISK:
                found.append((first, [problem(
                    group, folder, None, None, IntegrityError.code,
                    f"battle {battle_id} is {entry['status']} in {diag.path} but its trace folder {folder} is "
                    f"missing; restore it from a backup (datasets refuse the group until then)", False)]))
            elif hashes:
                yield first, str(store.root), group, battle_id, entry, str(diag.path), line.number, str(folder)

    count = auto_workers(workers, n_wanted) if hashes else 1
    for chunk, results in map_chunks(traces(), count, TRACES_PER_TASK, CHECK_TRACES):
        work.check()  # a cancelled check stops between chunks (the pool's workers are stopped with it)
        found += [(task[0], problems) for task, problems in zip(chunk, results) if problems]
    found.sort(key=lambda item: item[0])
    for _, problems in found:
        diag.problems += problems


def _check_orphans(store: SessionStore, group: str, diag: Diagnosis, orphans: list[str]) -> None:
    """Trace folders without a final line: each one's line rebuilt from its intact trace
    (a repair appends it), or why it cannot be."""
    outcomes: list[tuple[str, dict[str, Any] | RLHFError]] = []
    for battle_id in orphans:
        try:
            outcomes.append((battle_id, store.rebuild_entry(group, battle_id)))
        except (CorruptRecord, IntegrityError, UnsupportedSchema, PathOutsideSessionsDir) as exc:
            outcomes.append((battle_id, exc))
    # what the catalog's lines say of the battles rebuilt (index, seed, battle_tag): one pass, when any has lines
    lined = {battle_id for battle_id, entry in outcomes if isinstance(entry, dict) and battle_id in diag.fold}
    keys: dict[str, set[tuple[Any, Any, Any]]] = {}
    for entry in diag.entries() if lined else ():
        if entry["battle_id"] in lined:
            keys.setdefault(entry["battle_id"], set()).add((entry["index"], entry["seed"], entry["battle_tag"]))
    battles = store.battles_path(group)
    for battle_id, outcome in outcomes:
        folder = battles / battle_id
        if not isinstance(outcome, dict):
            where = getattr(outcome, "details", None) or {}
            diag.problems.append(problem(
                group, where.get("path", folder), where.get("line"), where.get("field"), outcome.code,
                f"battle {battle_id} has a trace folder but no final catalog line, and its trace is not intact: "
                f"{outcome}", False))
            diag.blockers.append(f"the trace folder {folder} has no final catalog line and is not intact "
                                 f"({outcome}): restore it from a backup, or delete that folder so that the "
                                 f"battle is played again")
            continue
        if keys.get(battle_id, set()) - {(outcome["index"], outcome["seed"], outcome["battle_tag"])}:
            diag.blockers.append(f"the trace of battle {battle_id} disagrees with its catalog line (index, seed "
                                 f"or battle_tag)")
            diag.problems.append(problem(group, folder, None, None, IntegrityError.code,
                                         f"the trace of battle {battle_id} disagrees with its catalog line "
                                         f"(index, seed or battle_tag); restore one of them", False))
            continue
        diag.rebuilt[battle_id] = outcome
        diag.problems.append(problem(
            group, folder, None, None, "uncatalogued_trace",
            f"battle {battle_id} has an intact trace ({outcome['status']}) but no valid final line in "
            f"{diag.path}; a repair rebuilds the line from the trace", True))

def check_trace(store: SessionStore, group: str, battle_id: str, entry: dict[str, Any], catalog: Path, number: int,
                folder: Path, problems: list[dict[str, Any]],
                battle_dir: Callable[[str], Path] | None = None) -> None:
    """A final line against its trace: each file's sha256, then every other field against
    the line rebuilt from the trace (report only: neither is repaired). ``battle_dir``: the
    group's :meth:`SessionStore.battle_dirs`, when the caller checks many of its battles."""
    try:
        rebuilt: dict[str, Any] | None = store.rebuild_entry(
            group, battle_id, folder=battle_dir(battle_id) if battle_dir else None, written=entry["files"])
        error: RLHFError | None = None
    except (CorruptRecord, IntegrityError, UnsupportedSchema) as exc:
        rebuilt, error = None, exc
    for name in TRACE_FILES:
        file = trace_files.find(folder / "v5", name) or folder / "v5" / name
        state = "is missing"
        if rebuilt is not None:
            digest = rebuilt["files"][name]
        else:
            try:
                digest = hashlib.sha256(trace_files.read(file.parent, name)).hexdigest()
            except OSError:
                digest = None
            except trace_files.CompactFileError:
                digest, state = None, "is stored compact but does not decompress"
        if digest != entry["files"][name]:
            if digest is not None:
                state = "does not match the sha256 in its catalog line"
            problems.append(problem(
                group, file, None, None, IntegrityError.code,
                f"{file} {state} (battle {battle_id}); restore the trace from a backup (datasets refuse the "
                f"group until then)", False))
            return
    if rebuilt is None:  # the files are those the line describes, yet the trace does not read
        details = getattr(error, "details", None) or {}
        problems.append(problem(
            group, details.get("path", folder), details.get("line"), details.get("field"),
            getattr(error, "code", IntegrityError.code), f"the trace of battle {battle_id} matches its recorded "
            f"sha256 but is not a valid trace: {error}", False))
        return
    for key, value in rebuilt.items():
        # compact_sha256 is a reader's shortcut, not evidence: a battle compacted again since has another
        if key not in ("files", "compact_sha256") and entry.get(key, 0 if key == "omniscient_peeks" else None) != value:
            problems.append(problem(
                group, catalog, number, key, IntegrityError.code,
                f"{catalog} line {number}: field {key!r} of battle {battle_id} is {entry.get(key)!r}, but its "
                f"trace (which matches the recorded sha256) says {value!r}; the line was altered after it was "
                f"written: restore the catalog from a backup", False))
            return

def apply_repair(store: SessionStore, group: str, diag: Diagnosis) -> None:
    """Rewrite the catalog without the damaged lines, plus the rebuilt final lines (callers
    hold the group's locks and checked there are no blockers). What is dropped or rebuilt
    is appended to ``catalog-repairs.jsonl`` first."""
    path = store.catalog_path(group)
    log = store.repairs_path(group)
    now = utc_now()
    for line in diag.drop:
        append_line_locked(log, json.dumps({
            "schema_version": SESSIONS_SCHEMA_VERSION, "repaired_at": now, "action": "dropped",
            "line": line.number, "problem": str(line.error), "text": line.raw.decode("utf-8", "replace")},
            ensure_ascii=False, separators=(",", ":")), fsync=True)
    rebuilt = sorted(diag.rebuilt.items(), key=lambda kv: kv[1]["index"])
    for battle_id, entry in rebuilt:
        append_line_locked(log, json.dumps({
            "schema_version": SESSIONS_SCHEMA_VERSION, "repaired_at": now, "action": "rebuilt_from_trace",
            "battle_id": battle_id, "entry": entry}, ensure_ascii=False, separators=(",", ":")), fsync=True)
    kept = (line.raw + b"\n" for line in diag.lines() if line.entry is not None)
    added = (json.dumps({"schema_version": SESSIONS_SCHEMA_VERSION, **entry}, separators=(",", ":"),
                        ensure_ascii=False).encode() + b"\n" for _, entry in rebuilt)
    atomic_write_chunks(path, itertools.chain(kept, added))  # streamed: the catalog is never held
