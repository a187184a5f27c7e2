"""ReturnClock (natural return) datasets from production sessions (DESIGN sections 10, 10.1; issue 15).

:func:`export_returnclock_dataset` publishes the raw export ``<name>/v<N>`` (kind
``returnclock_export``); :func:`split_returnclock_training_dataset` publishes organic-only
train/val/test files (kind ``returnclock_split``); :func:`load_returnclock_training` is the
only loader a trainer gets, and it refuses the raw export.

Semantics (exactly; ``W = [start_at, end_at)``, ``cut = ingested_before`` or the snapshot)
-------------------------------------------------------------------------------------
- **Visible rows.** Only ``player_sessions`` and ``return_treatments`` rows with
  ``ingested_at < cut`` exist. Only sessions that *started* before ``end_at`` exist, and a
  session whose ``ended_at`` is at or after ``end_at`` counts as still open at ``end_at``:
  the export is what was knowable at ``end_at``.
- **One row per player session that ended in W** (``start_at <= ended_at < end_at``), either in
  the ``returnclock`` table or in ``excluded`` with a reason. The clock starts at ``ended_at``.
- **Event.** ``next_start`` = the earliest start of another visible session of the player that
  is strictly after ``ended_at`` and before ``end_at``: ``event = 1``, ``duration_seconds =
  next_start - ended_at``; none: ``event = 0``, censored, ``duration_seconds = end_at -
  ended_at``. Both are always > 0.
- **Sessions still open** (``ended_at`` NULL, or at/after ``end_at``): they give no row (their
  clock never started), but their start is a return for the player's previous session.
- **Overlapping sessions and a next session starting at the same instant** (``next.started_at
  == ended_at``, which would be a duration of 0 that survival fitters refuse): the player did
  not leave. A session S gives a row only if no other visible session T of the player has
  ``T.started_at <= S.ended_at`` and either ends later (or is still open) or ends at the same
  instant and comes after S in ``(started_at, session_id)`` order. Otherwise S goes to
  ``excluded`` with reason ``overlapped``. Equivalently, sessions are merged into activity
  islands (touching or overlapping intervals) and only the island's last-ending session (ties:
  the last in ``(started_at, session_id)`` order) carries the row: one row per departure.
- **A player with one session only**: its row is censored at ``end_at`` (event 0).
- **A session that ended before it started** (``ended_at < started_at``: a backend clock or
  write error) gives no row: it goes to ``excluded`` with reason ``ended_before_start`` (its
  ``session_seconds`` would be negative), whatever else applies. It covers no other session
  (its interval is empty), and its start still counts as the player's return.
- **Treated.** A row is treated when a visible treatment was assigned to that player with
  ``ended_at <= assigned_at < min(next_start, end_at)``, whatever its status now;
  ``treatments`` counts them, ``treatment``/``treatment_status`` audit the first one (by
  ``assigned_at, assignment_id``), ``exposed`` is true if any of them is sent or delivered.
  Treatments outside every row's interval (before ``start_at``, at/after ``end_at``, during a
  session, or ingested at/after the cut) treat nothing.
- Player ids become ``p-`` pseudonyms, session ids ``s-`` keys (pseudonyms.py); no raw id is
  written anywhere. ``pseudonym_key_id`` is in the manifest, the salt never.

Streaming (memory does not grow with the window)
-----------------------------------------------
One snapshot on two connections (reader.open_snapshot). The follower counts the window's
treatments (the ``return_treatments`` raw stream); the leader runs one query that computes every
row -- the activity islands and the next start by window functions over the player's sessions
ordered by ``started_at, session_id``, each row's treatments by a hash join on the player with the
row's interval as join filter -- and sends it by COPY as CSV, sorted by player (``COLLATE "C"``)
then ``ended_at`` (returnclock_query.py). Python holds one COPY buffer of about ``batch_bytes``,
at most two batches queued for the worker thread that parses and processes them, and one row group
per table; pseudonyms, keys, durations and covariates are computed on whole columns. The
manifest reports what was held (``production.memory.measured``).

Row ceiling (``max_rows``, at most 1,000,000 per raw stream): past ``max_rows`` session rows the
stream stops there (``LIMIT`` in the query); past ``max_rows`` treatments the export keeps the
rows before the first one whose interval could hold a treatment beyond the last one read (rows
of later players, or of the same player ending at or after that treatment), so every row it
keeps is exact. Either way ``complete: false, stop_reason: "row_ceiling"``, never ready,
published only when ``publish_incomplete=true``.

As for the V5 export (versions.py): an export identical to the latest version reuses it
(``reused: true``, no new version), and a complete one moves the ``<name>.complete`` pointer.

The split reads the raw export a batch at a time and holds one small entry per player
(its split assignment), as the other splits do; its manifest says how many it held.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from ..core.errors import Cancelled, InvalidArgument, NotReady, RLHFError
from ..core.readiness import ReadinessPolicy, returnclock_readiness
from ..datasets.assign import DEFAULT_FRACTIONS, DEFAULT_SPLIT_KEY, SPLITS, check_fractions, check_split_key
from ..datasets.manifest import write_manifest
from ..datasets.paths import DatasetsDir, check_dataset_name, check_positive_int
from ..datasets.pointers import manifest_sha256
from ..datasets.publish import publish_version
from ..datasets.splits import _SplitWriter
from ..datasets.tables import StreamingTable, iter_batches
from ..datasets.validate import validate_dir, validated_source
from .export import _iso, check_max_rows, check_window
from .gate import ProductionAccess, open_gate
from .pseudonyms import PSEUDONYM_RULE, keyed_ids
from .reader import SETTLE_S, close_connections, default_cut, open_snapshot, read_failed, until_stopped
from .versions import Reused, complete_step, identical_version, latest_complete
from .returnclock_query import (
    EXPOSED_STATUSES,
    PLANNER_SETTINGS,
    RETURNCLOCK_SQL,
    SESSION_COUNT_SQL,
    TREATMENT_COUNT_SQL,
    TREATMENT_CUT_SQL,
    CsvBatches,
    as_utc,
)

__all__ = ["export_returnclock_dataset", "split_returnclock_training_dataset", "load_returnclock_training",
           "EXPOSED_STATUSES", "CONTOUR"]

CONTOUR = "returnclock"
DEFAULT_ROW_GROUP_ROWS = 65_536
# measured: peak RSS flat from 80k to 1M rows (8 MiB batches: +50 MB at 1M, freed batch buffers kept by malloc)
DEFAULT_BATCH_BYTES = 1 << 20
TRAIN_COLUMNS = ("player", "session_key", "duration_seconds", "event", "session_seconds", "end_hour_utc")
SESSIONS, TREATMENTS = "player_sessions", "return_treatments"

_NEG_INF = datetime(1, 1, 2, tzinfo=timezone.utc)  # below any real instant; asyncpg sends it as a timestamptz
_POS_INF = datetime(9999, 12, 30, tzinfo=timezone.utc)
_US_PER_S, _US_PER_H = 1e6, 3.6e9
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class _CutReached(Exception):
    """Raised from the COPY sink once the rows past a treatments cut begin: nothing after matters."""


class _Stopped(Exception):
    pass


class _Rows:
    """The query's raw batches -> the ``returnclock`` and ``excluded`` tables: keyed ids,
    durations and covariates computed on whole columns. Raw ids end here."""

    def __init__(self, salt: bytes, end_at: datetime, tables: dict[str, StreamingTable], max_rows: int,
                 progress: Callable[[int, int], None] | None, cancel: Callable[[], bool] | None) -> None:
        self.salt, self.tables, self.max_rows = salt, tables, max_rows
        self.cut: tuple[str, datetime] | None = None  # set from the treatments count before any row
        self.total = 0
        self.end_us = _instant(end_at)
        self.progress, self.cancel = progress, cancel
        self.counts = dict.fromkeys(("rows", "events", "organic_rows", "organic_events", "treated_rows",
                                     "exposed_rows", "excluded"), 0)
        self.read = 0            # session rows read from the stream (kept + excluded)
        self.excluded_reasons: Counter[str] = Counter()
        self.stopped: str | None = None
        self.batches = self.peak_batch_rows = self.peak_arrow_bytes = 0

    def __call__(self, table: pa.Table) -> None:
        if self.stopped:
            raise _CutReached()
        raw = pa.RecordBatch.from_arrays([c.combine_chunks() for c in table.columns], names=table.column_names)
        if self.cancel is not None and self.cancel():
            raise Cancelled(f"ReturnClock export cancelled after {self.read} sessions; nothing was published")
        if self.read + raw.num_rows > self.max_rows:  # the query reads one row past the ceiling
            raw, self.stopped = raw.slice(0, self.max_rows - self.read), SESSIONS
        if self.cut is not None:
            raw = self._before_cut(raw)
        self.read += raw.num_rows
        self._write(raw)
        self.batches += 1
        self.peak_batch_rows = max(self.peak_batch_rows, raw.num_rows)
        self.peak_arrow_bytes = max(self.peak_arrow_bytes, pa.total_allocated_bytes())

    def report_progress(self) -> None:
        """``progress(session rows processed, session rows in the window)``; called on the
        export's own thread."""
        if self.progress is not None:
            self.progress(min(self.read, self.total), self.total)

    def _stop(self, raw: pa.RecordBatch) -> pa.Array:
        return pc.coalesce(as_utc(raw.column("next_start")), self.end_us)

    def _before_cut(self, raw: pa.RecordBatch) -> pa.RecordBatch:
        """The rows whose treatments all lie before the treatments cut: rows are in (player,
        ended_at) order and a player's row intervals are disjoint and ordered, so they are a
        prefix; the first row past it stops the export (``return_treatments`` hit the ceiling)."""
        player, at = self.cut
        players = raw.column("player_id")
        complete = pc.or_(pc.less(players, player),
                          pc.and_(pc.equal(players, player),
                                  pc.less_equal(self._stop(raw), _instant(at))))
        first_incomplete = pc.index(complete, False).as_py()
        if first_incomplete < 0:
            return raw
        self.stopped = TREATMENTS
        return raw.slice(0, first_incomplete)

    def _write(self, raw: pa.RecordBatch) -> None:
        if not raw.num_rows:
            return
        players = raw.column("player_id").dictionary_encode()
        pseudonyms = pa.array(keyed_ids(self.salt, "p", "player", players.dictionary.to_pylist()),
                              pa.string()).take(players.indices)
        keys = pa.array(keyed_ids(self.salt, "s", "session", raw.column("session_id").to_pylist()), pa.string())
        ended = as_utc(raw.column("ended_at"))
        reversed_ = pc.less(raw.column("ended_at"), raw.column("started_at"))
        kept = pc.and_(raw.column("kept"), pc.invert(reversed_))
        excluded = pc.invert(kept)
        n_excluded = _count(excluded)
        if n_excluded:
            reasons = pc.if_else(reversed_.filter(excluded), "ended_before_start", "overlapped")
            self.tables["excluded"].append([pseudonyms.filter(excluded), keys.filter(excluded), ended.filter(excluded),
                                            reasons])
            self.counts["excluded"] += n_excluded
            self.excluded_reasons.update(reasons.to_pylist())
        rows = raw.filter(kept)
        if not rows.num_rows:
            return
        ended, started = as_utc(rows.column("ended_at")), as_utc(rows.column("started_at"))
        next_start = as_utc(rows.column("next_start"))
        event = pc.is_valid(next_start)
        treatments = pc.fill_null(rows.column("treatments"), 0)
        treated = pc.greater(treatments, 0)
        exposed = pc.fill_null(rows.column("exposed"), False)
        self.tables["returnclock"].append([
            pseudonyms.filter(kept), keys.filter(kept), started, ended, next_start,
            _seconds(pc.subtract(self._stop(rows), ended)), event.cast(pa.int8()),
            _seconds(pc.subtract(ended, started)),
            pc.divide(pc.subtract(ended, pc.floor_temporal(ended, unit="day")).cast(pa.int64()), _US_PER_H),
            treated, treatments, rows.column("treatment"), rows.column("treatment_status"), exposed])
        organic = pc.invert(treated)
        self.counts["rows"] += rows.num_rows
        self.counts["events"] += _count(event)
        self.counts["organic_rows"] += _count(organic)
        self.counts["organic_events"] += _count(pc.and_(organic, event))
        self.counts["treated_rows"] += _count(treated)
        self.counts["exposed_rows"] += _count(exposed)

    def memory(self, copy_buffer_bytes: int, batch_bytes: int, row_group_rows: int) -> dict[str, Any]:
        """What the export held, measured: the largest COPY buffer and parsed batch, and the
        Arrow pool's peak (which includes the row group being written)."""
        return {"held": "one COPY buffer of about batch_bytes, at most two batches queued, one parsed batch and "
                        "one row group per table; the database sorts on its side",
                "grows_with_window": False, "batch_bytes": batch_bytes, "row_group_rows": row_group_rows,
                "measured": {"peak_copy_buffer_bytes": copy_buffer_bytes, "peak_batch_rows": self.peak_batch_rows,
                             "peak_arrow_bytes": self.peak_arrow_bytes, "batches": self.batches}}


