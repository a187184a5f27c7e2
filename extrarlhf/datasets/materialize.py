"""``materialize_v5_dataset``: session groups -> Parquet tables ``decisions``, ``turns``,
``battles`` (+ ``excluded``) and ``manifest.json``, published as a fresh version.

Streaming: battles are read one at a time (three small trace files each), their rows are
appended to column buffers, and the buffers become one Parquet row group per table once
``row_group_rows`` decisions have accumulated (always at a battle boundary). Memory holds
one row group and a bounded window of battles being read; what grows with the battles is
small: the offset of each battle's catalog line (8 bytes; the fold that finds them, about 200
bytes a battle, lives while the catalog is read), the distinct deck ids, and the validation's
row count per battle id (the battles table is checked against the decisions). Reading and feature computation (battles.py) run on ``workers``
processes, this one included (default: one per core up to 4, for 64 battles or more); the
rows are written in catalog order whatever the number of workers, so the Parquet files are
byte-identical. The decisions checks of validation run on the batches as they are written,
so publishing does not read the table back (its bytes are still hashed against the manifest).

Only finished, non-degraded battles enter the training tables; every other battle of the
source groups gets a row in ``excluded`` with its reason. Integrity is checked on the way:
each trace file must hash to its catalog digest, the records must be well formed, every
chosen action legal and the decision indexes contiguous; a failure stops the
materialization (``integrity_error``) unless ``exclude_corrupt=True``, which excludes the
battle with reason ``integrity`` instead.

Action features come from the engine: each battle is replayed from its first recorded state
with the recorded actions (cheaper than rebuilding every state, and a check: the legal set
must match at every decision and the last state must hash to the recorded
``final_state_hash``). A battle that does not replay (e.g. recorded by another engine
version) falls back to ``State.from_dict(state_before)`` per decision and is marked
``replay_verified: false``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from array import array
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator

import pyarrow as pa

import engine

from ..core.errors import Cancelled, IntegrityError, InvalidArgument, RLHFError, UnsupportedSchema
from ..core.names import check_name
from ..core.readiness import ReadinessPolicy, contour_readiness
from ..runtime.catalog_lines import entry_at, fold_offsets
from ..runtime.sessions import Passes, SessionStore, read_meta
from .manifest import write_manifest
from .paths import DatasetsDir, check_dataset_name, check_pointer_name, check_positive_int
from .pointers import PointerStep
from ..core.procpool import auto_workers, map_chunks
from .publish import publish_version
from .row_batches import Columns, battle_batches
from .tables import StreamingTable
from .validate import DecisionChecks, validate_dir

__all__ = ["materialize_v5_dataset", "snapshot_group", "GroupSnapshot", "TableBuilder", "auto_workers",
           "short_readiness"]

DEFAULT_ROW_GROUP_ROWS = 4096


@dataclass
class GroupSnapshot:
    """A session group's catalog as read once: its hash, and where each battle's latest line is.

    The catalog stays open until :meth:`close` (the file as hashed, whatever is appended or
    renamed over it since) and the entries are read again at their offsets for each pass
    (:meth:`entries`): memory holds 8 bytes a battle, not its entry."""

    group: str
    manifest: dict[str, Any]
    catalog_sha256: str
    catalog_lines: int
    catalog_bytes: int
    path: Path
    handle: BinaryIO
    offsets: array  # of each battle's latest line, in (index, battle_id) order
    by_status: dict[str, int]

    def entries(self) -> Iterator[dict[str, Any]]:
        """Each battle's entry (``started`` shown as ``unfinished``), by index."""
        return (entry_at(self.path, self.handle, offset, self.catalog_bytes) for offset in self.offsets)

    def close(self) -> None:
        self.handle.close()

    def source(self) -> dict[str, Any]:
        return {"group": self.group, "catalog_sha256": self.catalog_sha256, "catalog_lines": self.catalog_lines,
                "battles": len(self.offsets), "by_status": self.by_status,
                "created_at": self.manifest.get("created_at"), "configuration": self.manifest.get("configuration"),
                "obs_version": self.manifest.get("obs_version"), "engine_version": self.manifest.get("engine_version"),
                "seeds": self.manifest.get("seeds")}


