"""Every request read before stdin ends is answered before the server stops.

The SDK's dispatcher cancels the handlers still running when its read stream ends (their
callers are gone, it assumes). On stdio, the end of stdin is how a client says it has sent
everything, not that it stopped reading: ``python -m mcp_server < requests.jsonl`` or
``printf ... | python -m mcp_server | jq`` lost the answers to the last requests whenever
they were still running at the end of the input (a ``ping`` on a loaded machine, say).

:func:`answered_before_exit` wraps the SDK's stream pair. The read stream ends only once every
request it delivered has had its response or error sent, or was cancelled by the client
(``notifications/cancelled``), or :data:`DRAIN_SECONDS` have passed since the end of the
input, whichever comes first. Then the long work still running is stopped and the calls
waiting for a slot are refused (:meth:`mcp_server.cancel.LongWork.shutdown`): each of them is
answered (``shutting_down``, or the partial result a series returns) within
:data:`SHUTDOWN_GRACE_SECONDS`, and only what is still running after that is cancelled by
the SDK, with a warning saying how many. A client that wants out at once sends SIGTERM, as
the MCP stdio shutdown sequence prescribes.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any, Self

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from . import cancel
from .limits import DRAIN_SECONDS

log = logging.getLogger("mcp_server")

SHUTDOWN_GRACE_SECONDS = 5.0  # a stopped call reaches its next work checkpoint well within this


class _Pending:
    """The ids of the requests delivered to the SDK and not answered yet."""

    def __init__(self) -> None:
        self.ids: set[Any] = set()
        self._none = anyio.Event()
        self._none.set()

    def add(self, request_id: Any) -> None:
        if self._none.is_set():
            self._none = anyio.Event()
        self.ids.add(request_id)

    def discard(self, request_id: Any) -> None:
        self.ids.discard(request_id)
        if not self.ids:
            self._none.set()

    async def wait_none(self, seconds: float) -> bool:
        """True once nothing is pending, False if ``seconds`` passed first."""
        with anyio.move_on_after(seconds):
            await self._none.wait()
            return True
        return False


class _Wrapped:
    """Closing (``aclose``, ``async with``) passed through to the SDK's stream."""

    _inner: Any

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


class _Reader(_Wrapped):
    """The SDK's read stream; its end waits for the pending requests (see the module)."""

    def __init__(self, inner: Any, pending: _Pending, drain_seconds: float, grace_seconds: float) -> None:
        self._inner = inner
        self._pending = pending
        self._drain_seconds = drain_seconds
        self._grace_seconds = grace_seconds

    @property
    def last_context(self) -> Any:  # the sender's context, read by the dispatcher
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except anyio.EndOfStream:
            await self._drain()
            raise
        if isinstance(item, SessionMessage):
            message = item.message
            if isinstance(message, types.JSONRPCRequest):
                self._pending.add(message.id)
            elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
                request_id = (message.params or {}).get("requestId")
                if request_id is not None:
                    self._pending.discard(request_id)
        return item

    async def _drain(self) -> None:
        if not self._pending.ids:
            return
        log.info("end of input with %d request(s) running; answering them before stopping", len(self._pending.ids))
        if await self._pending.wait_none(self._drain_seconds):
            return
        log.warning("end of input: %d request(s) still running after %.0f s; stopping their work",
                    len(self._pending.ids), self._drain_seconds)
        cancel.LONG_WORK.shutdown()
        if not await self._pending.wait_none(self._grace_seconds):
            log.warning("end of input: %d request(s) still running %.0f s after their work was stopped are "
                        "cancelled", len(self._pending.ids), self._grace_seconds)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Writer(_Wrapped):
    """The SDK's write stream; a response or error sent settles its request."""

    def __init__(self, inner: Any, pending: _Pending) -> None:
        self._inner = inner
        self._pending = pending

    async def send(self, item: Any) -> None:
        await self._inner.send(item)
        if isinstance(item, SessionMessage) and isinstance(item.message, (types.JSONRPCResponse,
                                                                            types.JSONRPCError)):
            self._pending.discard(item.message.id)


def answered_before_exit(read_stream: Any, write_stream: Any, drain_seconds: float = DRAIN_SECONDS,
                         grace_seconds: float = SHUTDOWN_GRACE_SECONDS) -> tuple[Any, Any]:
    """The SDK's (read, write) stdio streams, with the end of input deferred (see the module)."""
    pending = _Pending()
    return _Reader(read_stream, pending, drain_seconds, grace_seconds), _Writer(write_stream, pending)