def _instant(t: datetime) -> pa.Scalar:
    """A tz-aware instant as an Arrow scalar of the tables' timestamp type (integer microseconds:
    ``pa.scalar`` of a datetime would import pandas)."""
    us = (t - _EPOCH) // timedelta(microseconds=1)
    return pa.scalar(us, pa.int64()).cast(pa.timestamp("us", tz="UTC"))


def _seconds(duration: Any) -> pa.Array:
    return pc.divide(duration.cast(pa.int64()), _US_PER_S)


def _count(mask: Any) -> int:
    return pc.sum(mask.cast(pa.int64())).as_py() or 0


async def _treatment_cut(conn: Any, args: list, ceiling: int) -> tuple[int, tuple[str, datetime] | None]:
    """How many window treatments the stream reads (at most the ceiling) and, past the ceiling,
    the first one it would not read: ``(player_id, assigned_at)``."""
    count = await conn.fetchval(TREATMENT_COUNT_SQL, *args, ceiling + 1)
    if count <= ceiling:
        return count, None
    row = await conn.fetchrow(TREATMENT_CUT_SQL, *args, ceiling)
    return ceiling, (row["player_id"], row["assigned_at"])


async def _session_rows(conn: Any, args: list, ceiling: int) -> int:
    """How many session rows the stream will send (at most the ceiling): the progress total."""
    return min(await conn.fetchval(SESSION_COUNT_SQL, *args), ceiling)


