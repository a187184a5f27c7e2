"""Small crash-safe file helpers shared by the whole package.

* ``atomic_write_bytes`` / ``atomic_write_json``: readers see either the old content or
  the new content, never a half-written file (temp file in the same directory, fsync,
  ``os.replace``, fsync of the directory). The temp file is removed on any error.
* ``locked``: an exclusive ``fcntl.flock`` on a sibling ``<path>.lock`` file, for
  read-modify-write cycles shared between processes (and threads: each call opens its
  own file description, so two holders in one process exclude each other too).
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
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import NotFound, UnsupportedSchema

__all__ = ["atomic_write_bytes", "atomic_write_json", "locked", "lock_path", "append_line_locked", "fsync_dir",
           "read_json_document", "check_version"]

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
    target = Path(path)
    directory = target.parent
    payload = memoryview(data).cast("B")  # fail early (before creating anything) on non-bytes
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_current_umask()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        try:
            os.fchmod(fd, mode)
            written = 0
            while written < len(payload):
                written += os.write(fd, payload[written:])
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    fsync_dir(directory)


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


@contextlib.contextmanager
def locked(path: StrPath) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<path>.lock`` (created if missing) for the block.

    Blocks until the lock is free. Not re-entrant: do not nest ``locked`` on the same path
    in one thread (it would deadlock). The lock dies with the process, so a killed holder
    never leaves it stuck.
    """
    fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def append_line_locked(path: StrPath, line: str, *, fsync: bool = True) -> None:
    """Append ``line`` (one line; a trailing ``\\n`` is added if missing) to ``path``.

    Runs under :func:`locked`, with a single ``os.write`` on an ``O_APPEND`` fd followed by
    fsync, so concurrent appenders only ever produce whole lines. If a previous writer was
    killed mid-line (the file does not end with a newline), a newline is written first so
    the new record starts on its own line. ``line`` must not contain inner newlines.
    ``fsync=False`` skips the flush to disk: the line is still atomic and survives a killed
    process (it is in the page cache), only not a power cut.
    """
    if not isinstance(line, str):
        raise TypeError(f"line must be str, not {type(line).__name__}")
    body = line[:-1] if line.endswith("\n") else line
    if "\n" in body or "\r" in body:
        raise ValueError("append_line_locked appends exactly one line; the text contains a line break")
    data = (body + "\n").encode("utf-8")
    target = Path(path)
    with locked(target):
        created = not target.exists()
        fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            size = os.fstat(fd).st_size
            if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # heal a torn last line left by a killed writer
            written = os.write(fd, data)
            while written < len(data):  # regular files do not short-write in practice; be safe anyway
                written += os.write(fd, data[written:])
            if fsync:
                os.fsync(fd)
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
