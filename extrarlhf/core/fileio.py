"""Small crash-safe file helpers shared by the whole package.

* ``atomic_write_bytes`` / ``atomic_write_json``: readers see either the old content or
  the new content, never a half-written file (temp file in the same directory, fsync,
  ``os.replace``, fsync of the directory). The temp file is removed on any error.
* ``locked``: an exclusive ``fcntl.flock`` on a sibling ``<path>.lock`` file, for
  read-modify-write cycles shared between processes (and threads: each call opens its
  own file description, so two holders in one process exclude each other too). A lock
  file may be deleted by whoever holds it (``remove=True``, :func:`remove_unused_lock`):
  a waiter that then gets the flock of the deleted file notices and retries on the new one.
* ``writing``: turns an ``OSError`` of a full, read-only or forbidden filesystem into a
  clear ``disk_full`` / ``read_only`` / ``permission_denied`` error naming the directory;
  every writer here runs under it.
* ``append_line_locked``: line-atomic appends (one ``os.write`` on an ``O_APPEND`` fd,
  under the lock, then fsync).
* ``read_json_document``: a versioned JSON document (manifests, pointers, indexes), with
  clean errors for a missing file, bad JSON or another ``schema_version``.

POSIX only (``fcntl``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .errors import NotFound, UnsupportedSchema, resource_error

__all__ = ["atomic_write_bytes", "atomic_write_json", "locked", "lock_path", "append_line_locked", "fsync_dir",
           "read_json_document", "check_version", "writing", "LockBusy", "remove_unused_lock", "temp_file_owner"]

StrPath = str | os.PathLike[str]


def _current_umask() -> int:
    """The process umask without changing it (Linux ``/proc``), falling back to 0o022."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


@contextlib.contextmanager
def writing(directory: StrPath, what: str = "writing") -> Iterator[None]:
    """Run the block; an ``OSError`` meaning a full (ENOSPC, EDQUOT), read-only (EROFS) or
    forbidden (EACCES, EPERM) filesystem is re-raised as ``disk_full``, ``read_only`` or
    ``permission_denied`` naming ``directory`` and ``what`` was being done (see
    errors.resource_error). Nested uses keep the innermost (most precise) translation."""
    try:
        yield
    except OSError as exc:
        error = resource_error(exc, directory, what)
        if error is None:
            raise
        raise error from exc