async def _stream(leader: Any, follower: Any, args: list, ceiling: int, batch_bytes: int, make_rows: Callable,
                  access: ProductionAccess) -> tuple[_Rows, dict[str, dict[str, Any]], int]:
    """COPY the rows (leader) through :class:`_Rows` while the follower counts the treatments
    and the session rows; no row is processed before the counts (and so the cut) are known."""

    async def counted() -> tuple[int, tuple[str, datetime] | None, int]:
        try:
            treatments, cut = await _treatment_cut(follower, args, ceiling)
            return treatments, cut, await _session_rows(follower, args, ceiling)
        except RLHFError:
            raise
        except Exception as exc:  # noqa: BLE001 - mapped (reader.read_failed)
            raise read_failed(exc, f"stream {TREATMENTS} (counting)", access) from None

    counts = asyncio.ensure_future(counted())
    rows = make_rows()

    async def ready() -> None:
        _, rows.cut, rows.total = await counts

    batches = CsvBatches(batch_bytes, rows, rows.report_progress, ready=ready)
    try:
        await leader.execute(PLANNER_SETTINGS)
        await leader.copy_from_query(RETURNCLOCK_SQL, *args, ceiling + 1, output=batches.feed, format="csv")
        await ready()  # a window without rows never called it
        batches.finish()
        rows.report_progress()
    except _CutReached:
        pass
    except RLHFError:
        raise
    except Exception as exc:  # noqa: BLE001 - mapped (reader.read_failed)
        raise read_failed(exc, f"stream {SESSIONS} after {rows.read} rows", access) from None
    finally:
        batches.close()
        if not counts.done():
            counts.cancel()
        elif not counts.cancelled():
            counts.exception()  # retrieved: an error here was raised above already
    treatments, cut, _ = counts.result()
    streams = {SESSIONS: {"rows": rows.read, "ceiling_hit": rows.stopped == SESSIONS, "max_rows": ceiling},
               TREATMENTS: {"rows": treatments, "ceiling_hit": cut is not None, "max_rows": ceiling}}
    return rows, streams, batches.peak_bytes


