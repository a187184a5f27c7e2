"""Core work in a worker thread that stops when its MCP request is cancelled.

A sync core function runs in a thread; anyio cannot interrupt a thread, so cancelling the
request alone would leave the work running (a series would go on playing and keep its
codename lease). :func:`run_cancellable` passes the function a ``cancel`` callable: when the
client sends ``notifications/cancelled`` (the SDK then cancels the request's scope), ``cancel()``
turns true, the core stops at its next battle or chunk boundary and cleans up (leases
released, nothing half-published), and only then does the cancellation go on. MCP never
answers a cancelled request; the server stays responsive for the next ones.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

import anyio
import anyio.to_thread


async def run_cancellable(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, cancel=..., **kwargs)`` in a worker thread (see the module docstring)."""
    stop = threading.Event()
    call = functools.partial(fn, *args, cancel=stop.is_set, **kwargs)
    done = anyio.Event()
    outcome: dict[str, Any] = {}

    async def work() -> None:
        try:  # to_thread waits for the thread even when cancelled (abandon_on_cancel=False)
            outcome["result"] = await anyio.to_thread.run_sync(call)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            outcome["error"] = exc
        finally:
            done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(work)
        try:
            await done.wait()
        except anyio.get_cancelled_exc_class():
            stop.set()
            with anyio.CancelScope(shield=True):
                await done.wait()
            raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]
