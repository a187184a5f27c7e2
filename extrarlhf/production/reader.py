"""Reading the production database inside one snapshot (DESIGN section 10.1), with asyncpg.

- **One snapshot for every stream.** The leader connection opens a ``REPEATABLE READ READ
  ONLY`` transaction, reads ``now()`` (``snapshot_at``) and exports its snapshot
  (``pg_export_snapshot()``); the follower opens the same kind of transaction and imports it
  (``SET TRANSACTION SNAPSHOT``) as its first statement -- pg_dump's pattern. The two streams
  are then read side by side, one per connection, and see exactly the same rows.
- **Keyset paging** on each stream's primary key (``WHERE key > $last ORDER BY key LIMIT
  page``), never OFFSET; the database sorts, so memory holds a page per stream.
- **Row ceiling**: at most ``max_rows`` rows per raw stream. A stream that has more stops
  there and the reader reports ``ceiling`` (the stream's name); the caller decides.

The reader runs its event loop in a thread of its own and hands battles, each with its
actions (a merge of the two ordered streams), to the caller through a bounded queue, so
reading overlaps the caller's replay work and memory does not grow with the window.
Bounded and cancellable (DESIGN 10.1): every connection carries the server-enforced
``statement_timeout`` and ``lock_timeout`` of the gate (gate.TIMEOUT_DEFAULTS_MS) and names itself
``application_name = extrarlhf-production-read``; :func:`until_stopped` polls the caller's
``cancel`` while a statement runs and cancels the awaiting task (asyncpg then sends the server a
cancel request for that statement), and :func:`close_connections` closes the connections only
after the server acknowledged it. One mapping, :func:`read_failed`, turns every failure of a
production read into ``production_read_failed``: where it failed (step or stream and page), the
exception class and the SQLSTATE, what that SQLSTATE means and what to do -- never the server's
message text (it can quote stored values) nor any part of the DSN.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Awaitable, Callable, Iterator, TypeVar

from ..core.errors import Cancelled, RLHFError
from ..core.extras import require
from .gate import DSN_VAR, LOCK_TIMEOUT_VAR, STATEMENT_TIMEOUT_VAR, ProductionAccess
from .schema import TABLE_COLUMNS

__all__ = ["Window", "SnapshotReader", "ProductionUnavailable", "ProductionReadError", "ProductionSchemaError",
           "MAX_ROWS", "APPLICATION_NAME", "check_schema", "connect_production", "open_snapshot",
           "close_connections", "until_stopped", "read_failed", "reading"]

MAX_ROWS = 1_000_000
CONNECT_TIMEOUT_S = 15.0
# The default cut-off (no ingested_before given): rows ingested up to this long before the
# snapshot are left to the next export, so a re-export with the recorded cut-off reads the same
# rows. A row's ingested_at is its transaction's start, and the transaction may commit after
# the snapshot: such a row is invisible now and visible later (issue 49: a session ingested
# 48 ms before the snapshot was absent, then present in a re-export with the same cut-off).
SETTLE_S = 60
CLOSE_TIMEOUT_S = 5.0     # for the server to acknowledge a cancelled statement before the link is dropped
CANCEL_POLL_S = 0.05      # how often a running statement polls the caller's cancel()
APPLICATION_NAME = "extrarlhf-production-read"
_T = TypeVar("_T")
BATTLE_COLUMNS = ("battle_id", "ruleset", "seed", "p1_player_id", "p2_player_id", "p1_kind", "p2_kind", "p1_deck",
                  "p2_deck", "p1_deck_id", "p2_deck_id", "starting_player", "started_at", "finished_at", "winner",
                  "turns", "duration_seconds", "ingested_at")
ACTION_COLUMNS = ("battle_id", "seq", "turn", "player", "action_id", "decision_ms")


class ProductionUnavailable(RLHFError):
    code = "production_unavailable"


class ProductionReadError(RLHFError):
    """A production read failed; ``sqlstate`` is the server's error code (None: not a server error)."""

    code = "production_read_failed"

    def __init__(self, message: str, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class ProductionSchemaError(RLHFError):
    code = "production_schema_mismatch"


# SQLSTATE classes (PostgreSQL appendix A): what a failure of that class means for an export
_SQLSTATE_CLASSES = {
    "08": "a connection exception", "22": "a data exception: a stored value does not fit the type the export "
    "reads (compare the tables with DESIGN section 10)", "23": "an integrity constraint violation",
    "25": "an invalid transaction state", "28": "an authorization failure (check the role in RLHF_PRODUCTION_DSN)",
    "40": "a transaction rollback (e.g. a serialization failure; run the export again)",
    "42": "a syntax error or access rule violation: a table or column differs from DESIGN section 10, or the "
    "role lacks SELECT on it", "53": "insufficient resources on the server", "54": "a program limit exceeded",
    "55": "an object not in the required state", "57": "operator intervention: the statement or the session was "
    "cancelled or terminated on the server", "58": "a system error on the server", "XX": "an internal error of "
    "the server"}


def _sqlstate(exc: BaseException) -> str | None:
    try:
        import asyncpg
    except ImportError:  # pragma: no cover
        return None
    return getattr(exc, "sqlstate", None) if isinstance(exc, asyncpg.PostgresError) else None


def read_failed(exc: BaseException, where: str, access: ProductionAccess) -> ProductionReadError:
    """The one error of every failed production read (see the module docstring): ``where`` (a
    step, or a stream and its page), the exception class and SQLSTATE and what they mean."""
    sqlstate, cls = _sqlstate(exc), type(exc).__name__
    if sqlstate is None:
        return ProductionReadError(f"reading the production database failed at {where} ({cls}); nothing was "
                                   f"published. Check that the server named by {DSN_VAR} is up and run the export "
                                   f"again")
    if sqlstate == "55P03":
        why = (f"lock_timeout of {access.lock_timeout_ms} ms reached: another session holds a lock on a table this "
               f"export reads (a migration, a LOCK TABLE). Run the export again once it is released, or raise "
               f"{LOCK_TIMEOUT_VAR}")
    elif sqlstate == "57014" and "statement timeout" in (getattr(exc, "message", None) or ""):
        why = (f"statement_timeout of {access.statement_timeout_ms} ms reached. Export a shorter window, or raise "
               f"{STATEMENT_TIMEOUT_VAR}")
    else:
        why = _SQLSTATE_CLASSES.get(sqlstate[:2], "a server error") + ". Check the database and run the export again"
    return ProductionReadError(f"reading the production database failed at {where} ({cls}, SQLSTATE {sqlstate}: "
                               f"{why}); nothing was published. The server's message is not shown: it can quote "
                               f"stored values", sqlstate)


@contextlib.contextmanager
def reading(where: str, access: ProductionAccess) -> Iterator[None]:
    """Map any failure inside the block with :func:`read_failed` (business errors pass)."""
    try:
        yield
    except RLHFError:
        raise
    except Exception as exc:  # noqa: BLE001 - mapped, never passed on
        raise read_failed(exc, where, access) from None


async def until_stopped(aw: Awaitable[_T], stopped: Callable[[], bool] | None, what: str) -> _T:
    """Await ``aw``, polling ``stopped()`` every CANCEL_POLL_S: once it is true the task is
    cancelled (asyncpg sends the server a cancel request for the statement it awaits; the
    task's own ``finally`` closes its connections) and :class:`Cancelled` is raised."""
    task = asyncio.ensure_future(aw)
    if stopped is None:
        return await task
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=CANCEL_POLL_S)
            if not task.done() and stopped():
                task.cancel()
                await asyncio.wait({task})
                raise Cancelled(f"{what} was cancelled: its statement was cancelled on the server and the "
                                f"connections closed; nothing was published")
        return task.result()
    finally:
        if not task.done():  # we were cancelled ourselves: let the task clean up first
            task.cancel()
            await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: what this function raises is what is reported