class _Hashed:
    """A catalog's lines as they are read, hashed on the way (sha256, bytes, non-blank lines)."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle, self.sha256, self.bytes, self.lines = handle, hashlib.sha256(), 0, 0

    def __iter__(self) -> Iterator[bytes]:
        for raw in self.handle:
            self.sha256.update(raw)
            self.bytes += len(raw)
            self.lines += sum(1 for part in raw.splitlines() if part.strip())
            yield raw


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    if path.exists():
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


def snapshot_group(store: SessionStore, group: str) -> GroupSnapshot:
    """Read a group's catalog consistently (re-read until it did not change while folding);
    the caller closes the snapshot."""
    manifest = store.read_manifest(group)
    path = store.group_dir(group) / "catalog.jsonl"
    for _ in range(20):
        handle: BinaryIO = open(path, "rb") if path.exists() else io.BytesIO()
        try:
            read = _Hashed(handle)
            latest = fold_offsets(path, read)
            if read.sha256.hexdigest() == _file_sha256(path):
                break
        except BaseException:
            handle.close()
            raise
        handle.close()
    else:
        raise RLHFError(f"session group {group!r} kept changing while its catalog was read; materialize it when "
                        f"its series is done", "group_busy")
    order = sorted((index, battle_id, offset) for battle_id, (index, offset) in latest.items())
    del latest
    snap = GroupSnapshot(group, manifest, read.sha256.hexdigest(), read.lines, read.bytes, path, handle,
                         array("q", (offset for _, _, offset in order)), {})
    del order
    try:
        snap.by_status = dict(sorted(Counter(e["status"] for e in snap.entries()).items()))
        # one dataset records one configuration per group: a manifest edited after its battles were played is refused
        store.require_agreeing_manifest(group, Passes(snap.entries), "nothing was materialized")
    except BaseException:
        snap.close()
        raise
    return snap


def _check_groups(groups: Any) -> list[str]:
    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, (list, tuple)) or not groups:
        raise InvalidArgument("groups must be a non-empty list of session group names")
    out = [check_name(g, "group") for g in groups]
    dupes = sorted(g for g, n in Counter(out).items() if n > 1)
    if dupes:
        raise InvalidArgument(f"group(s) {dupes} named more than once")
    return out


class TableBuilder:
    """Buffers record batches of the tables and writes a row group per table each time
    ``row_group_rows`` decisions have accumulated (at a chunk boundary).

    ``layouts`` maps each file (``<name>.parquet``) to its column layout in tables.TABLES;
    ``row_tables`` are filled a row at a time (:meth:`add_row`; ``excluded`` through
    :meth:`exclude`), the others from the record batches given to :meth:`add`."""

    def __init__(self, folder: Path, row_group_rows: int, checks: DecisionChecks,
                 layouts: dict[str, str] | None = None, row_tables: tuple[str, ...] = ("excluded",)) -> None:
        self.row_group_rows = row_group_rows
        self.checks = checks
        self.layouts = layouts or {t: t for t in ("decisions", "turns", "battles", "excluded")}
        self.writers: dict[str, StreamingTable] = {}
        try:
            for t, layout in self.layouts.items():
                self.writers[t] = StreamingTable(folder / f"{t}.parquet", layout, row_group_rows)
        except BaseException:
            self.abort()
            raise
        self.pending: dict[str, list[pa.RecordBatch]] = {t: [] for t in self.layouts if t not in row_tables}
        self.rows = {t: Columns(self.layouts[t]) for t in row_tables}
        self.pending_rows = 0
        # evidence for the readiness block
        self.decks: set[str] = set()
        self.hvh_decks: set[str] = set()
        self.included = self.decisions_total = self.replay_failures = self.hvh = 0
        self.tags: Counter = Counter()
        self.excluded_reasons: Counter = Counter()
        self.human_battles: list[tuple[str, str]] = []

    def add(self, batches: dict[str, pa.RecordBatch]) -> None:
        for table, batch in batches.items():
            self.pending[table].append(batch)
        self.checks.feed(batches["decisions"])
        battles = batches["battles"]
        if battles.num_rows:
            cols = battles.select(["p1_deck_id", "p2_deck_id", "battle_tag", "replay_verified", "p1_type",
                                   "p2_type", "group", "battle_id"]).to_pydict()
            self.decks.update(cols["p1_deck_id"], cols["p2_deck_id"])
            # only a person's think times are ever observed (the arena's; Metronome counts them by opt-in)
            self.human_battles += [(g, b) for g, b, p1 in zip(cols["group"], cols["battle_id"], cols["p1_type"])
                                   if p1 == "human"]
            for p1, p2, d1, d2 in zip(cols["p1_type"], cols["p2_type"], cols["p1_deck_id"], cols["p2_deck_id"]):
                if p1 == p2 == "human":  # production rows only: in session groups player 2 is a bot or a model
                    self.hvh += 1
                    self.hvh_decks.update((d1, d2))
            self.tags.update(cols["battle_tag"])
            self.replay_failures += cols["replay_verified"].count(False)
            self.included += battles.num_rows
        self.decisions_total += batches["decisions"].num_rows
        self.pending_rows += batches["decisions"].num_rows
        if self.pending_rows >= self.row_group_rows:
            self.flush()

    def add_row(self, table: str, row: dict[str, Any]) -> None:
        self.rows[table].append(row)

    def exclude(self, row: dict[str, Any]) -> None:
        self.add_row("excluded", row)
        self.excluded_reasons[row["reason"]] += 1

    def flush(self) -> None:
        for table, batches in self.pending.items():
            if batches:
                self.writers[table].write_table(pa.Table.from_batches(batches))
                batches.clear()
        self.pending_rows = 0
        for table, columns in self.rows.items():
            if len(columns):
                self.writers[table].write(columns.arrays())

    def close(self) -> dict[str, dict[str, Any]]:
        try:
            self.flush()
            return {t: {**w.close(), "table": self.layouts[t]} for t, w in self.writers.items()}
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Release every writer after a failed build (the files are deleted next); never raises."""
        for writer in self.writers.values():
            writer.abort()

    def __enter__(self) -> "TableBuilder":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """Used as ``with TableBuilder(...) as builder:``, any error aborts the writers."""
        if exc_type is not None:
            self.abort()


