"""Bounded, cancellable work: the checkpoint long computations call between small steps.

A caller that can be cancelled (an MCP request, a worker of a cancelled series) runs its
work inside :func:`scope` with a ``cancel`` callable and, optionally, a cap on the search
rollouts the call may spend. The code that does the work calls :func:`check` at fine
granularity (each policy decision, each batch of search rollouts, each training batch):
``check`` raises :class:`WorkCancelled` once ``cancel()`` is true, and counts rollouts so the
caller can stop cleanly once its cap is spent (:func:`cap_reached`).

The scope is per thread (a context variable set in the thread that does the work), so
concurrent calls never see each other's scope; a worker process can also install one
process-wide cancel flag (:func:`set_process_cancel`), set by its parent. Outside any scope
``check`` costs one lookup and never raises: the CLI and library callers run unbounded
unless they ask otherwise.
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

Cancel = Callable[[], bool]


class WorkCancelled(BaseException):
    """The work's caller cancelled it; what the work was building was not published.

    A BaseException, like ``asyncio.CancelledError``: the ``except Exception`` handlers that
    turn a policy's failure into a fallback or a battle into ``crashed`` must not swallow a
    cancellation."""


@dataclass
class WorkScope:
    cancel: Cancel
    max_rollouts: int | None = None  # search rollouts this call may spend (None: no cap)
    rollouts: int = 0  # spent so far


_SCOPE: contextvars.ContextVar[WorkScope | None] = contextvars.ContextVar("extrarlhf_work_scope", default=None)
_PROCESS_CANCEL: list[Cancel] = []


@contextmanager
def scope(cancel: Cancel, max_rollouts: int | None = None) -> Iterator[WorkScope]:
    """Run the enclosed work under ``cancel`` (and the rollout cap) in this thread."""
    work = WorkScope(cancel, max_rollouts)
    token = _SCOPE.set(work)
    try:
        yield work
    finally:
        _SCOPE.reset(token)


@contextmanager
def also_cancelled_by(cancel: Cancel) -> Iterator[WorkScope]:
    """A scope for the enclosed work that stops when ``cancel()`` or the enclosing scope's
    cancel flag is true (a library function with its own ``cancel`` argument, called by a
    cancellable caller or not)."""
    outer = _SCOPE.get()
    either = cancel if outer is None else (lambda: cancel() or outer.cancel())
    with scope(either, None if outer is None else outer.max_rollouts) as work:
        yield work


def set_process_cancel(cancel: Cancel | None) -> None:
    """A process-wide cancel flag (a worker process's, set by its parent); None removes it."""
    _PROCESS_CANCEL.clear()
    if cancel is not None:
        _PROCESS_CANCEL.append(cancel)


def cancelled() -> bool:
    """True once the current scope's (or this process's) cancel flag is set."""
    work = _SCOPE.get()
    if work is not None and work.cancel():
        return True
    return bool(_PROCESS_CANCEL) and _PROCESS_CANCEL[0]()


def check(rollouts: int = 0) -> None:
    """Count ``rollouts`` against the current scope and raise :class:`WorkCancelled` if the
    work was cancelled. Cheap: call it at every small step."""
    work = _SCOPE.get()
    if work is not None:
        work.rollouts += rollouts
    if cancelled():
        raise WorkCancelled("the work was cancelled by its caller")


def cap_reached() -> bool:
    """True once the current scope has spent its rollout cap (the caller stops at a clean point)."""
    work = _SCOPE.get()
    return work is not None and work.max_rollouts is not None and work.rollouts >= work.max_rollouts


def current() -> WorkScope | None:
    return _SCOPE.get()