async def close_connections(*conns: Any) -> None:
    """Close each connection (None skipped). ``close`` first cancels a statement still running on
    it and waits for the server to acknowledge, so no query of ours is left on the server; a
    connection that does not close within CLOSE_TIMEOUT_S is dropped."""
    for conn in conns:
        if conn is None:
            continue
        try:
            await conn.close(timeout=CLOSE_TIMEOUT_S)
        except BaseException:  # noqa: BLE001 - a broken link: drop it (read-only: nothing to commit)
            conn.terminate()


def default_cut(end_at: datetime, snapshot_at: datetime) -> datetime:
    """The cut-off of an export that names none: ``SETTLE_S`` before the snapshot, and never before
    the window's end (a window ending in the last minute then reads what the snapshot holds, and
    a re-export may see rows that were still being written)."""
    return max(end_at, snapshot_at - timedelta(seconds=SETTLE_S))


@dataclass(frozen=True)
class Window:
    """Battles that finished in ``[start_at, end_at)`` (unfinished ones: started in it), as
    ingested before ``ingested_before`` (None: everything the snapshot holds)."""

    start_at: datetime | None
    end_at: datetime
    ingested_before: datetime | None

    def where(self, alias: str = "b") -> tuple[str, list[Any]]:
        """The SQL condition on a battles row and its arguments ($1...)."""
        args: list[Any] = [self.end_at]
        lower_f = lower_s = ""
        if self.start_at is not None:
            args.append(self.start_at)
            lower_f = f" AND {alias}.finished_at >= ${len(args)}"
            lower_s = f" AND {alias}.started_at >= ${len(args)}"
        cond = (f"(({alias}.finished_at < $1{lower_f}) OR "
                f"({alias}.finished_at IS NULL AND {alias}.started_at < $1{lower_s}))")
        if self.ingested_before is not None:
            args.append(self.ingested_before)
            cond += f" AND {alias}.ingested_at < ${len(args)}"
        return cond, args


