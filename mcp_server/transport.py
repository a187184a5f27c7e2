"""stdio for the MCP server without a worker-thread hop per message.

The SDK's ``stdio_server()`` reads stdin and writes stdout through ``anyio.wrap_file``: every
line read and every write + flush is a round trip to a worker thread, about 0.6 ms of a
~1.5 ms tools/call round trip here. When stdin and stdout are pipes, sockets or ttys (what
an MCP client gives its server), :func:`pipe_stdio` serves the same protocol on asyncio
pipe transports instead, and hands them to ``stdio_server(stdin, stdout)`` so the SDK's
framing is unchanged. Anything else (say a regular file) falls back to the SDK's own path.

Like the SDK, it keeps the wire private while serving: the wire ends are duplicated onto
close-on-exec descriptors above 2, then fd 0 is pointed at /dev/null and fd 1 at stderr,
so a stray ``print`` or a child process can never write into the JSON-RPC stream. Both
descriptors are restored on exit.

On both paths every inbound line goes through :func:`mcp_server.conformance.check_line`
first: a line the SDK would drop silently (not JSON, not a JSON-RPC 2.0 request, params it
cannot read) is answered with the JSON-RPC error the spec asks for, sent on the SDK's own
write stream, instead of leaving the client waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import logging
import os
import stat
import sys
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from .conformance import check_line

log = logging.getLogger("mcp_server")

MAX_LINE_BYTES = 256 * 1024 * 1024  # one JSON-RPC message per line; larger lines are dropped


class _Lines:
    """``async for line in ...`` over an asyncio StreamReader (what stdio_server reads)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> "_Lines":
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                line = await self._reader.readline()
            except ValueError:  # longer than MAX_LINE_BYTES: dropped, the rest parses as garbage
                log.warning("dropped an inbound line longer than %d bytes", MAX_LINE_BYTES)
                continue
            if not line:
                raise StopAsyncIteration
            return line.decode("utf-8", errors="replace")


class _Conforming:
    """The inbound lines with the ones the SDK cannot read answered here (see
    :mod:`mcp_server.conformance`) instead of passed on; the answers go out on the SDK's
    write stream once :meth:`attach` has given it."""

    def __init__(self, lines: AsyncIterable[str]) -> None:
        self._lines = lines.__aiter__()
        self._write_stream: Any = None
        self._attached = anyio.Event()

    def attach(self, write_stream: Any) -> None:
        self._write_stream = write_stream
        self._attached.set()

    def __aiter__(self) -> "_Conforming":
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._lines.__anext__()
            try:
                verdict = check_line(line)
            except Exception:  # noqa: BLE001 - a checker bug must never cost the connection
                log.exception("checking an inbound line failed; passing it to the SDK unchecked")
                return line
            if verdict.passes:
                return line
            log.log(logging.DEBUG if not verdict.answers and verdict.reason == "blank line" else logging.WARNING,
                    "inbound line not passed to the SDK (%s); %d JSON-RPC error(s) sent", verdict.reason,
                    len(verdict.answers))
            for answer in verdict.answers:
                await self._attached.wait()
                try:
                    await self._write_stream.send(SessionMessage(answer))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    raise StopAsyncIteration from None


class _Writer:
    """``await write(text)`` / ``await flush()`` on an asyncio StreamWriter (flow-controlled)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


def _pipe_like(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


async def _connect(wire_in: int, wire_out: int) -> tuple[asyncio.BaseTransport, asyncio.StreamReader,
                                                        asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                     os.fdopen(wire_in, "rb", buffering=0, closefd=False))
    try:
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0, closefd=False))
    except BaseException:
        read_transport.close()
        raise
    return read_transport, reader, asyncio.StreamWriter(write_transport, protocol, None, loop)


@contextlib.asynccontextmanager
async def pipe_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """Yield the (read, write) streams of ``stdio_server`` served on pipe transports
    (or by the SDK's own stdio when the standard streams are not pipes)."""
    if not (_pipe_like(0) and _pipe_like(1)):
        async with _sdk_stdio() as streams:
            yield streams
        return
    sys.stdout.flush()
    blocking = (os.get_blocking(0), os.get_blocking(1))
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)  # the wire, on private descriptors
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    try:
        transports = await _connect(wire_in, wire_out)
    except (OSError, ValueError) as exc:  # e.g. a character device epoll refuses: use the SDK's path
        log.info("pipe transport unavailable (%s); using the SDK's stdio", exc)
        os.close(wire_in)
        os.close(wire_out)
        async with _sdk_stdio() as streams:
            yield streams
        return
    read_transport, reader, writer = transports
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # stray reads see EOF, stray writes go to stderr
    os.close(null)
    os.dup2(2, 1)
    try:
        lines = _Conforming(_Lines(reader))
        async with stdio_server(lines, _Writer(writer)) as streams:  # type: ignore[arg-type]
            lines.attach(streams[1])
            yield streams
    finally:
        with contextlib.suppress(Exception):
            await writer.drain()
        writer.close()
        read_transport.close()
        await asyncio.sleep(0)  # let the transports release their descriptors
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        for fd, was_blocking in zip((0, 1), blocking):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, was_blocking)  # shared with the wire: undo asyncio's O_NONBLOCK
        os.close(wire_in)
        os.close(wire_out)


@contextlib.asynccontextmanager
async def _sdk_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's own stdio (worker-thread reads and writes) with the inbound lines checked.

    The SDK claims fd 1 itself; fd 0 is claimed here the same way (the wire on a private
    close-on-exec duplicate, fd 0 pointed at /dev/null) because the lines are read here."""
    try:
        wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError as exc:  # no usable stdin: the SDK serves it as it can
        log.info("stdin cannot be duplicated (%s); serving it unchecked", exc)
        async with stdio_server() as streams:
            yield streams
        return
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    text = io.TextIOWrapper(os.fdopen(wire_in, "rb", closefd=False), encoding="utf-8", errors="replace")
    try:
        lines = _Conforming(anyio.wrap_file(text))
        async with stdio_server(lines) as streams:  # type: ignore[arg-type]
            lines.attach(streams[1])
            yield streams
    finally:
        with contextlib.suppress(Exception):
            text.detach()
        os.dup2(wire_in, 0)
        os.close(wire_in)
