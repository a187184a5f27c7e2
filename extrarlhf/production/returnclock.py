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
One snapshot on two connections (reader.open_snapshot). The leader streams the sessions
through a server-side cursor, with the activity islands and the next start computed in SQL by
window functions (a running max of ends and ``lead`` over the player partition ordered by
``started_at, session_id``), sorted by player (``COLLATE "C"``) then ``ended_at``. The follower
streams the treatments sorted the same way ``(player, assigned_at)``; a merge walks both
(row intervals of a player are disjoint and ordered). Python holds one prefetch batch per
cursor and one row group per table. Each raw stream counts against ``max_rows`` (at most
1,000,000): the ceiling stops the export (``complete: false, stop_reason: "row_ceiling"``),
never ready, published only when ``publish_incomplete=true``.

The split reads the raw export a batch at a time and holds one small entry per player
(its split assignment), as the other splits do.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pyarrow as pa
import pyarrow.compute as pc

from ..datasets.assign import DEFAULT_FRACTIONS, DEFAULT_SPLIT_KEY, SPLITS, check_fractions, check_split_key
from ..datasets.manifest import read_manifest, write_manifest
from ..datasets.paths import DatasetsDir, check_dataset_name, check_positive_int
from ..datasets.pointers import manifest_sha256, resolve
from ..datasets.publish import publish_version
from ..datasets.splits import _SplitWriter
from ..datasets.tables import Columns, StreamingTable, iter_batches
from ..datasets.validate import validate_dir
from ..errors import Cancelled, InvalidArgument, NotReady, RLHFError, ValidationFailed
from ..readiness import ReadinessPolicy, returnclock_readiness
from .export import _iso, check_max_rows, check_window
from .gate import open_gate
from .pseudonyms import PSEUDONYM_RULE, player_pseudonym, session_key
from .reader import ProductionReadError, is_server_error, open_snapshot

__all__ = ["export_returnclock_dataset", "split_returnclock_training_dataset", "load_returnclock_training",
           "SESSIONS_SQL", "TREATMENTS_SQL", "EXPOSED_STATUSES", "CONTOUR"]

CONTOUR = "returnclock"
EXPOSED_STATUSES = frozenset({"sent", "delivered"})
DEFAULT_ROW_GROUP_ROWS = 65_536
DEFAULT_PREFETCH = 10_000
TRAIN_COLUMNS = ("player", "session_key", "duration_seconds", "event", "session_seconds", "end_hour_utc")

# $1 end_at, $2 start_at (-infinity when none), $3 cut (infinity when none). Sessions whose
# effective end is before start_at cannot change any row of the window (they end before every
# departure the window holds), so they are not read.
SESSIONS_SQL = """
WITH s AS (
  SELECT session_id, player_id, started_at, ended_at,
         CASE WHEN ended_at < $1::timestamptz THEN ended_at ELSE 'infinity'::timestamptz END AS eff_end
  FROM player_sessions
  WHERE ingested_at < $3::timestamptz AND started_at < $1::timestamptz
    AND (ended_at IS NULL OR ended_at >= $2::timestamptz)
), a AS (
  SELECT s.*, max(eff_end) OVER (p ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_max_end,
         lead(started_at) OVER p AS lead_start
  FROM s WINDOW p AS (PARTITION BY player_id ORDER BY started_at, session_id)
), b AS (
  SELECT a.*,
         sum(CASE WHEN prev_max_end IS NULL OR started_at > prev_max_end THEN 1 ELSE 0 END)
           OVER (p ROWS UNBOUNDED PRECEDING) AS island,
         lead(CASE WHEN prev_max_end IS NULL OR started_at > prev_max_end THEN 1 ELSE 0 END) OVER p AS lead_new
  FROM a WINDOW p AS (PARTITION BY player_id ORDER BY started_at, session_id)
), c AS (
  SELECT b.*,
         max(CASE WHEN lead_new = 1 THEN lead_start END) OVER (PARTITION BY player_id, island) AS next_start,
         row_number() OVER (PARTITION BY player_id, island
                            ORDER BY eff_end DESC, started_at DESC, session_id DESC) AS rank_in_island
  FROM b
)
SELECT player_id, session_id, started_at, ended_at,
       CASE WHEN rank_in_island = 1 THEN next_start END AS next_start, rank_in_island = 1 AS kept
FROM c
WHERE ended_at >= $2::timestamptz AND ended_at < $1::timestamptz
ORDER BY player_id COLLATE "C", ended_at, session_id
"""

