"""One writer per session group at a time: the group lease (``<sessions>/<group>/lease.json``).

A series (``run_series``) and a repair (``check_sessions(repair=True)``) take the lease of
their group before they touch it and release it when they end::

    {"schema_version": 1, "group", "purpose": "series" | "repair", "owner_pid",
     "owner_start_time", "owner_host", "codename", "token", "claimed_at", "heartbeat_at",
     "stale_after_s"}

A second taker is refused at once with :class:`extrarlhf.core.errors.GroupBusy` naming the owner
(pid, host, codename, since when, last heartbeat) -- also from the same process, since each
acquisition has its own ``token``. Like a codename lease (codenames.py), a lease is reaped
when its owner is gone: no such pid on this host, a zombie, a pid recycled by another
process (different start time), or a heartbeat older than ``stale_after_s`` (the only test
for an owner on another host). The owner refreshes the heartbeat from a daemon thread every
``stale_after_s / 6`` seconds while it holds the lease; if its lease was reaped meanwhile
(a host suspended past ``stale_after_s``), :attr:`GroupLease.lost` turns true and the series
stops at its next chunk boundary.

Every read-modify-write holds ``fileio.locked(lease.json)``; the lease is written with
``fileio.atomic_write_json``. A damaged lease file is reported (``corrupt_record``) and never
overwritten: delete it if no series runs on the group.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..core import fileio
from ..core.errors import CorruptRecord, GroupBusy, UnsupportedSchema
from ..core.procs import pid_alive, process_start_time
from . import records

if TYPE_CHECKING:
    from .sessions import SessionStore

LEASE_NAME = "lease.json"
SCHEMA_VERSION = 1
DEFAULT_STALE_AFTER_S = 60.0

__all__ = ["LEASE_NAME", "GroupLease", "acquire", "current_owner", "describe_owner", "dead_reason"]


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(ts: datetime) -> str:
    return ts.astimezone(timezone.utc).isoformat(timespec="microseconds")


def _age_s(value: str) -> float | None:
    try:
        ts = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return max(0.0, (_now() - ts).total_seconds())


def read_lease(path: Path) -> dict[str, Any] | None:
    """The lease at ``path`` (None when there is none). A damaged one is
    :class:`CorruptRecord`, another schema_version :class:`UnsupportedSchema`."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise CorruptRecord(f"{path} is a directory, not a group lease (the name is reserved); move it aside",
                            path) from None
    hint = "; delete the file if no series is running on this group (a live owner rewrites it within seconds)"
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise CorruptRecord(f"{path}: the group lease is not valid JSON ({exc}){hint}", path) from None
    try:
        lease = records.check_lease(doc, SCHEMA_VERSION)
    except records.OtherVersion as exc:
        raise UnsupportedSchema(f"{path}: {exc}; upgrade ExtraRLHF to read it") from None
    except records.Bad as exc:
        where = f"field {exc.field!r} " if exc.field else ""
        raise CorruptRecord(f"{path}: the group lease is damaged: {where}{exc.why}{hint}", path,
                            field=exc.field) from None
    return lease


def dead_reason(lease: dict[str, Any], host: str | None = None) -> str | None:
    """Why ``lease`` is no longer held (its owner is gone or silent), or None while it is live."""
    host = host or socket.gethostname()
    if lease["owner_host"] == host:
        pid = lease["owner_pid"]
        if not pid_alive(pid):
            return f"owner pid {pid} is gone"
        start, current = lease["owner_start_time"], process_start_time(pid)
        if start is not None and current is not None and start != current:
            return f"owner pid {pid} was recycled by another process"
    age = _age_s(lease["heartbeat_at"])
    if age is None:
        return f"its heartbeat_at {lease['heartbeat_at']!r} is unreadable"
    if age > float(lease["stale_after_s"]):
        return f"its heartbeat is {age:.1f}s old (stale after {float(lease['stale_after_s']):g}s)"
    return None


def describe_owner(lease: dict[str, Any]) -> str:
    """``pid 123 on host h (codename Falcon), a series since ..., last heartbeat 2.0s ago``."""
    age = _age_s(lease["heartbeat_at"])
    who = f"pid {lease['owner_pid']} on host {lease['owner_host']}"
    if lease.get("codename"):
        who += f" (codename {lease['codename']})"
    beat = "unknown" if age is None else f"{age:.1f}s ago"
    return f"{who}, a {lease['purpose']} since {lease['claimed_at']}, last heartbeat {beat}"