async def check_schema(conn: Any, tables: tuple[str, ...]) -> None:
    """Refuse a database whose tables lack what the export reads, naming every gap."""
    rows = await conn.fetch("SELECT table_name, column_name FROM information_schema.columns "
                            "WHERE table_schema = ANY(current_schemas(false)) AND table_name = ANY($1::text[])",
                            list(tables))
    present: dict[str, set[str]] = {}
    for row in rows:
        present.setdefault(row["table_name"], set()).add(row["column_name"])
    gaps = []
    for table in tables:
        if table not in present:
            gaps.append(f"table {table} is missing")
            continue
        missing = [c for c in TABLE_COLUMNS[table] if c not in present[table]]
        if missing:
            gaps.append(f"table {table} lacks column(s) {', '.join(missing)}")
    if gaps:
        raise ProductionSchemaError("the production database does not have the schema this export reads (DESIGN "
                                    "section 10): " + "; ".join(gaps) + ". Point RLHF_PRODUCTION_DSN at the game "
                                    "backend's database")


class _Stream:
    """One keyset-paged stream with a one-page lookahead and the row ceiling."""

    def __init__(self, name: str, conn: Any, sql_first: str, sql_next: str, args: list[Any], key: Callable,
                 page_rows: int, max_rows: int) -> None:
        self.name, self.conn, self.args, self.key = name, conn, args, key
        self.sql_first, self.sql_next = sql_first, sql_next
        self.page_rows, self.max_rows = page_rows, max_rows
        self.rows = self.pages = 0
        self.ceiling = False
        self._last: tuple | None = None
        self._done = False

    async def _fetch(self) -> list:
        if self._done:
            return []
        limit = min(self.page_rows, self.max_rows + 1 - self.rows)
        self.pages += 1
        try:
            if self._last is None:
                page = await self.conn.fetch(self.sql_first, *self.args, limit)
            else:
                page = await self.conn.fetch(self.sql_next, *self.args, *self._last, limit)
        except Exception as exc:  # noqa: BLE001 - mapped by the reader (read_failed)
            raise _PageError(self.name, self.pages, exc) from None
        if len(page) < limit:
            self._done = True
        if self.rows + len(page) > self.max_rows:
            page = page[:self.max_rows - self.rows]
            self.ceiling, self._done = True, True
        self.rows += len(page)
        if page:
            self._last = self.key(page[-1])
        return page

    async def iter_pages(self):
        """The stream's pages, the next one fetched while this one is consumed."""
        pending = asyncio.ensure_future(self._fetch())
        try:
            while True:
                page = await pending
                if not page:
                    return
                pending = asyncio.ensure_future(self._fetch())
                yield page
        finally:
            pending.cancel()


class _PageError(Exception):
    def __init__(self, stream: str, page: int, cause: BaseException) -> None:
        super().__init__(stream, page)
        self.stream, self.page, self.cause = stream, page, cause