TREATMENTS_SQL = """
SELECT player_id, assigned_at, treatment, status
FROM return_treatments
WHERE ingested_at < $3::timestamptz AND assigned_at >= $2::timestamptz AND assigned_at < $1::timestamptz
ORDER BY player_id COLLATE "C", assigned_at, assignment_id
"""

_SECOND = timedelta(seconds=1)
_NEG_INF = datetime(1, 1, 2, tzinfo=timezone.utc)  # below any real instant; asyncpg sends it as a timestamptz
_POS_INF = datetime(9999, 12, 30, tzinfo=timezone.utc)


class _Ceiling(Exception):
    pass


class _Stream:
    """A server-side cursor with the row ceiling; errors are re-raised as ProductionReadError."""

    def __init__(self, name: str, conn: Any, sql: str, args: list, prefetch: int, max_rows: int, scrub) -> None:
        self.name, self.conn, self.sql, self.args = name, conn, sql, args
        self.prefetch, self.max_rows, self.scrub = prefetch, max_rows, scrub
        self.rows = 0
        self.ceiling = False

    async def batches(self) -> AsyncIterator[list]:
        """Rows a prefetch batch at a time (one await per batch, not per row), cut at the ceiling."""
        try:
            cursor = await self.conn.cursor(self.sql, *self.args)
            while not self.ceiling:
                rows = await cursor.fetch(self.prefetch)
                if not rows:
                    return
                if self.rows + len(rows) > self.max_rows:
                    rows, self.ceiling = rows[:self.max_rows - self.rows], True
                self.rows += len(rows)
                if rows:
                    yield rows
        except RLHFError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported by stream, scrubbed
            said = self.scrub(str(exc)) if is_server_error(exc) else ""
            raise ProductionReadError(
                f"reading the production database failed on stream {self.name} after {self.rows} rows "
                f"({type(exc).__name__}{': ' + said if said else ''}); nothing was published. Check the database "
                f"and run the export again") from None

    def report(self) -> dict[str, Any]:
        return {"rows": self.rows, "ceiling_hit": self.ceiling, "max_rows": self.max_rows, "prefetch": self.prefetch}


def _hour(t: datetime) -> float:
    return t.hour + t.minute / 60 + t.second / 3600 + t.microsecond / 3.6e9


async def _export_rows(sessions: _Stream, treatments: _Stream, end_at: datetime, salt: bytes,
                       tables: dict[str, StreamingTable], row_group_rows: int, counts: dict[str, int],
                       progress: Callable[[int, int], None] | None, cancel: Callable[[], bool] | None) -> str | None:
    """Merge both streams into the tables; returns the stream that hit the ceiling (or None)."""
    out, excluded = Columns("returnclock"), Columns("returnclock_excluded")
    t_batches = treatments.batches()
    t_rows: list = []
    t_at = 0

    async def next_treatment() -> Any:
        nonlocal t_rows, t_at
        t_at += 1
        if t_at >= len(t_rows):
            t_rows, t_at = await anext(t_batches, []), 0
        return t_rows[t_at] if t_rows else None

    t_rows = await anext(t_batches, [])
    t = t_rows[0] if t_rows else None
    pseudo_of: tuple[str, str] | None = None
    stopped: str | None = None
    done = 0
    async for batch in sessions.batches():
        for row in batch:
            raw_player = row[0]
            if pseudo_of is None or pseudo_of[0] != raw_player:
                pseudo_of = (raw_player, player_pseudonym(salt, raw_player))
            player, key, ended = pseudo_of[1], session_key(salt, row[1]), row[3]
            if not row[5]:
                excluded.append({"player": player, "session_key": key, "ended_at": ended, "reason": "overlapped"})
                counts["excluded"] += 1
            else:
                next_start = row[4]
                stop = next_start if next_start is not None else end_at
                while t is not None and (t[0] < raw_player or (t[0] == raw_player and t[1] < ended)):
                    t = await next_treatment()
                matched = []
                while t is not None and t[0] == raw_player and t[1] < stop:
                    matched.append(t)
                    t = await next_treatment()
                if t is None and treatments.ceiling:
                    stopped = treatments.name  # this row's treatments may lie past the cut-off stream
                    break
                event = next_start is not None
                first = matched[0] if matched else None
                out.append({"player": player, "session_key": key, "started_at": row[2], "ended_at": ended,
                            "next_start": next_start, "duration_seconds": (stop - ended) / _SECOND,
                            "event": int(event), "session_seconds": (ended - row[2]) / _SECOND,
                            "end_hour_utc": _hour(ended), "treated": bool(matched), "treatments": len(matched),
                            "treatment": first[2] if first else None, "treatment_status": first[3] if first else None,
                            "exposed": any(m[3] in EXPOSED_STATUSES for m in matched)})
                counts["rows"] += 1
                counts["events"] += event
                if not matched:
                    counts["organic_rows"] += 1
                    counts["organic_events"] += event
                else:
                    counts["treated_rows"] += 1
                    counts["exposed_rows"] += any(m[3] in EXPOSED_STATUSES for m in matched)
            if len(out) >= row_group_rows:
                tables["returnclock"].write(out.arrays())
            if len(excluded) >= row_group_rows:
                tables["excluded"].write(excluded.arrays())
            done += 1
            if progress and done % 10_000 == 0:
                progress(done, 0)
            if cancel is not None and done % 1_000 == 0 and cancel():
                raise Cancelled(f"ReturnClock export cancelled after {done} sessions; nothing was published")
        if stopped:
            break
    if stopped is None and sessions.ceiling:
        stopped = sessions.name
    if len(out):
        tables["returnclock"].write(out.arrays())
    if len(excluded):
        tables["excluded"].write(excluded.arrays())
    return stopped


