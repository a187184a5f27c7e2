"""Facts about local processes, read from ``/proc`` (Linux) with portable fallbacks."""

from __future__ import annotations

import os


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
