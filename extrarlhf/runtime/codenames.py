"""Codename leases: pin a data-collection series to a named worker (DESIGN.md sections 5, 6).

A claim is a lease stored in ``<sessions_dir>/agents_index.json``::

    {"schema_version": 1,
     "leases": {"<codename>": {"codename", "group", "owner_pid", "owner_start_time",
                               "owner_host", "claimed_at", "heartbeat_at", "stale_after_s"}}}

Every read-modify-write runs under ``fileio.locked`` and is written with
``fileio.atomic_write_json``. Every operation first reaps ("self-healing reap") leases
whose owner process is gone -- no such pid, a zombie, or a pid recycled by another
process (different start time, ``/proc/<pid>/stat`` field 22) -- or whose heartbeat is
older than the lease's ``stale_after_s``. Liveness of the pid is only checked for leases
owned on this host; leases of other hosts expire by heartbeat only.

Two live claims of one codename never coexist. An index file that is corrupt or carries
an unknown ``schema_version`` is refused, never overwritten.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import socket
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core import fileio
from ..core.echo import looks_like_secret
from ..core.errors import RLHFError
from ..core.names import check_name
from ..core.procs import pid_alive, process_start_time

__all__ = [
    "CodenameError",
    "INDEX_NAME",
    "SCHEMA_VERSION",
    "claim",
    "heartbeat",
    "release",
    "list_leases",
    "reap",
    "hold",
    "index_path",
    "process_start_time",
    "check_codename",
]

SCHEMA_VERSION = 1
INDEX_NAME = "agents_index.json"
DEFAULT_STALE_AFTER_S = 300.0

CODENAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,47}")

_LEASE_FIELDS = (
    "codename",
    "group",
    "owner_pid",
    "owner_start_time",
    "owner_host",
    "claimed_at",
    "heartbeat_at",
    "stale_after_s",
)


class CodenameError(RLHFError):
    """A refused codename operation: ``CodenameError(message, code)``. ``code`` is machine-readable:
    ``invalid_argument``, ``codename_taken``, ``not_owner``, ``not_held``,
    ``corrupt_index``, ``unsupported_schema``."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message, code)


# --------------------------------------------------------------------------- helpers


def index_path(sessions_dir: str | os.PathLike[str]) -> Path:
    """``<sessions_dir>/agents_index.json``."""
    return Path(sessions_dir) / INDEX_NAME


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(ts: datetime) -> str:
    return ts.astimezone(timezone.utc).isoformat(timespec="microseconds")


