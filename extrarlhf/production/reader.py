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
Errors never carry the DSN or the salt: connection failures are reported by exception
class, server errors are scrubbed (gate.ProductionAccess.scrub).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterator

from ..errors import RLHFError
from .gate import DSN_VAR, ProductionAccess
from .schema import TABLE_COLUMNS

__all__ = ["Window", "SnapshotReader", "ProductionUnavailable", "ProductionReadError", "ProductionSchemaError",
           "MAX_ROWS", "check_schema",
           "connect_production", "open_snapshot", "is_server_error"]

MAX_ROWS = 1_000_000
CONNECT_TIMEOUT_S = 15.0
BATTLE_COLUMNS = ("battle_id", "ruleset", "seed", "p1_player_id", "p2_player_id", "p1_kind", "p2_kind", "p1_deck",
                  "p2_deck", "p1_deck_id", "p2_deck_id", "starting_player", "started_at", "finished_at", "winner",
                  "turns", "duration_seconds", "ingested_at")
ACTION_COLUMNS = ("battle_id", "seq", "turn", "player", "action_id", "decision_ms")


class ProductionUnavailable(RLHFError):
    code = "production_unavailable"


class ProductionReadError(RLHFError):
    code = "production_read_failed"


class ProductionSchemaError(RLHFError):
    code = "production_schema_mismatch"


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
        except Exception as exc:  # noqa: BLE001 - reported by the reader, scrubbed
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
                 battle_page_rows: int = 2_000, action_page_rows: int = 20_000, queue_items: int = 256) -> None:
        self.access, self.window, self.max_rows = access, window, max_rows
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

    def _run(self) -> None:
        try:
            asyncio.run(self._read())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            self._error = self._explain(exc)
        finally:
            self._started.set()
            self._put(_END)

    def _explain(self, exc: BaseException) -> BaseException:
        if isinstance(exc, RLHFError):
            return exc
        if isinstance(exc, _PageError):
            cause = exc.cause
            said = self.access.scrub(str(cause)) if _is_server_error(cause) else ""
            return ProductionReadError(
                f"reading the production database failed on stream {exc.stream}, page {exc.page} "
                f"({type(cause).__name__}{': ' + said if said else ''}); nothing was published. Check the database "
                f"and run the export again")
        return ProductionReadError(f"reading the production database failed ({type(exc).__name__}); nothing was "
                                   f"published")

    async def _connect(self) -> Any:
        return await connect_production(self.access)

    async def _read(self) -> None:
        leader = await self._connect()
        follower = None
        try:
            await check_schema(leader, ("battles", "battle_actions"))
            follower = await self._connect()
            lead_tx = leader.transaction(isolation="repeatable_read", readonly=True)
            await lead_tx.start()
            row = await leader.fetchrow("SELECT now() AS snapshot_at, pg_export_snapshot() AS snapshot")
            follow_tx = follower.transaction(isolation="repeatable_read", readonly=True)
            await follow_tx.start()
            await follower.execute(f"SET TRANSACTION SNAPSHOT '{row['snapshot']}'")
            cond, args = self.window.where("b")
            total = await leader.fetchval(f"SELECT count(*) FROM battles b WHERE {cond}", *args)
            self.facts = {"snapshot_at": row["snapshot_at"], "battles": min(total, self.max_rows)}
            self._make_streams(leader, follower)
            self._started.set()
            await self._merge()
        finally:
            for conn in (follower, leader):
                if conn is not None:
                    conn.terminate()  # read-only: nothing to commit; never wait on a broken link

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
    """One asyncpg connection to the production database; failures name the exception class only."""
    import asyncpg

    try:
        return await asyncpg.connect(access.dsn, timeout=CONNECT_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - never repeat the DSN: name the class only
        raise ProductionUnavailable(f"could not connect to the production database named by {DSN_VAR} "
                                    f"({type(exc).__name__}); nothing was read. Check that the server is up "
                                    f"and the variable names it") from None


async def open_snapshot(access: ProductionAccess, tables: tuple[str, ...]) -> tuple[Any, Any, Any]:
    """Two connections in one ``REPEATABLE READ READ ONLY`` snapshot (the leader exports it, the
    follower imports it as its first statement), after checking the schema of ``tables``.
    Returns ``(leader, follower, snapshot_at)``; the caller terminates both connections."""
    leader = await connect_production(access)
    follower = None
    try:
        await check_schema(leader, tables)
        follower = await connect_production(access)
        await leader.transaction(isolation="repeatable_read", readonly=True).start()
        row = await leader.fetchrow("SELECT now() AS snapshot_at, pg_export_snapshot() AS snapshot")
        await follower.transaction(isolation="repeatable_read", readonly=True).start()
        await follower.execute(f"SET TRANSACTION SNAPSHOT '{row['snapshot']}'")
    except BaseException:
        for conn in (follower, leader):
            if conn is not None:
                conn.terminate()
        raise
    return leader, follower, row["snapshot_at"]


def is_server_error(exc: BaseException) -> bool:
    return _is_server_error(exc)


def _is_server_error(exc: BaseException) -> bool:
    try:
        import asyncpg
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, asyncpg.PostgresError)