_END = object()


class SnapshotReader:
    """Battles of a window with their actions, read in one snapshot on a thread of its own.

    Use as a context manager; :meth:`start` returns the snapshot facts once the snapshot is
    taken (or raises), then :meth:`battles` yields ``(battle row, [action rows])`` in battle id
    order. Leaving the context stops the thread and closes the connections.
    """

    def __init__(self, access: ProductionAccess, window: Window, *, max_rows: int = MAX_ROWS,
                 battle_page_rows: int = 2_000, action_page_rows: int = 20_000, queue_items: int = 256,
                 cancel: Callable[[], bool] | None = None) -> None:
        self.access, self.window, self.max_rows, self.cancel = access, window, max_rows, cancel
        self.battle_page_rows, self.action_page_rows = battle_page_rows, action_page_rows
        self.queue: queue.Queue = queue.Queue(maxsize=queue_items)
        self.stop = threading.Event()
        self.facts: dict[str, Any] = {}
        self.streams: dict[str, _Stream] = {}
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="production-snapshot-reader", daemon=True)

    # -------------------------------------------------------------- caller side
    def __enter__(self) -> "SnapshotReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> dict[str, Any]:
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise self._error
        return self.facts

    def battles(self) -> Iterator[tuple[Any, list]]:
        while True:
            item = self.queue.get()
            if item is _END:
                if self._error is not None:
                    raise self._error
                return
            yield item

    def stream_report(self) -> dict[str, dict[str, Any]]:
        return {name: {"rows": s.rows, "pages": s.pages, "ceiling_hit": s.ceiling, "max_rows": s.max_rows}
                for name, s in self.streams.items()}

    @property
    def ceiling(self) -> str | None:
        """The first stream that hit the row ceiling, or None."""
        return next((name for name, s in self.streams.items() if s.ceiling), None)

    def close(self) -> None:
        self.stop.set()
        while self._thread.is_alive():
            try:
                while True:
                    self.queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.1)

    # -------------------------------------------------------------- reader thread
    def _put(self, item: Any) -> bool:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _stopping(self) -> bool:
        return self.stop.is_set() or (self.cancel is not None and self.cancel())

    def _run(self) -> None:
        try:
            asyncio.run(until_stopped(self._read(), self._stopping, "the production export"))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            self._error = self._explain(exc)
        finally:
            self._started.set()
            self._put(_END)

    def _explain(self, exc: BaseException) -> BaseException:
        if isinstance(exc, RLHFError):
            return exc
        if isinstance(exc, _PageError):
            return read_failed(exc.cause, f"stream {exc.stream}, page {exc.page}", self.access)
        return read_failed(exc, "the snapshot reader", self.access)

    async def _read(self) -> None:
        leader, follower, snapshot_at = await open_snapshot(self.access, ("battles", "battle_actions"))
        if self.window.ingested_before is None:  # the cut-off is explicit from here on, and recorded
            self.window = replace(self.window, ingested_before=default_cut(self.window.end_at, snapshot_at))
        try:
            cond, args = self.window.where("b")
            with reading("counting the window's battles", self.access):
                total = await leader.fetchval(f"SELECT count(*) FROM battles b WHERE {cond}", *args)
            self.facts = {"snapshot_at": snapshot_at, "battles": min(total, self.max_rows),
                          "ingested_before": self.window.ingested_before}
            self._make_streams(leader, follower)
            self._started.set()
            await self._merge()
        finally:
            await close_connections(follower, leader)

    def _make_streams(self, leader: Any, follower: Any) -> None:
        cond, args = self.window.where("b")
        n = len(args)
        cols = ", ".join(f"b.{c}" for c in BATTLE_COLUMNS)
        battles = f"SELECT {cols} FROM battles b WHERE {cond}"
        self.streams["battles"] = _Stream(
            "battles", leader, f"{battles} ORDER BY b.battle_id LIMIT ${n + 1}",
            f"{battles} AND b.battle_id > ${n + 1} ORDER BY b.battle_id LIMIT ${n + 2}", args,
            lambda r: (r["battle_id"],), self.battle_page_rows, self.max_rows)
        acols = ", ".join(f"a.{c}" for c in ACTION_COLUMNS)
        actions = f"SELECT {acols} FROM battle_actions a JOIN battles b ON b.battle_id = a.battle_id WHERE {cond}"
        if self.window.ingested_before is not None:
            actions += f" AND a.ingested_at < ${n}"  # the cut-off is the last argument
        self.streams["battle_actions"] = _Stream(
            "battle_actions", follower, f"{actions} ORDER BY a.battle_id, a.seq LIMIT ${n + 1}",
            # b.battle_id >= ... repeats the cursor on the battles side: without it a narrow window
            # makes the planner scan battles from the start on every page
            f"{actions} AND (a.battle_id, a.seq) > (${n + 1}, ${n + 2}) AND b.battle_id >= ${n + 1} "
            f"ORDER BY a.battle_id, a.seq LIMIT ${n + 3}", args, lambda r: (r["battle_id"], r["seq"]), self.action_page_rows, self.max_rows)

    async def _merge(self) -> None:
        """Both streams are in battle id order and every action's battle is in the battles
        stream: each battle takes the actions that follow it with its id (a page at a time;
        rows are read by position: column 0 is battle_id in both streams)."""
        actions = self.streams["battle_actions"]
        action_pages = actions.iter_pages()
        try:
            await self._merge_pages(actions, action_pages)
        finally:
            await action_pages.aclose()  # its prefetch stops before the connections close

    async def _merge_pages(self, actions: _Stream, action_pages: Any) -> None:
        page, at = await anext(action_pages, []), 0
        async for battles in self.streams["battles"].iter_pages():
            for battle in battles:
                if self.stop.is_set():
                    return
                battle_id, mine = battle[0], []
                while True:
                    if at == len(page):
                        page, at = await anext(action_pages, []), 0
                        if not page:
                            break
                    if page[at][0] != battle_id:
                        break
                    mine.append(page[at])
                    at += 1
                if not page and actions.ceiling:
                    return  # this battle's actions may be cut off: stop before it
                if not self._put((battle, mine)):
                    return
        if page and at < len(page) and not self.streams["battles"].ceiling:
            raise ProductionReadError(f"action rows of battle stream order were left after the last battle (page "
                                      f"{actions.pages}); the streams disagree")