def _parse_iso(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        ts = datetime.fromisoformat(value)
    except ValueError:
        return None
    return ts.replace(tzinfo=timezone.utc) if ts.tzinfo is None else ts




def check_codename(codename: Any) -> str:
    """A codename starts with a letter; letters, digits, '_' or '-'; 1 to 48 characters; and it
    does not look like a credential (an AWS access key id, an API key: it is written into traces
    and leases and shown by list_codenames), which is refused without being repeated."""
    if not isinstance(codename, str) or not CODENAME_RE.fullmatch(codename):
        raise CodenameError(
            f"invalid codename {codename!r}: it must start with a letter and contain only letters, "
            "digits, '_' or '-' (1 to 48 characters)",
            code="invalid_argument",
        )
    if looks_like_secret(codename):
        raise CodenameError("invalid codename (not repeated): it looks like a credential (an access key id, an "
                            "API key or a token), and codenames are recorded in traces and leases; name the agent "
                            "with a plain word such as 'alice-l2'", code="invalid_argument")
    return codename


def _validate_pid(owner_pid: Any) -> int:
    if owner_pid is None:
        return os.getpid()
    if isinstance(owner_pid, bool) or not isinstance(owner_pid, int) or owner_pid <= 0:
        raise CodenameError(f"owner_pid must be a positive int, got {owner_pid!r}", code="invalid_argument")
    return owner_pid


def _validate_stale(stale_after_s: Any) -> float:
    if (
        isinstance(stale_after_s, bool)
        or not isinstance(stale_after_s, (int, float))
        or not math.isfinite(stale_after_s)
        or stale_after_s <= 0
    ):
        raise CodenameError(
            f"stale_after_s must be a positive finite number of seconds, got {stale_after_s!r}",
            code="invalid_argument",
        )
    return float(stale_after_s)


def _corrupt(path: Path, why: str) -> CodenameError:
    return CodenameError(
        f"codename index {path} is corrupt ({why}); it was left untouched. Inspect it, and delete it "
        "if no worker is running (all leases in it are then forgotten).",
        code="corrupt_index",
    )


def _check_lease(path: Path, name: Any, lease: Any) -> None:
    if not isinstance(lease, dict):
        raise _corrupt(path, f"lease {name!r} is not an object")
    missing = [f for f in _LEASE_FIELDS if f not in lease]
    if missing:
        raise _corrupt(path, f"lease {name!r} lacks {', '.join(missing)}")
    if lease["codename"] != name:
        raise _corrupt(path, f"lease {name!r} names codename {lease['codename']!r}")
    pid, start = lease["owner_pid"], lease["owner_start_time"]
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise _corrupt(path, f"lease {name!r} has owner_pid {pid!r}")
    if start is not None and (isinstance(start, bool) or not isinstance(start, int)):
        raise _corrupt(path, f"lease {name!r} has owner_start_time {start!r}")
    for field in ("claimed_at", "heartbeat_at"):
        if _parse_iso(lease[field]) is None:
            raise _corrupt(path, f"lease {name!r} has an unreadable {field} {lease[field]!r}")
    stale = lease["stale_after_s"]
    if isinstance(stale, bool) or not isinstance(stale, (int, float)) or not stale > 0:
        raise _corrupt(path, f"lease {name!r} has stale_after_s {stale!r}")


def _load(path: Path) -> dict[str, Any]:
    """Read and validate the index (call under the lock). A missing file is an empty index."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {"schema_version": SCHEMA_VERSION, "leases": {}}
    except IsADirectoryError:
        raise _corrupt(path, "is a directory, not the codename index (its name is reserved); move it aside") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _corrupt(path, f"not valid UTF-8 JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _corrupt(path, "the top level is not a JSON object")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise CodenameError(
            f"codename index {path} has schema_version {version!r}; this version of extrarlhf only "
            f"understands {SCHEMA_VERSION}. The file was left untouched (upgrade extrarlhf, or inspect it).",
            code="unsupported_schema",
        )
    leases = data.get("leases")
    if not isinstance(leases, dict):
        raise _corrupt(path, "'leases' is not an object")
    for name, lease in leases.items():
        _check_lease(path, name, lease)
    return data


def _dead_reason(lease: dict[str, Any], now: datetime, host: str) -> str | None:
    """Why ``lease`` should be reaped, or None if it is live."""
    if lease["owner_host"] == host:
        pid = lease["owner_pid"]
        if not pid_alive(pid):
            return f"owner pid {pid} is gone"
        start = lease["owner_start_time"]
        current = process_start_time(pid)
        if start is not None and current is not None and current != start:
            return f"owner pid {pid} was recycled by another process"
    age = (now - _parse_iso(lease["heartbeat_at"])).total_seconds()  # type: ignore[operator]
    if age > float(lease["stale_after_s"]):
        return f"heartbeat is {age:.1f}s old (stale after {float(lease['stale_after_s']):g}s)"
    return None


def _reap_in(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Remove dead leases from ``data`` in place; return copies annotated with ``reap_reason``."""
    now, host = _now(), socket.gethostname()
    reaped = []
    for name in sorted(data["leases"]):
        reason = _dead_reason(data["leases"][name], now, host)
        if reason is not None:
            lease = data["leases"].pop(name)
            reaped.append({**lease, "reap_reason": reason})
    return reaped


@contextlib.contextmanager
def _index(sessions_dir: str | os.PathLike[str], *, create: bool) -> Iterator[tuple[Path, dict[str, Any] | None]]:
    """Lock the index, load it and reap it (persisting the reap). Yields (path, data); data is
    None when the sessions dir does not exist and ``create`` is False."""
    directory = Path(sessions_dir)
    path = directory / INDEX_NAME
    if not directory.is_dir():
        if not create:
            yield path, None
            return
        directory.mkdir(parents=True, exist_ok=True)
    for reserved in (path, Path(fileio.lock_path(path))):
        if reserved.is_dir():
            raise _corrupt(path, f"{reserved.name} is a directory; the name is reserved for the codename index "
                                 f"and its lock: move it aside")
    with fileio.locked(path):
        data = _load(path)
        data["_reaped"] = _reap_in(data)
        if data["_reaped"]:
            _save(path, data)
        yield path, data


def _save(path: Path, data: dict[str, Any]) -> None:
    fileio.atomic_write_json(path, {"schema_version": SCHEMA_VERSION, "leases": data["leases"]})


def _same_owner(lease: dict[str, Any], pid: int, start: int | None, host: str) -> bool:
    if lease["owner_pid"] != pid or lease["owner_host"] != host:
        return False
    return lease["owner_start_time"] is None or start is None or lease["owner_start_time"] == start


def _describe(lease: dict[str, Any]) -> str:
    age = max(0.0, (_now() - _parse_iso(lease["heartbeat_at"])).total_seconds())  # type: ignore[operator]
    left = max(0.0, float(lease["stale_after_s"]) - age)
    return (
        f"group {lease['group']!r} (pid {lease['owner_pid']} on host {lease['owner_host']}, "
        f"last heartbeat {age:.1f}s ago; it goes stale in {left:.1f}s unless that owner heartbeats)"
    )


# --------------------------------------------------------------------------- public API


def claim(
    sessions_dir: str | os.PathLike[str],
    codename: str,
    group: str,
    *,
    owner_pid: int | None = None,
    stale_after_s: float = DEFAULT_STALE_AFTER_S,
) -> dict[str, Any]:
    """Claim ``codename`` for ``group`` on behalf of ``owner_pid`` (default: this process).

    Re-claiming by the same owner for the same group refreshes the heartbeat (and
    ``stale_after_s``) and keeps ``claimed_at``. Raises :class:`CodenameError`
    (``codename_taken``) when another live owner holds it, or when this owner holds it
    for a different group. Returns a copy of the stored lease.
    """
    check_codename(codename)
    check_name(group)
    pid = _validate_pid(owner_pid)
    stale = _validate_stale(stale_after_s)
    if not pid_alive(pid):
        raise CodenameError(
            f"owner_pid {pid} is not a live process; cannot claim {codename!r} for it", code="invalid_argument"
        )
    start, host = process_start_time(pid), socket.gethostname()
    with _index(sessions_dir, create=True) as (path, data):
        assert data is not None
        now = _iso(_now())
        held = data["leases"].get(codename)
        if held is not None:
            if not _same_owner(held, pid, start, host):
                raise CodenameError(
                    f"codename {codename!r} is already claimed by {_describe(held)}. "
                    "Pick another codename, or wait until it is released or goes stale.",
                    code="codename_taken",
                )
            if held["group"] != group:
                raise CodenameError(
                    f"codename {codename!r} is already claimed by this same owner (pid {pid}) for group "
                    f"{held['group']!r}; release it before claiming it for group {group!r}.",
                    code="codename_taken",
                )
            lease = {**held, "heartbeat_at": now, "stale_after_s": stale}
            if lease["owner_start_time"] is None:
                lease["owner_start_time"] = start
        else:
            lease = {
                "codename": codename,
                "group": group,
                "owner_pid": pid,
                "owner_start_time": start,
                "owner_host": host,
                "claimed_at": now,
                "heartbeat_at": now,
                "stale_after_s": stale,
            }
        data["leases"][codename] = lease
        _save(path, data)
        return dict(lease)


def heartbeat(
    sessions_dir: str | os.PathLike[str], codename: str, *, owner_pid: int | None = None
) -> dict[str, Any]:
    """Refresh the heartbeat of a lease held by ``owner_pid`` (default: this process).

    Raises :class:`CodenameError` ``not_held`` when the codename is not (or no longer,
    e.g. reaped as stale) claimed, and ``not_owner`` when someone else holds it.
    Returns a copy of the updated lease.
    """
    check_codename(codename)
    pid = _validate_pid(owner_pid)
    start, host = process_start_time(pid), socket.gethostname()
    with _index(sessions_dir, create=False) as (path, data):
        held = None if data is None else data["leases"].get(codename)
        if held is None:
            reaped = [] if data is None else [r for r in data["_reaped"] if r["codename"] == codename]
            why = f" (its lease was just reaped: {reaped[0]['reap_reason']})" if reaped else ""
            raise CodenameError(
                f"codename {codename!r} is not claimed{why}; claim it again before heartbeating",
                code="not_held",
            )
        if not _same_owner(held, pid, start, host):
            raise CodenameError(
                f"cannot heartbeat codename {codename!r} as pid {pid}: it is held by {_describe(held)}",
                code="not_owner",
            )
        lease = {**held, "heartbeat_at": _iso(_now())}
        data["leases"][codename] = lease
        _save(path, data)
        return dict(lease)


def release(sessions_dir: str | os.PathLike[str], codename: str, *, owner_pid: int | None = None) -> bool:
    """Release ``codename`` held by ``owner_pid`` (default: this process).

    Returns True when released, False when the codename was not claimed (including a
    lease that had just been reaped). Raises :class:`CodenameError` ``not_owner`` when
    another owner holds it.
    """
    check_codename(codename)
    pid = _validate_pid(owner_pid)
    start, host = process_start_time(pid), socket.gethostname()
    with _index(sessions_dir, create=False) as (path, data):
        held = None if data is None else data["leases"].get(codename)
        if held is None:
            return False
        if not _same_owner(held, pid, start, host):
            raise CodenameError(
                f"cannot release codename {codename!r} as pid {pid}: it is held by {_describe(held)}. "
                "Only its owner may release it.",
                code="not_owner",
            )
        del data["leases"][codename]
        _save(path, data)
        return True


def list_leases(sessions_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Live leases (after reaping), sorted by codename. A missing sessions dir has none."""
    with _index(sessions_dir, create=False) as (_path, data):
        if data is None:
            return []
        return [dict(data["leases"][name]) for name in sorted(data["leases"])]


def reap(sessions_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Remove dead or stale leases; return them (each with an added ``reap_reason``)."""
    with _index(sessions_dir, create=False) as (_path, data):
        return [] if data is None else data["_reaped"]


@contextlib.contextmanager
def hold(sessions_dir: str | os.PathLike[str], codename: str, group: str, **kw: Any) -> Iterator[dict[str, Any]]:
    """Claim ``codename`` for the block and release it on exit, even if the block raises.

    ``kw`` is passed to :func:`claim` (``owner_pid``, ``stale_after_s``). If the block
    raised, a failure to release never masks its exception.
    """
    lease = claim(sessions_dir, codename, group, **kw)
    owner_pid = kw.get("owner_pid")
    try:
        yield lease
    except BaseException:
        with contextlib.suppress(CodenameError):
            release(sessions_dir, codename, owner_pid=owner_pid)
        raise
    release(sessions_dir, codename, owner_pid=owner_pid)
