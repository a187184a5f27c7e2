"""Facts about local processes, read from ``/proc`` (Linux) with portable fallbacks, and worker
pools whose processes die with their parent and stop when told."""

from __future__ import annotations

import os
from typing import Any


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start_time) from ``/proc/<pid>/stat``, or None when unavailable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    # Field 2 (comm) is parenthesised and may contain spaces or ')': split after the last ')'.
    rest = raw[raw.rfind(b")") + 2 :].split()
    try:
        return rest[0].decode("ascii", "replace"), int(rest[19])  # fields 3 (state) and 22 (starttime)
    except (IndexError, ValueError):
        return None


def process_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None."""
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (exited, not yet reaped by its parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by another user
    stat = _proc_stat(pid)
    if stat is not None and stat[0] in ("Z", "X"):
        return False  # exited, only waiting for its parent to collect the status
    return True


def machine_workers() -> int:
    """Cores this process may run on: the most worker processes worth starting."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def cap_workers(asked: int) -> int:
    """``asked`` worker processes, capped to the machine's cores (more would only compete for
    them and multiply memory: each worker holds its own engine, models and buffers)."""
    return max(1, min(asked, machine_workers()))


def die_with(pid: int, interval_s: float = 0.2) -> None:
    """In a worker process: exit as soon as process ``pid`` (the parent that started the work)
    is gone, checked every ``interval_s`` by a daemon thread. Works whatever sits between the
    two (a forkserver), unlike a parent-death signal, which follows the direct parent thread."""
    import threading

    started = process_start_time(pid)

    def watch() -> None:
        import time

        while True:
            time.sleep(interval_s)
            if not pid_alive(pid) or process_start_time(pid) != started:  # gone, or the pid was reused
                os._exit(70)

    threading.Thread(target=watch, name=f"die-with-{pid}", daemon=True).start()


def _forkserver(preload: str):
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([preload])
    return context


def stop_flag(preload: str):
    """An event to pass as ``process_pool(..., stop=)``: set it and the pool's workers stop their
    work at the next :func:`adapters.work.check` (a decision, a search rollout)."""
    return _forkserver(preload).Event()


def _init_worker(parent: int, stop: Any) -> None:
    die_with(parent)
    if stop is not None:
        from adapters import work

        work.set_process_cancel(stop.is_set)


def process_pool(max_workers: int, preload: str, stop: Any = None):
    """A ``ProcessPoolExecutor`` of ``max_workers`` processes forked from a forkserver that has
    imported ``preload`` (never from this possibly threaded process), whose workers exit within
    a fraction of a second when this process dies, however it dies (SIGKILL included), and
    stop their work once ``stop`` (from :func:`stop_flag`) is set."""
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=max_workers, mp_context=_forkserver(preload), initializer=_init_worker,
                               initargs=(os.getpid(), stop))