def fsync_dir(directory: StrPath) -> None:
    """fsync a directory so a rename/creation inside it is durable (best effort on odd filesystems)."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        with contextlib.suppress(OSError):  # some filesystems refuse fsync on directories
            os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: StrPath, data: bytes) -> None:
    """Atomically replace ``path`` with ``data``.

    The parent directory must exist. An existing file's permission bits are kept; a new
    file gets ``0o666 & ~umask`` (like ``open``). Nothing half-written is ever visible,
    and no temp file is left behind on error.
    """
    payload = memoryview(data).cast("B")  # fail early (before creating anything) on non-bytes
    atomic_write_chunks(path, (payload,))


_WRITE_BUFFER = 1 << 20


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    with memoryview(data) as view:
        written = 0
        while written < len(view):
            written += os.write(fd, view[written:])


def atomic_write_chunks(path: StrPath, chunks: Iterable[bytes | memoryview]) -> None:
    """:func:`atomic_write_bytes` of the concatenation of ``chunks``, written as they come (a
    file of any size in bounded memory); an error while they are made leaves ``path`` as it was."""
    target = Path(path)
    directory = target.parent
    with writing(directory, f"writing {target.name}"):
        try:
            mode = os.stat(target).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_current_umask()
        # the writer's pid is in the temp name, so `gc` can tell a dead writer's leftover
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}-", suffix=".tmp", dir=directory)
        try:
            try:
                os.fchmod(fd, mode)
                buffer = bytearray()  # small chunks (lines) are written a megabyte at a time
                for chunk in chunks:
                    if len(chunk) >= _WRITE_BUFFER:
                        _write_all(fd, buffer)
                        _write_all(fd, chunk)
                    else:
                        buffer += chunk
                        if len(buffer) < _WRITE_BUFFER:
                            continue
                        _write_all(fd, buffer)
                    buffer.clear()
                _write_all(fd, buffer)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp_name, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
            raise
        fsync_dir(directory)


_TEMP_FILE = re.compile(r"\.(?P<target>.+)\.(?:(?P<pid>[0-9]+)-)?[a-z0-9_]+\.tmp")


def temp_file_owner(name: str) -> tuple[str, int | None] | None:
    """(target file name, writer pid or None) when ``name`` is a temp file of
    :func:`atomic_write_bytes` (``.<target>.<pid>-<random>.tmp``; files written before the pid
    was recorded have no pid), else None."""
    match = _TEMP_FILE.fullmatch(name)
    if match is None:
        return None
    return match["target"], None if match["pid"] is None else int(match["pid"])


def atomic_write_json(path: StrPath, obj: Any) -> None:
    """Atomically write ``obj`` as UTF-8 JSON (``ensure_ascii=False, sort_keys=True, indent=2``
    plus a trailing newline). Serialization happens fully in memory first, so a value that
    cannot be serialized leaves the existing file untouched."""
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True, indent=2) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def lock_path(path: StrPath) -> Path:
    """The sibling lock file used by :func:`locked` for ``path``: ``<path>.lock``."""
    p = Path(path)
    return p.with_name(p.name + ".lock")


class LockBusy(Exception):
    """``locked(..., wait=False)``: another holder has the lock."""


def _same_file(fd: int, path: Path) -> bool:
    """True when ``path`` still names the file open as ``fd`` (it was not deleted or replaced)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def _acquire(lock: Path, wait: bool) -> int:
    """An fd holding the exclusive flock of the file *currently* at ``lock`` (created if missing)."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    while True:
        with writing(lock.parent, f"opening the lock file {lock.name}"):
            fd = os.open(lock, flags, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LockBusy(f"{lock} is held by another process") from None
            if _same_file(fd, lock):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # the holder before us deleted the file: lock the one there now


@contextlib.contextmanager
def locked(path: StrPath, *, wait: bool = True, remove: bool = False) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<path>.lock`` (created if missing) for the block.

    Blocks until the lock is free (``wait=False``: raises :class:`LockBusy` at once instead).
    Not re-entrant: do not nest ``locked`` on the same path in one thread (it would
    deadlock). The lock dies with the process, so a killed holder never leaves it stuck.
    ``remove=True`` deletes the lock file before releasing it; the lock stays correct
    because every taker checks, once it holds the flock, that the file it locked is still
    the one at the path (and retries otherwise).
    """
    lock = lock_path(path)
    fd = _acquire(lock, wait)
    try:
        try:
            yield
        finally:
            if remove:
                with contextlib.suppress(OSError):  # tidiness only: never hide the block's own error
                    os.unlink(lock)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def remove_unused_lock(lock: StrPath, *, dry_run: bool = False) -> bool:
    """Delete the lock file ``lock`` (a ``<path>.lock`` of :func:`locked`) if nobody holds it.

    Safe against every user of :func:`locked`: the file is deleted while its flock is held,
    and a waiter that locked the deleted file retries on a fresh one. Returns False (and
    leaves it) when a live process holds it; True when it was removed, was already gone, or
    (``dry_run``) could be removed.
    """
    lock = Path(lock)
    try:
        fd = os.open(lock, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if not _same_file(fd, lock):
            return True  # already deleted (and maybe recreated, then by a live user: not ours)
        if not dry_run:
            with writing(lock.parent, f"removing the unused lock file {lock.name}"):
                os.unlink(lock)
        return True
    finally:
        os.close(fd)  # releases the flock


def append_line_locked(path: StrPath, line: str, *, fsync: bool = True) -> None:
    """Append ``line`` (one line; a trailing ``\\n`` is added if missing) to ``path``.

    Runs under :func:`locked`, with a single ``os.write`` on an ``O_APPEND`` fd followed by
    fsync, so concurrent appenders only ever produce whole lines. If a previous writer was
    killed mid-line (the file does not end with a newline), a newline is written first so
    the new record starts on its own line. ``line`` must not contain inner newlines.
    ``fsync=False`` skips the flush to disk: the line is still atomic and survives a killed
    process (it is in the page cache), only not a power cut. A write that fails part-way (a
    full disk) is truncated away before the error (``disk_full``...) is raised.
    """
    if not isinstance(line, str):
        raise TypeError(f"line must be str, not {type(line).__name__}")
    body = line[:-1] if line.endswith("\n") else line
    if "\n" in body or "\r" in body:
        raise ValueError("append_line_locked appends exactly one line; the text contains a line break")
    data = (body + "\n").encode("utf-8")
    target = Path(path)
    with locked(target), writing(target.parent, f"appending to {target.name}"):
        created = not target.exists()
        fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            size = os.fstat(fd).st_size
            if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # heal a torn last line left by a killed writer
            try:
                written = os.write(fd, data)
                while written < len(data):  # a short write happens on a filesystem filling up
                    written += os.write(fd, data[written:])
                if fsync:
                    os.fsync(fd)
            except OSError:  # e.g. ENOSPC after part of the line: take the part back, keep lines whole
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)
        if created and fsync:
            fsync_dir(target.parent)


def read_json_document(path: StrPath, expected: int, *, what: str = "", missing: str | None = None) -> dict:
    """The JSON object in ``path`` whose ``schema_version`` is ``expected``. A missing file is
    :class:`NotFound` (``missing``, else "<path> does not exist"); bad JSON, another shape or
    another version is :class:`UnsupportedSchema` naming the path (``what`` qualifies the
    version, e.g. "dataset ")."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotFound(missing or f"{path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise UnsupportedSchema(f"{path} is not valid JSON ({exc}); inspect or restore it") from None
    return check_version(doc, path, expected, what=what)


def check_version(doc: Any, where: StrPath, expected: int, *, what: str = "") -> dict:
    """``doc`` when it is a JSON object of ``schema_version`` ``expected``; else
    :class:`UnsupportedSchema` naming ``where`` (a file, or a file and line)."""
    if not isinstance(doc, dict):
        raise UnsupportedSchema(f"{where}: expected a JSON object")
    if doc.get("schema_version") != expected:
        raise UnsupportedSchema(f"{where}: {what}schema_version {doc.get('schema_version')!r} is not supported (this "
                                f"version of ExtraRLHF reads {expected}); upgrade ExtraRLHF to read it")
    return doc
