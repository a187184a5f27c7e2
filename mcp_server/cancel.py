"""Long work: a bounded pool of worker threads, admission control, cancellation and shutdown.

Cheap tools (ping, get_state, legal_actions, list_*) run in the SDK's own worker threads.
Everything that can run long (a series, a benchmark, training, an export, a battle move
against a search actor) goes through :func:`run_long` / :func:`run_cancellable` instead, so it
can never take the threads the cheap calls need:

* at most ``slots`` long calls run at once (default: the machine's cores, at least 2) and at
  most ``waiting`` more wait for a slot (default 2 x slots); a call beyond that is refused at
  once with ``busy`` (the error says how many run and wait, and what to do) instead of
  queueing without bound and holding memory;
* the work runs in a thread under an :mod:`adapters.work` scope: when the client sends
  ``notifications/cancelled`` (the SDK then cancels the request's scope), the scope's cancel
  flag turns true and the work stops at its next checkpoint (a decision, a search rollout, a
  training batch, a page); only then does the cancellation go on. MCP never answers a
  cancelled request. ``max_rollouts`` caps the search rollouts one call may spend;
* :meth:`LongWork.shutdown` (the end of input, see :mod:`mcp_server.drain`) refuses the
  waiting calls with ``shutting_down`` and stops the running ones the same way; a call whose
  work was cut short by it is answered with ``shutting_down`` (one that returns a partial
  result of its own, like a series, returns it), so every request read gets a reply.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

import anyio
import anyio.to_thread

from adapters import work
from extrarlhf.core.errors import Cancelled, RLHFError
from extrarlhf.core.procs import machine_workers


class Busy(RLHFError):
    code = "busy"


class ShuttingDown(RLHFError):
    code = "shutting_down"


class LongWork:
    """The long-work pool of one server process (see the module docstring)."""

    def __init__(self, slots: int | None = None, waiting: int | None = None) -> None:
        self.slots = slots or max(2, machine_workers())
        self.max_waiting = self.slots * 2 if waiting is None else waiting
        self._limiter = anyio.CapacityLimiter(self.slots)  # admission: who may run
        self._threads = anyio.CapacityLimiter(self.slots)  # the threads they run in (never contended)
        self.waiting = 0
        self._waiters: set[anyio.CancelScope] = set()
        self._stops: set[threading.Event] = set()
        self.stopping = False

    @property
    def running(self) -> int:
        return self.slots - int(self._limiter.available_tokens)

    def status(self) -> dict[str, int]:
        return {"running": self.running, "waiting": self.waiting, "slots": self.slots,
                "max_waiting": self.max_waiting}

    def shutdown(self) -> None:
        """Refuse the waiting calls and stop the running ones (call it on the event loop)."""
        self.stopping = True
        for waiter in list(self._waiters):
            waiter.cancel()
        for stop in list(self._stops):
            stop.set()

    def _refuse_if_full(self, tool: str) -> None:
        if self.stopping:
            raise ShuttingDown(_STOPPING.format(tool=tool))
        if self._limiter.available_tokens == 0 and self.waiting >= self.max_waiting:
            raise Busy(f"{tool} was refused: the server is busy with long work ({self.running} call(s) running, the "
                       f"most it runs at once, and {self.waiting} waiting, the most it queues). Retry once one of "
                       f"them has finished, or cancel one; cheap calls (ping, get_state, list_*) still answer.")

    async def run(self, tool: str, call: Callable[[work.Cancel], Any], max_rollouts: int | None = None) -> Any:
        """``call(cancel)`` in a worker thread once a slot is free (see the module docstring)."""
        self._refuse_if_full(tool)
        self.waiting += 1
        try:
            with anyio.CancelScope() as waiter:
                self._waiters.add(waiter)
                try:
                    await self._limiter.acquire()
                finally:
                    self._waiters.discard(waiter)
        finally:
            self.waiting -= 1
        if waiter.cancelled_caught:  # only shutdown() cancels this scope
            raise ShuttingDown(_STOPPING.format(tool=tool))
        try:
            return await self._run_thread(tool, call, max_rollouts)
        finally:
            self._limiter.release()

    async def _run_thread(self, tool: str, call: Callable[[work.Cancel], Any], max_rollouts: int | None) -> Any:
        stop = threading.Event()
        if self.stopping:
            stop.set()
        self._stops.add(stop)

        def body() -> Any:
            with work.scope(stop.is_set, max_rollouts):
                return call(stop.is_set)

        done = anyio.Event()
        outcome: dict[str, Any] = {}

        async def in_thread() -> None:
            try:  # to_thread waits for the thread even when cancelled (abandon_on_cancel=False)
                outcome["result"] = await anyio.to_thread.run_sync(body, limiter=self._threads)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                outcome["error"] = exc
            finally:
                done.set()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(in_thread)
                try:
                    await done.wait()
                except anyio.get_cancelled_exc_class():
                    stop.set()
                    with anyio.CancelScope(shield=True):
                        await done.wait()
                    raise
        finally:
            self._stops.discard(stop)
        error = outcome.get("error")
        if error is not None:
            if self.stopping and isinstance(error, (work.WorkCancelled, Cancelled)):
                raise ShuttingDown(_STOPPING.format(tool=tool)) from None
            if isinstance(error, work.WorkCancelled):  # a cancel that did not come from this call
                raise Cancelled(f"{tool} was cancelled; nothing it was building was published") from None
            raise error
        return outcome["result"]


_STOPPING = ("{tool} was not finished: the server is stopping (its input ended and the time it gives running "
             "calls ran out), so the call was cancelled; nothing half-done was published. Run it again in a new "
             "session (a series resumes where it stopped).")

LONG_WORK = LongWork()


def configure(slots: int | None = None, waiting: int | None = None) -> LongWork:
    """Replace this process's pool (the server does it once at start)."""
    global LONG_WORK
    LONG_WORK = LongWork(slots, waiting)
    return LONG_WORK


async def run_long(tool: str, fn: Callable[..., Any], /, *args: Any, max_rollouts: int | None = None,
                   **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` as long work (bounded, cancellable at the work's checkpoints)."""
    return await LONG_WORK.run(tool, lambda cancel: fn(*args, **kwargs), max_rollouts)


async def run_cancellable(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, cancel=..., **kwargs)`` as long work, for core functions that poll a ``cancel``
    callable themselves (between battles, chunks, pages) on top of the work checkpoints."""
    tool = getattr(fn, "__name__", "the call")
    return await LONG_WORK.run(tool, lambda cancel: functools.partial(fn, *args, cancel=cancel, **kwargs)())