def owner_view(lease: dict[str, Any]) -> dict[str, Any]:
    """The lease as shown to callers (without its token)."""
    return {k: v for k, v in lease.items() if k not in ("token", "schema_version")}


def current_owner(store: "SessionStore", group: str) -> dict[str, Any] | None:
    """The live lease of ``group`` (without its token), or None. Read-only: a dead lease is
    reported as None and left for the next taker to reap."""
    lease = read_lease(store.lease_path(group))
    if lease is None or dead_reason(lease) is not None:
        return None
    return owner_view(lease)


def busy_error(group: str, lease: dict[str, Any], doing: str) -> GroupBusy:
    return GroupBusy(
        f"session group {group!r} is owned by {describe_owner(lease)}; {doing}. A group has one series owner at a "
        f"time: wait until that {lease['purpose']} ends (series_status shows its progress) or stop it. Its lease "
        f"is reaped automatically once that process is gone or silent for {float(lease['stale_after_s']):g}s.",
        owner_view(lease))


class GroupLease:
    """A held group lease; :meth:`release` (or leaving the ``with`` block) gives it back."""

    def __init__(self, path: Path, lease: dict[str, Any], heartbeat: bool) -> None:
        self.path = path
        self.lease = lease
        self.token = lease["token"]
        self.group = lease["group"]
        self.reaped: dict[str, Any] | None = None  # the dead lease this one replaced, if any
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if heartbeat:
            interval = max(0.05, float(lease["stale_after_s"]) / 6)
            self._thread = threading.Thread(target=self._beat, args=(interval,), daemon=True,
                                            name=f"group-lease-{self.group}")
            self._thread.start()

    def _beat(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                if not self.heartbeat():
                    return
            except Exception:  # noqa: BLE001 - a failed heartbeat (full disk...) is retried next time
                continue

    def heartbeat(self) -> bool:
        """Refresh the heartbeat; False (and :attr:`lost`) when the lease is no longer ours."""
        with fileio.locked(self.path):
            try:
                held = read_lease(self.path)
            except (CorruptRecord, UnsupportedSchema):
                held = None
            if held is None or held["token"] != self.token:
                self.lost = True
                return False
            held["heartbeat_at"] = _iso(_now())
            fileio.atomic_write_json(self.path, held)
            self.lease = held
        return True

    def release(self) -> bool:
        """Give the lease back; True when it was still ours. Idempotent."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        try:
            with fileio.locked(self.path):
                held = read_lease(self.path)
                if held is None or held["token"] != self.token:
                    return False
                os.unlink(self.path)
                return True
        except (FileNotFoundError, CorruptRecord, UnsupportedSchema):
            return False  # the group folder vanished, or the file was replaced: nothing of ours to remove

    def __enter__(self) -> "GroupLease":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def acquire(store: "SessionStore", group: str, *, purpose: str = "series", codename: str | None = None,
            stale_after_s: float = DEFAULT_STALE_AFTER_S, heartbeat: bool = True) -> GroupLease:
    """Take ``group``'s lease for this process, creating the group folder if needed; raises
    :class:`GroupBusy` at once when a live owner holds it (a dead one is reaped)."""
    folder = store.group_dir(group)
    folder.mkdir(parents=True, exist_ok=True)
    path = store.lease_path(group)
    pid, host = os.getpid(), socket.gethostname()
    with fileio.locked(path):
        held = read_lease(path)
        reaped = None
        if held is not None:
            reason = dead_reason(held, host)
            if reason is None:
                raise busy_error(group, held, f"this {purpose} was refused")
            reaped = {**owner_view(held), "reap_reason": reason}
        now = _iso(_now())
        lease = {"schema_version": SCHEMA_VERSION, "group": group, "purpose": purpose, "owner_pid": pid,
                 "owner_start_time": process_start_time(pid), "owner_host": host, "codename": codename,
                 "token": secrets.token_hex(16), "claimed_at": now, "heartbeat_at": now,
                 "stale_after_s": float(stale_after_s)}
        fileio.atomic_write_json(path, lease)
    held_lease = GroupLease(path, lease, heartbeat)
    held_lease.reaped = reaped
    return held_lease