class _Stopped(Exception):
    pass


def export_returnclock_dataset(start_at: Any, end_at: Any, *, name: str, ingested_before: Any = None,
                               max_rows: int | None = None, datasets_dir: str | Path | DatasetsDir = "datasets",
                               overwrite: bool = False, publish_incomplete: bool = False,
                               policy: ReadinessPolicy | dict | None = None,
                               row_group_rows: int = DEFAULT_ROW_GROUP_ROWS, prefetch: int = DEFAULT_PREFETCH,
                               environ: dict[str, str] | None = None,
                               progress: Callable[[int, int], None] | None = None,
                               cancel: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Export the ReturnClock rows of ``[start_at, end_at)`` as ``<name>/v<N>`` (see the module
    docstring). ``start_at`` None: every session that ended before ``end_at``. Returns the
    dataset id, path, row counts, per-stream counts, completeness and readiness; a row-ceiling
    stop returns ``published: false`` unless ``publish_incomplete``."""
    access = open_gate(environ)
    window = check_window(start_at, end_at, ingested_before)
    name = check_dataset_name(name)
    ceiling = check_max_rows(max_rows)
    if not isinstance(publish_incomplete, bool):
        raise InvalidArgument(f"publish_incomplete must be true or false, got {publish_incomplete!r}")
    check_positive_int(row_group_rows, "row_group_rows")
    check_positive_int(prefetch, "prefetch")
    policy = ReadinessPolicy.coerce(policy)
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    args = [window.end_at, window.start_at or _NEG_INF, window.ingested_before or _POS_INF]
    facts: dict[str, Any] = {}
    loop = asyncio.new_event_loop()
    conns: list[Any] = []

    def build(folder: Path, dataset_id: str, version: int) -> dict[str, Any]:
        leader, follower = conns
        sessions = _Stream("player_sessions", leader, SESSIONS_SQL, args, prefetch, ceiling, access.scrub)
        treatments = _Stream("return_treatments", follower, TREATMENTS_SQL, args, prefetch, ceiling, access.scrub)
        counts = dict.fromkeys(("rows", "events", "organic_rows", "organic_events", "treated_rows", "exposed_rows",
                                "excluded"), 0)
        tables = {"returnclock": StreamingTable(folder / "returnclock.parquet", "returnclock", row_group_rows),
                  "excluded": StreamingTable(folder / "excluded.parquet", "returnclock_excluded", row_group_rows)}
        try:
            stopped = loop.run_until_complete(_export_rows(sessions, treatments, window.end_at, access.salt, tables,
                                                           row_group_rows, counts, progress, cancel))
            streams = {s.name: s.report() for s in (sessions, treatments)}
            facts["streams"] = streams
            if stopped and not publish_incomplete:
                facts["stopped_on"] = stopped
                raise _Stopped()
            written = {k: {**w.close(), "table": w.table} for k, w in tables.items()}
        except BaseException:
            for w in tables.values():
                w.abort()
            raise
        complete = stopped is None
        evidence = {"source_kind": "production", "complete": complete, **counts,
                    "integrity_failures": []}
        readiness = returnclock_readiness(evidence, policy)
        production = {"window": {"start_at": _iso(window.start_at), "end_at": _iso(window.end_at),
                                 "ingested_before": _iso(window.ingested_before) or facts["snapshot_at"],
                                 "ingested_before_is_snapshot": window.ingested_before is None},
                      "snapshot_at": facts["snapshot_at"], "streams": streams, "complete": complete,
                      "stop_reason": None if complete else "row_ceiling", "stopped_stream": stopped,
                      "max_rows": ceiling,
                      "memory": {"held": "one cursor prefetch batch per stream and one row group per table",
                                 "prefetch_rows": prefetch, "row_group_rows": row_group_rows,
                                 "grows_with_window": False}}
        manifest = write_manifest(
            folder, dataset_id=dataset_id, name=name, version=version, kind="returnclock_export", tables=written,
            sources={"kind": "production", "database": "production (read-only snapshot; DSN not recorded)",
                     "window": production["window"], "snapshot_at": facts["snapshot_at"]},
            readiness=readiness,
            extra={"production": production, "returnclock": {"counts": counts, "semantics": "see "
                   "extrarlhf.production.returnclock (module docstring)", "exposed_statuses": sorted(EXPOSED_STATUSES)},
                   "pseudonymized": True, "anonymous": False, "pseudonym_key_id": access.key_id,
                   "pseudonym_rule": PSEUDONYM_RULE, "complete": complete, "stop_reason": production["stop_reason"],
                   "options": {"row_group_rows": row_group_rows, "max_rows": ceiling, "prefetch": prefetch}})
        return {"kind": "returnclock_export", "row_counts": manifest["row_counts"], "counts": counts,
                "readiness": {"returnclock_ready": readiness["returnclock_ready"],
                              "returnclock_blockers": readiness["returnclock_blockers"]},
                "complete": complete, "stop_reason": production["stop_reason"], "stopped_stream": stopped,
                "streams": streams, "window": production["window"], "snapshot_at": facts["snapshot_at"],
                "pseudonym_key_id": access.key_id, "pseudonymized": True, "anonymous": False}

    try:  # connect, check the schema and take the snapshot before anything is written
        leader, follower, snapshot_at = loop.run_until_complete(
            open_snapshot(access, ("player_sessions", "return_treatments")))
        conns[:] = [leader, follower]
        facts["snapshot_at"] = _iso(snapshot_at)
        result = publish_version(dirs, name, build, overwrite=overwrite, validate=validate_dir)
    except _Stopped:
        stream = facts["stopped_on"]
        return {"published": False, "complete": False, "stop_reason": "row_ceiling", "stopped_stream": stream,
                "streams": facts["streams"], "snapshot_at": facts.get("snapshot_at"), "max_rows": ceiling,
                "message": f"stopped: stream {stream} has more than {ceiling:,} rows in this window (the row "
                           f"ceiling); nothing was published. Export a shorter window, or pass "
                           f"publish_incomplete=true to keep an incomplete, never-ready export for inspection"}
    finally:
        for conn in conns:
            conn.terminate()
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
    result["published"] = True
    return result


def _source(dirs: DatasetsDir, dataset: str, kind: str) -> tuple[Any, dict[str, Any]]:
    resolved = resolve(dirs, dataset)
    manifest = read_manifest(resolved.path)
    if manifest.get("kind") != kind:
        raise InvalidArgument(f"{resolved.dataset_id} is a {manifest.get('kind')!r} dataset, not {kind!r}")
    failures = validate_dir(resolved.path, expected_id=resolved.dataset_id)
    if failures:
        raise ValidationFailed(f"{resolved.dataset_id} fails validation: "
                               + "; ".join(f"[{f['code']}] {f['message']}" for f in failures[:3]), failures)
    return resolved, manifest


def split_returnclock_training_dataset(dataset: str, *, name: str | None = None, fractions: Any = DEFAULT_FRACTIONS,
                                       split_key: str = DEFAULT_SPLIT_KEY,
                                       datasets_dir: str | Path | DatasetsDir = "datasets",
                                       overwrite: bool = False, policy: ReadinessPolicy | dict | None = None,
                                       row_group_rows: int = DEFAULT_ROW_GROUP_ROWS) -> dict[str, Any]:
    """Organic-only (treated rows dropped) train/val/test of a ReturnClock export, grouped by
    player pseudonym with the keyed-hash assignment (assign.py), published as ``name``
    (default ``<source>-split``). Refused unless the source validates, is complete and the
    returnclock contour is ready."""
    fractions = check_fractions(fractions)
    split_key = check_split_key(split_key)
    check_positive_int(row_group_rows, "row_group_rows")
    policy = ReadinessPolicy.coerce(policy)
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved, source = _source(dirs, dataset, "returnclock_export")
    name = check_dataset_name(name if name is not None else f"{resolved.name}-split")
    if name == resolved.name:
        raise InvalidArgument("a split is a new dataset: give it another name than its source")
    readiness = returnclock_readiness((source.get("readiness") or {}).get("evidence") or {}, policy)
    if not readiness["returnclock_ready"]:
        raise NotReady(f"returnclock is not ready for {resolved.dataset_id}: "
                       + "; ".join(readiness["returnclock_blockers"]), readiness["returnclock_blockers"])

    def build(folder: Path, dataset_id: str, version: int) -> dict[str, Any]:
        dropped = 0
        with _SplitWriter(folder, "returnclock_train", "player", CONTOUR, fractions, split_key,
                          row_group_rows) as writer:
            for batch in iter_batches(resolved.path / "returnclock.parquet", [*TRAIN_COLUMNS, "treated"], 65_536):
                table = pa.Table.from_batches([batch])
                organic = pc.invert(table.column("treated"))
                dropped += table.num_rows - pc.sum(organic.cast(pa.int64())).as_py()
                kept = table.filter(organic).select(list(TRAIN_COLUMNS))
                writer.write(kept)
            tables, summary = writer.close()
        split_block = {"contour": CONTOUR, "group_key": "player", "group_key_column": "player",
                       "fractions": dict(zip(SPLITS, fractions)), "split_key": split_key,
                       "assignment": "HMAC-SHA256(split_key, contour + '\\0' + group_key)[:8] / 2**64 -> "
                                     "train < f_train <= val < f_train + f_val <= test",
                       "organic_only": True, "treated_rows_dropped": dropped,
                       "lifelines": {"duration_col": "duration_seconds", "event_col": "event",
                                     "covariates": ["session_seconds", "end_hour_utc"]}, **summary}
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
                                                      "treated_rows_dropped")}}

    return publish_version(dirs, name, build, overwrite=overwrite, validate=validate_dir)


def load_returnclock_training(dataset: str, split: str = "train", *,
                              datasets_dir: str | Path | DatasetsDir = "datasets") -> pa.Table:
    """One split (``train``, ``val`` or ``test``) of a ReturnClock split dataset, for trainers.
    Refuses anything else, in particular the raw export (it holds treated rows)."""
    if split not in SPLITS:
        raise InvalidArgument(f"split must be one of {list(SPLITS)}, got {split!r}")
    dirs = datasets_dir if isinstance(datasets_dir, DatasetsDir) else DatasetsDir(datasets_dir)
    resolved = resolve(dirs, dataset)
    kind = read_manifest(resolved.path).get("kind")
    if kind != "returnclock_split":
        raise InvalidArgument(f"{resolved.dataset_id} is a {kind!r} dataset; ReturnClock trainers read only the "
                              f"organic-only splits (split_returnclock_training_dataset), never the raw export")
    resolved, _ = _source(dirs, dataset, "returnclock_split")
    import pyarrow.parquet as pq

    table = pq.ParquetFile(resolved.path / f"{split}.parquet").read(use_threads=False)
    bad = table.filter(pc.or_(pc.less_equal(table.column("duration_seconds"), 0),
                              pc.invert(pc.is_in(table.column("event"), value_set=pa.array([0, 1], pa.int8())))))
    if bad.num_rows:
        raise ValidationFailed(f"{resolved.dataset_id}/{split}: {bad.num_rows} rows are not survival-ready "
                               f"(duration_seconds <= 0 or event not in {{0, 1}})", [])
    return table