def export_returnclock_dataset(start_at: Any, end_at: Any, *, name: str, ingested_before: Any = None,
                               max_rows: int | None = None, datasets_dir: str | Path | DatasetsDir = "datasets",
                               overwrite: bool = False, publish_incomplete: bool = False,
                               policy: ReadinessPolicy | dict | None = None,
                               row_group_rows: int = DEFAULT_ROW_GROUP_ROWS, batch_bytes: int = DEFAULT_BATCH_BYTES,
                               environ: dict[str, str] | None = None,
                               progress: Callable[[int, int], None] | None = None,
                               cancel: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Export the ReturnClock rows of ``[start_at, end_at)`` as ``<name>/v<N>`` (see the module
    docstring). ``start_at`` None: every session that ended before ``end_at``. Returns the
    dataset id, path, row counts, per-stream counts, completeness and readiness; a row-ceiling
    stop returns ``published: false`` unless ``publish_incomplete``. ``reused`` and
    ``latest_complete`` as for ``export_production_v5_dataset``."""
    access = open_gate(environ)
    window = check_window(start_at, end_at, ingested_before)
    name = check_dataset_name(name)
    ceiling = check_max_rows(max_rows)
    if not isinstance(publish_incomplete, bool):
        raise InvalidArgument(f"publish_incomplete must be true or false, got {publish_incomplete!r}")
    check_positive_int(row_group_rows, "row_group_rows")
    check_positive_int(batch_bytes, "batch_bytes")
    policy = ReadinessPolicy.coerce(policy)
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    complete_pointer = complete_step(dirs, name)
    args = [window.end_at, window.start_at or _NEG_INF, window.ingested_before or _POS_INF]
    facts: dict[str, Any] = {}
    # a Runner: Ctrl-C cancels the running step (its statement is cancelled on the server), and
    # closing it cancels and awaits whatever is left, so no task outlives the export
    runner = asyncio.Runner()
    conns: list[Any] = []

    def build(folder: Path, dataset_id: str, version: int) -> dict[str, Any]:
        leader, follower = conns
        tables = {"returnclock": StreamingTable(folder / "returnclock.parquet", "returnclock", row_group_rows),
                  "excluded": StreamingTable(folder / "excluded.parquet", "returnclock_excluded", row_group_rows)}
        try:
            rows, streams, copy_peak = runner.run(until_stopped(_stream(
                leader, follower, args, ceiling, batch_bytes, access=access,
                make_rows=lambda: _Rows(access.salt, window.end_at, tables, ceiling, progress, cancel)),
                cancel, "the ReturnClock export"))
            facts["streams"] = streams
            stopped = rows.stopped
            if stopped and not publish_incomplete:
                facts["stopped_on"] = stopped
                raise _Stopped()
            written = {k: {**w.close(), "table": w.table} for k, w in tables.items()}
        except BaseException:
            for w in tables.values():
                w.abort()
            raise
        counts, complete = rows.counts, stopped is None
        evidence = {"source_kind": "production", "complete": complete, **counts, "integrity_failures": []}
        readiness = returnclock_readiness(evidence, policy)
        production = {"window": {"start_at": _iso(window.start_at), "end_at": _iso(window.end_at),
                                 "ingested_before": facts["ingested_before"],
                                 "ingested_before_is_default": window.ingested_before is None,
                                 "settle_seconds": SETTLE_S if window.ingested_before is None else None},
                      "snapshot_at": facts["snapshot_at"], "streams": streams, "complete": complete,
                      "stop_reason": None if complete else "row_ceiling", "stopped_stream": stopped,
                      "max_rows": ceiling, "memory": rows.memory(copy_peak, batch_bytes, row_group_rows)}
        manifest = write_manifest(
            folder, dataset_id=dataset_id, name=name, version=version, kind="returnclock_export", tables=written,
            sources={"kind": "production", "database": "production (read-only snapshot; DSN not recorded)",
                     "window": production["window"], "snapshot_at": facts["snapshot_at"]},
            readiness=readiness,
            extra={"production": production, "returnclock": {"counts": counts,
                   "excluded_by_reason": dict(sorted(rows.excluded_reasons.items())), "semantics": "see "
                   "extrarlhf.production.returnclock (module docstring)", "exposed_statuses": list(EXPOSED_STATUSES)},
                   "pseudonymized": True, "anonymous": False, "pseudonym_key_id": access.key_id,
                   "pseudonym_rule": PSEUDONYM_RULE, "complete": complete, "stop_reason": production["stop_reason"],
                   "options": {"row_group_rows": row_group_rows, "max_rows": ceiling, "batch_bytes": batch_bytes}})
        built = {"kind": "returnclock_export", "row_counts": manifest["row_counts"], "counts": counts,
                 "excluded_by_reason": dict(sorted(rows.excluded_reasons.items())),
                 "readiness": {"returnclock_ready": readiness["returnclock_ready"],
                               "returnclock_blockers": readiness["returnclock_blockers"]},
                 "complete": complete, "stop_reason": production["stop_reason"], "stopped_stream": stopped,
                 "streams": streams, "window": production["window"], "snapshot_at": facts["snapshot_at"],
                 "memory": production["memory"]["measured"],
                 "pseudonym_key_id": access.key_id, "pseudonymized": True, "anonymous": False}
        same = identical_version(dirs, name, manifest, validate_dir)
        if same:
            raise Reused(*same, built)
        return built

    try:  # connect, check the schema and take the snapshot before anything is written
        leader, follower, snapshot_at = runner.run(until_stopped(
            open_snapshot(access, (SESSIONS, TREATMENTS)), cancel, "the ReturnClock export"))
        conns[:] = [leader, follower]
        facts["snapshot_at"] = _iso(snapshot_at)
        args[2] = window.ingested_before or default_cut(window.end_at, snapshot_at)  # explicit, and recorded
        facts["ingested_before"] = _iso(args[2])
        result = {**publish_version(dirs, name, build, overwrite=overwrite, validate=validate_dir,
                                    before_commit=complete_pointer), "reused": False}
    except Reused as same:
        complete_pointer(same.path, same.result, same.version)
        result = same.publication(name)
    except _Stopped:
        stream = facts["stopped_on"]
        return {"published": False, "complete": False, "stop_reason": "row_ceiling", "stopped_stream": stream,
                "streams": facts["streams"], "snapshot_at": facts.get("snapshot_at"), "max_rows": ceiling,
                "message": f"stopped: stream {stream} has more than {ceiling:,} rows in this window (the row "
                           f"ceiling); nothing was published. Export a shorter window, or pass "
                           f"publish_incomplete=true to keep an incomplete, never-ready export for inspection",
                "latest_complete": latest_complete(dirs, name)}
    finally:
        try:
            runner.run(close_connections(*conns))
        finally:
            runner.close()
    result["published"] = True
    result["latest_complete"] = latest_complete(dirs, name)
    return result


def split_returnclock_training_dataset(dataset: str, *, name: str | None = None, fractions: Any = DEFAULT_FRACTIONS,
                                       split_key: str = DEFAULT_SPLIT_KEY,
                                       datasets_dir: str | Path | DatasetsDir = "datasets",
                                       overwrite: bool = False, policy: ReadinessPolicy | dict | None = None,
                                       row_group_rows: int = DEFAULT_ROW_GROUP_ROWS,
                                       cancel: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Organic-only (treated rows dropped) train/val/test of a ReturnClock export, grouped by
    player pseudonym with the keyed-hash assignment (assign.py), published as ``name``
    (default ``<source>-split``). Refused unless the source validates, is complete and the
    returnclock contour is ready. A local operation on already-pseudonymized data: it reads
    no production database, so it needs no open gate. ``cancel()`` true stops it (nothing
    published)."""
    fractions = check_fractions(fractions)
    split_key = check_split_key(split_key)
    check_positive_int(row_group_rows, "row_group_rows")
    policy = ReadinessPolicy.coerce(policy)
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved, source = validated_source(
        dirs, dataset, lambda m: None if m.get("kind") == "returnclock_export" else
        f"is a {m.get('kind')} dataset; ReturnClock splits are made from a ReturnClock export "
        f"(export_returnclock_dataset)", "export it again")
    name = check_dataset_name(name if name is not None else f"{resolved.name}-split")
    if name == resolved.name:
        raise InvalidArgument("a split is a new dataset: give it another name than its source")
    readiness = returnclock_readiness((source.get("readiness") or {}).get("evidence") or {}, policy)
    if not readiness["returnclock_ready"]:
        raise NotReady(f"returnclock is not ready for {resolved.dataset_id}: "
                       + "; ".join(readiness["returnclock_blockers"]), readiness["returnclock_blockers"])

    def build(folder: Path, dataset_id: str, version: int) -> dict[str, Any]:
        dropped = peak_arrow = 0
        with _SplitWriter(folder, "returnclock_train", "player", CONTOUR, fractions, split_key,
                          row_group_rows) as writer:
            for batch in iter_batches(resolved.path / "returnclock.parquet", [*TRAIN_COLUMNS, "treated"], 65_536):
                if cancel is not None and cancel():
                    raise Cancelled(f"ReturnClock split {name} cancelled; nothing was published")
                table = pa.Table.from_batches([batch])
                organic = pc.invert(table.column("treated"))
                dropped += table.num_rows - pc.sum(organic.cast(pa.int64())).as_py()
                kept = table.filter(organic).select(list(TRAIN_COLUMNS))
                writer.write(kept)
                peak_arrow = max(peak_arrow, pa.total_allocated_bytes())
            tables, summary = writer.close()
        memory = {"held": "one 65,536-row batch of the export, a row group per split, and one small entry per "
                          "player (its assignment: written to assignments.parquet at the end)",
                  "grows_with_window": "with the players only (one entry each), not with their sessions",
                  "measured": {"players_held": sum(summary["groups"].values()), "peak_arrow_bytes": peak_arrow}}
        split_block = {"contour": CONTOUR, "group_key": "player", "group_key_column": "player",
                       "fractions": dict(zip(SPLITS, fractions)), "split_key": split_key,
                       "assignment": "HMAC-SHA256(split_key, contour + '\\0' + group_key)[:8] / 2**64 -> "
                                     "train < f_train <= val < f_train + f_val <= test",
                       "organic_only": True, "treated_rows_dropped": dropped,
                       "lifelines": {"duration_col": "duration_seconds", "event_col": "event",
                                     "covariates": ["session_seconds", "end_hour_utc"]}, "memory": memory,
                       **summary}
        manifest = write_manifest(
            folder, dataset_id=dataset_id, name=name, version=version, kind="returnclock_split", tables=tables,
            sources={"kind": "dataset", "dataset_id": resolved.dataset_id,
                     "manifest_sha256": manifest_sha256(resolved.path), "row_counts": source["row_counts"],
                     "production": {k: (source.get("production") or {}).get(k) for k in ("window", "snapshot_at")}},
            readiness=readiness,
            extra={"split": split_block, "pseudonymized": True, "anonymous": False,
                   "pseudonym_key_id": source.get("pseudonym_key_id")})
        return {"kind": "returnclock_split", "source": resolved.dataset_id, "row_counts": manifest["row_counts"],
                "split": {k: split_block[k] for k in ("contour", "group_key", "fractions", "groups", "rows",
                                                      "treated_rows_dropped", "memory")}}

    return publish_version(dirs, name, build, overwrite=overwrite, validate=validate_dir)


def load_returnclock_training(dataset: str, split: str = "train", *,
                              datasets_dir: str | Path | DatasetsDir = "datasets") -> pa.Table:
    """One split (``train``, ``val`` or ``test``) of a ReturnClock split dataset, for trainers.
    Refuses anything else, in particular the raw export (it holds treated rows)."""
    if split not in SPLITS:
        raise InvalidArgument(f"split must be one of {list(SPLITS)}, got {split!r}")
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved, _manifest = validated_source(
        dirs, dataset, lambda m: None if m.get("kind") == "returnclock_split" else
        f"is a {m.get('kind')} dataset; ReturnClock trainers read only the organic-only splits "
        f"(split_returnclock_training_dataset), never the raw export", "split the export again")
    import pyarrow.parquet as pq

    # validation refused any row a survival fitter would refuse (duration_seconds <= 0, event not 0/1)
    return pq.ParquetFile(resolved.path / f"{split}.parquet").read(use_threads=False)