async def connect_production(access: ProductionAccess) -> Any:
    """One asyncpg connection to the production database, with the gate's statement and lock
    timeouts; failures name the exception class (and SQLSTATE) only, never the DSN."""
    asyncpg = require("asyncpg", "reading the production database")

    settings = {"application_name": APPLICATION_NAME, "statement_timeout": str(access.statement_timeout_ms),
                "lock_timeout": str(access.lock_timeout_ms)}
    try:
        return await asyncpg.connect(**access.connect_kwargs, timeout=CONNECT_TIMEOUT_S, server_settings=settings)
    except Exception as exc:  # noqa: BLE001 - never repeat the DSN nor the server's text
        sqlstate = _sqlstate(exc)
        raise ProductionUnavailable(f"could not connect to the production database named by {DSN_VAR} "
                                    f"({type(exc).__name__}{f', SQLSTATE {sqlstate}' if sqlstate else ''}); nothing "
                                    f"was read. Check that the server is up and the variable names it") from None


async def open_snapshot(access: ProductionAccess, tables: tuple[str, ...]) -> tuple[Any, Any, Any]:
    """Two connections in one ``REPEATABLE READ READ ONLY`` snapshot (the leader exports it, the
    follower imports it as its first statement), after checking the schema of ``tables``.
    Returns ``(leader, follower, snapshot_at)``; the caller closes both (:func:`close_connections`)."""
    leader = await connect_production(access)
    follower = None
    try:
        with reading("the schema check", access):
            await check_schema(leader, tables)
        follower = await connect_production(access)
        with reading("taking the snapshot", access):
            await leader.transaction(isolation="repeatable_read", readonly=True).start()
            row = await leader.fetchrow("SELECT now() AS snapshot_at, pg_export_snapshot() AS snapshot")
            await follower.transaction(isolation="repeatable_read", readonly=True).start()
            await follower.execute(f"SET TRANSACTION SNAPSHOT '{row['snapshot']}'")
    except BaseException:
        await close_connections(follower, leader)
        raise
    return leader, follower, row["snapshot_at"]