_EXCLUDE_DETAIL = {
    "unfinished": "no final catalog line (its process died, or it is still being played); it has no trace",
    "abandoned": "abandoned before its end; never training-ready",
    "crashed": "crashed; never training-ready",
    "degraded": "a policy fell back during the battle (degraded); never training-ready",
    "omniscient_peek": "the omniscient view was shown to a player mid-battle; its decisions are tainted",
}


def _exclusion(status: str, degraded: Any, peeks: Any) -> str | None:
    """Why a battle stays out of the training tables, or None when it is eligible."""
    if status != "finished":
        return status
    if degraded:
        return "degraded"
    if peeks:
        return "omniscient_peek"
    return None
TASK_BATTLES = 8          # battles per worker task
READ_CHUNK = "extrarlhf.datasets.battles:read_battles"  # what a worker does with them (it never imports pyarrow)


def arena_think_times(battle_dir: Path) -> int:
    """The observed arena think times of one battle's trace (0 when it has none)."""
    think = (read_meta(battle_dir).get("audit") or {}).get("think_times") or {}
    return len(think.get("decisions") or []) if think.get("provenance") == "arena" else 0


def materialize_v5_dataset(groups: str | Iterable[str], name: str, *, sessions_dir: str | Path = "sessions",
                           datasets_dir: str | Path | DatasetsDir = "datasets", version: int | None = None,
                           overwrite: bool = False, promote: str | None = None,
                           policy: ReadinessPolicy | dict | None = None, exclude_corrupt: bool = False,
                           row_group_rows: int = DEFAULT_ROW_GROUP_ROWS, workers: int | None = None,
                           progress: Callable[[int, int], None] | None = None,
                           cancel: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Materialize session groups into a new dataset version ``<name>/v<N>``; returns a summary
    (dataset_id, path, row counts, exclusions, readiness, pointer). See the module docstring."""

    groups = _check_groups(list(groups) if not isinstance(groups, str) else groups)
    if workers is not None:
        auto_workers(workers, 0)
    name = check_dataset_name(name)
    if promote is not None:
        check_pointer_name(promote)
    check_positive_int(row_group_rows, "row_group_rows")
    policy = ReadinessPolicy.coerce(policy)
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    pointer = PointerStep(dirs, promote, name) if promote else None  # its place is checked before any work
    store = SessionStore(sessions_dir)
    with contextlib.ExitStack() as stack:
        snapshots = []
        for group in groups:
            snapshots.append(snapshot_group(store, group))
            stack.callback(snapshots[-1].close)
        result = _materialize(snapshots, name, store, dirs, version, overwrite, pointer, policy, exclude_corrupt,
                              row_group_rows, workers, progress, cancel)
    result["pointer"] = pointer.doc if pointer else None
    return result


def _materialize(snapshots: list[GroupSnapshot], name: str, store: SessionStore, dirs: DatasetsDir,
                 version: int | None, overwrite: bool, pointer: PointerStep | None, policy: ReadinessPolicy,
                 exclude_corrupt: bool, row_group_rows: int, workers: int | None,
                 progress: Callable[[int, int], None] | None, cancel: Callable[[], bool] | None) -> dict[str, Any]:
    """:func:`materialize_v5_dataset` of checked arguments and open snapshots."""
    sessions_dir = store.root
    for snap in snapshots:
        if snap.manifest.get("obs_version") != engine.OBS_VERSION:
            raise UnsupportedSchema(f"session group {snap.group!r} records obs_version "
                                    f"{snap.manifest.get('obs_version')!r}; this engine computes layout "
                                    f"{engine.OBS_VERSION}, and one dataset holds one layout")
    total = sum(len(s.offsets) for s in snapshots)

    checks = DecisionChecks(engine.OBS_VERSION)  # run on the batches as written: no read-back before publishing

    def build(folder: Path, dataset_id: str, version: int) -> dict[str, Any]:
        with TableBuilder(folder, row_group_rows, checks) as builder:  # a failure aborts its writers
            done = 0
            for snap in snapshots:
                for e in snap.entries():
                    reason = _exclusion(e["status"], e.get("degraded"), e.get("omniscient_peeks") or 0)
                    if reason is not None:
                        builder.exclude({"battle_id": e["battle_id"], "group": snap.group, "battle_index": e["index"],
                                         "status": e["status"], "decisions": e.get("decisions"), "reason": reason,
                                         "detail": _EXCLUDE_DETAIL[reason]})
                        done += 1
            if progress and done:
                progress(done, total)
            battle_dirs = {snap.group: store.battle_dirs(snap.group) for snap in snapshots}
            tasks = ((snap.group, e["battle_id"], e["index"], str(battle_dirs[snap.group](e["battle_id"])),
                      e.get("files"), e.get("compact_sha256"))
                     for snap in snapshots for e in snap.entries()
                     if _exclusion(e["status"], e.get("degraded"), e.get("omniscient_peeks") or 0) is None)
            for chunk, (outcomes, rows) in map_chunks(tasks, auto_workers(workers, total - done), TASK_BATTLES,
                                                      READ_CHUNK):
                for (group, battle_id, index, *_trace), (state, detail) in zip(chunk, outcomes):
                    if state == "ok":
                        continue
                    if not exclude_corrupt:
                        raise IntegrityError(f"{detail}. Restore the file, delete the battle folder and re-run its "
                                             f"series, or pass exclude_corrupt=true to leave the battle out")
                    builder.exclude({"battle_id": battle_id, "group": group, "battle_index": index,
                                     "status": "finished", "reason": "integrity", "detail": detail,
                                     "decisions": None})
                builder.add(battle_batches(rows))  # here: the workers start without pyarrow
                done += len(chunk)
                if progress:
                    progress(done, total)
                if cancel is not None and cancel():
                    raise Cancelled(f"materialization of {name} cancelled after {done} of {total} battles; nothing "
                                    f"was published")
            tables = builder.close()
        evidence = {"source_kind": "dataset", "eligible_battles": builder.included,
                    "eligible_decisions": builder.decisions_total, "distinct_decks": len(builder.decks),
                    "human_vs_human_battles": builder.hvh, "human_vs_human_decks": len(builder.hvh_decks),
                    "metronome_labels": 0, "timestamp_labels": 0,
                    "arena_metronome_labels": sum(arena_think_times(store.battle_dir(g, b))
                                                  for g, b in builder.human_battles),
                    "integrity_failures": ([f"{builder.replay_failures} included battles do not replay on this "
                                            f"engine"] if builder.replay_failures else [])}
        readiness = contour_readiness(evidence, policy)
        exclusions = {"count": sum(builder.excluded_reasons.values()),
                      "by_reason": dict(sorted(builder.excluded_reasons.items())),
                      "table": "excluded"}
        manifest = write_manifest(
            folder, dataset_id=dataset_id, name=name, version=version, kind="v5_decisions", tables=tables,
            sources={"kind": "session_groups", "sessions_dir": str(Path(sessions_dir).resolve()),
                     "groups": [s.source() for s in snapshots]},
            readiness=readiness,
            extra={"exclusions": exclusions,
                   "battle_tags": dict(sorted(builder.tags.items())),
                   "replay_unverified_battles": builder.replay_failures,
                   "options": {"row_group_rows": row_group_rows, "exclude_corrupt": exclude_corrupt}})
        return {"kind": "v5_decisions", "row_counts": manifest["row_counts"], "exclusions": exclusions,
                "readiness": short_readiness(readiness)}

    return publish_version(dirs, name, build, version=version, overwrite=overwrite,
                           validate=lambda folder: validate_dir(folder, decisions=checks), before_commit=pointer)


def short_readiness(readiness: dict[str, Any]) -> dict[str, Any]:
    keys = ("v5_policy_training_ready", "v5_policy_blockers", "training_ready", "training_ready_scope",
            "nemesis_lite_ready", "nemesis_lite_blockers", "training_ready_standard", "standard_readiness_blockers",
            "metronome_ready", "metronome_blockers", "timestamp_ready", "timestamp_blockers")
    return {k: readiness[k] for k in keys}
