"""The ReturnClock rows of a window, computed by PostgreSQL in one query and streamed out by COPY.

Why one query and COPY: a per-row Python loop over asyncpg records (the first version: two
cursors merged row by row) ran at a quarter of what the server can send. Here the server does
everything that needs the player's whole history -- activity islands and the next start by
window functions, the treatments of each row by a hash join on the player with the row's
interval as join filter -- and hands the rows out as CSV through ``COPY (query) TO STDOUT``.
:class:`CsvBatches` cuts that byte stream at record boundaries into batches of about
``batch_bytes`` and parses each with Arrow's CSV reader (C++) on a worker thread, so Python
touches no row and the server's sending overlaps the processing.

Memory: one COPY buffer of about ``batch_bytes``, at most two batches queued and one parsed
batch; the server sorts on its side (spilling to its own temp files), so none grows with the
window.

Keyset paging is not used for this stream: every page would re-run the window functions over
the players' histories (the production tables have no index but their primary keys), so the
whole window is one ordered COPY inside the snapshot instead, stopped by ``LIMIT`` at the row
ceiling. Order: ``player_id COLLATE "C", ended_at, session_id COLLATE "C"`` (byte order,
whatever the database's collation), as every tie-break in the query.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Awaitable, Callable

import pyarrow as pa
import pyarrow.csv as pacsv

__all__ = ["RETURNCLOCK_SQL", "PLANNER_SETTINGS", "SESSION_COUNT_SQL", "TREATMENT_COUNT_SQL", "TREATMENT_CUT_SQL", "ROW_COLUMNS", "CsvBatches",
           "EXPOSED_STATUSES", "as_utc"]

EXPOSED_STATUSES = ("sent", "delivered")

# $1 end_at, $2 start_at (-infinity when none), $3 cut (infinity when none), $4 row limit.
# Sessions whose effective end is before start_at cannot change any row of the window (they end
# before every departure it holds), so they are not read.
_VISIBLE_TREATMENTS = ("ingested_at < $3::timestamptz AND assigned_at >= $2::timestamptz "
                       "AND assigned_at < $1::timestamptz")

RETURNCLOCK_SQL = f"""
WITH s AS (
  SELECT session_id, player_id, started_at, ended_at,
         CASE WHEN ended_at < $1::timestamptz THEN ended_at ELSE 'infinity'::timestamptz END AS eff_end
  FROM player_sessions
  WHERE ingested_at < $3::timestamptz AND started_at < $1::timestamptz
    AND (ended_at IS NULL OR ended_at >= $2::timestamptz)
), a AS (
  SELECT s.*, max(eff_end) OVER (p ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_max_end,
         lead(started_at) OVER p AS lead_start
  FROM s WINDOW p AS (PARTITION BY player_id ORDER BY started_at, session_id COLLATE "C")
), b AS (
  SELECT a.*,
         sum(CASE WHEN prev_max_end IS NULL OR started_at > prev_max_end THEN 1 ELSE 0 END)
           OVER (p ROWS UNBOUNDED PRECEDING) AS island,
         lead(CASE WHEN prev_max_end IS NULL OR started_at > prev_max_end THEN 1 ELSE 0 END) OVER p AS lead_new
  FROM a WINDOW p AS (PARTITION BY player_id ORDER BY started_at, session_id COLLATE "C")
), c AS (
  SELECT b.*,
         max(CASE WHEN lead_new = 1 THEN lead_start END) OVER (PARTITION BY player_id, island) AS next_start,
         row_number() OVER (PARTITION BY player_id, island
                            ORDER BY eff_end DESC, started_at DESC, session_id COLLATE "C" DESC) AS rank_in_island
  FROM b
), r AS (
  SELECT player_id, session_id, started_at, ended_at,
         CASE WHEN rank_in_island = 1 THEN next_start END AS next_start, rank_in_island = 1 AS kept
  FROM c
  WHERE ended_at >= $2::timestamptz AND ended_at < $1::timestamptz
), m AS (
  SELECT r.session_id, count(*) AS treatments,
         (array_agg(t.treatment ORDER BY t.assigned_at, t.assignment_id COLLATE "C"))[1] AS treatment,
         (array_agg(t.status ORDER BY t.assigned_at, t.assignment_id COLLATE "C"))[1] AS treatment_status,
         bool_or(t.status IN ('{EXPOSED_STATUSES[0]}', '{EXPOSED_STATUSES[1]}')) AS exposed
  FROM r JOIN return_treatments t ON t.player_id = r.player_id
   AND t.assigned_at >= r.ended_at AND t.assigned_at < coalesce(r.next_start, $1::timestamptz)
  WHERE r.kept AND t.ingested_at < $3::timestamptz AND t.assigned_at >= $2::timestamptz
    AND t.assigned_at < $1::timestamptz
  GROUP BY r.session_id
)
SELECT r.player_id, r.session_id, r.started_at AT TIME ZONE 'UTC', r.ended_at AT TIME ZONE 'UTC',
       r.next_start AT TIME ZONE 'UTC', r.kept, m.treatments, m.treatment, m.treatment_status, m.exposed
FROM r LEFT JOIN m ON m.session_id = r.session_id
ORDER BY r.player_id COLLATE "C", r.ended_at, r.session_id COLLATE "C"
LIMIT $4
"""

# Set for the export's transaction only. The join sizes depend on statistics a live database
# keeps (autovacuum); without them the planner may pick nested loops over the whole window
# (quadratic), which a hash join never is.
PLANNER_SETTINGS = "SET LOCAL enable_nestloop = off"

# How many session rows the query will send (sessions that ended in the window), for progress.
SESSION_COUNT_SQL = ("SELECT count(*) FROM player_sessions WHERE ingested_at < $3::timestamptz "
                     "AND started_at < $1::timestamptz AND ended_at >= $2::timestamptz AND ended_at < $1::timestamptz")
# How many treatments the window holds, counted up to $4 (the ceiling + 1).
TREATMENT_COUNT_SQL = f"SELECT count(*) FROM (SELECT 1 FROM return_treatments WHERE {_VISIBLE_TREATMENTS} LIMIT $4) t"
# The first treatment past the ceiling ($4 = the ceiling), in the order the stream would read them.
TREATMENT_CUT_SQL = (f"SELECT player_id, assigned_at FROM return_treatments WHERE {_VISIBLE_TREATMENTS} "
                     f'ORDER BY player_id COLLATE "C", assigned_at, assignment_id COLLATE "C" OFFSET $4 LIMIT 1')

_NAIVE_UTC = pa.timestamp("us")
ROW_COLUMNS = {"player_id": pa.string(), "session_id": pa.string(), "started_at": _NAIVE_UTC,
               "ended_at": _NAIVE_UTC, "next_start": _NAIVE_UTC, "kept": pa.bool_(), "treatments": pa.int16(),
               "treatment": pa.string(), "treatment_status": pa.string(), "exposed": pa.bool_()}
_READ = pacsv.ReadOptions(column_names=list(ROW_COLUMNS), block_size=1 << 22)
_PARSE = pacsv.ParseOptions(newlines_in_values=True)
# COPY's CSV: NULL is an empty unquoted field, an empty string is "" (kept as a string)
_CONVERT = pacsv.ConvertOptions(column_types=ROW_COLUMNS, true_values=["t"], false_values=["f"],
                                null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=False)


class CsvBatches:
    """COPY's CSV chunks in (:meth:`feed`, on the event loop), Arrow tables of whole records out
    (``on_table``, on a worker thread), about ``batch_bytes`` at a time; ``on_handover()`` is
    called on the event loop's thread after each batch is handed over, and ``ready()`` is awaited
    once before the first one (the caller's preconditions; :meth:`finish` does not await it).

    The worker parses and processes one batch while the connection receives the next (Arrow's
    parser and kernels release the GIL), so the database's sending overlaps Python's work; the
    queue holds at most two batches, and a full queue stops reading the socket (the server then
    waits). An error of ``on_table`` is raised by the next :meth:`feed` (which ends the COPY) or
    by :meth:`finish`. A record ends at a newline outside quotes (COPY quotes a field holding a
    newline and doubles quotes inside it), so a cut is where the quotes before a newline are even.
    """

    def __init__(self, batch_bytes: int, on_table: Callable[[pa.Table], None],
                 on_handover: Callable[[], None] | None = None,
                 ready: Callable[[], Awaitable[None]] | None = None) -> None:
        self.batch_bytes, self.on_table, self.on_handover, self.ready = batch_bytes, on_table, on_handover, ready
        self.chunks: list[bytes] = []
        self.size = 0
        self.peak_bytes = 0
        self._queue: queue.Queue[pa.Buffer | None] = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._worker = threading.Thread(target=self._work, name="returnclock-batches", daemon=True)
        self._worker.start()

    async def feed(self, chunk: bytes) -> None:
        if self._error is not None:
            raise self._error
        self.chunks.append(chunk)
        self.size += len(chunk)
        if self.size >= self.batch_bytes:
            data = b"".join(self.chunks)
            self.peak_bytes = max(self.peak_bytes, len(data))
            end = _last_record_end(data)
            if end <= 0:  # one record longer than a batch: wait for its end
                self.chunks = [data]
                return
            rest = data[end:]
            self.chunks, self.size = ([rest], len(rest)) if rest else ([], 0)
            if self.ready is not None:  # before the first batch is processed
                await self.ready()
                self.ready = None
            self._put(pa.py_buffer(data)[:end])  # a view: no copy of the batch
            if self.on_handover is not None:
                self.on_handover()  # on the caller's thread (progress callbacks may need it)

    def finish(self) -> None:
        """Hand over the last records, wait until every batch is processed, raise its error."""
        if self.size:
            data = b"".join(self.chunks)
            self.peak_bytes = max(self.peak_bytes, len(data))
            self.chunks, self.size = [], 0
            self._put(pa.py_buffer(data))
        self.close()
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Stop the worker (after the batches already handed over); idempotent, never raises."""
        if self._worker.is_alive():
            self._queue.put(None)
            self._worker.join()

    def _put(self, data: pa.Buffer) -> None:
        while True:
            if self._error is not None:
                raise self._error
            try:
                self._queue.put(data, timeout=0.05)
                return
            except queue.Full:
                continue

    def _work(self) -> None:
        while (data := self._queue.get()) is not None:
            if self._error is not None:
                continue  # drain: the COPY is being stopped
            try:
                self.on_table(pacsv.read_csv(pa.BufferReader(data), read_options=_READ,
                                             parse_options=_PARSE, convert_options=_CONVERT))
            except BaseException as exc:  # noqa: BLE001 - handed to the event loop's side
                self._error = exc


def _last_record_end(data: bytes) -> int:
    """The offset just past the last newline that ends a record (0: none)."""
    at = data.rfind(b"\n")
    while at >= 0 and data.count(b'"', 0, at) % 2:
        at = data.rfind(b"\n", 0, at)
    return at + 1


def as_utc(column: Any) -> pa.Array:
    """A naive UTC timestamp column (``AT TIME ZONE 'UTC'``) as the tz-aware type of the tables."""
    return column.cast(pa.timestamp("us", tz="UTC"))
