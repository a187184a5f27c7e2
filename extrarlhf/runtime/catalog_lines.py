"""The lines of a session group's catalog (``catalog.jsonl``): each one parsed and checked, read
as a stream (the whole file is never held), folded to byte offsets, read back at an offset.
Used by sessions.py (readers, reconcile), diagnosis.py (check, repair) and materialize."""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator

import orjson

from ..core.errors import CorruptRecord, RLHFError, UnsupportedSchema
from . import records

SESSIONS_SCHEMA_VERSION = 1
REPAIRS_LOG = "catalog-repairs.jsonl"
# What a message about a damaged catalog tells the user to do.
REPAIR_HINT = ("resume the series (it rebuilds a battle's line from its intact trace) or run `extrarlhf check "
               "--repair` (extrarlhf.runtime.sessions.check_sessions(sessions_dir, repair=True)); the damaged lines "
               f"are kept in {REPAIRS_LOG}. Or restore the file from a backup")


@dataclass
class CatalogLine:
    """One non-blank line of a catalog as read: its valid entry, or the error that makes it damaged."""

    number: int  # 1-based
    raw: bytes  # without its newline
    entry: dict[str, Any] | None
    error: RLHFError | None  # CorruptRecord (damaged) or UnsupportedSchema (another version)
    terminated: bool  # False: the last line, without its newline
    offset: int = 0  # where the line starts in the file (bytes)


def record_error(path: Path, line: int | None, exc: records.Bad, what: str) -> CorruptRecord:
    where = f"{path} line {line}" if line is not None else str(path)
    subject = f"field {exc.field!r}" if exc.field else f"the {what}"
    return CorruptRecord(f"{where}: {subject} {exc.why}", path, line, exc.field)


def parse_catalog_line(path: Path, number: int, raw: bytes, terminated: bool = True) \
        -> tuple[dict[str, Any] | None, RLHFError | None]:
    """(entry, None) for a valid catalog line, else (None, the error naming file, line and field)."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        tail = "" if terminated else (" (the file ends in the middle of this line: a writer was killed while "
                                      "appending it, or is appending it right now)")
        return None, CorruptRecord(f"{path} line {number}: the line is not valid JSON ({exc}){tail}", path, number)
    try:
        return records.check_catalog_entry(doc, SESSIONS_SCHEMA_VERSION), None
    except records.OtherVersion as exc:
        return None, UnsupportedSchema(f"{path} line {number}: {exc}; upgrade ExtraRLHF to read it")
    except records.Bad as exc:
        return None, record_error(path, number, exc, "line")


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while many acyclic objects (parsed lines) are built:
    its repeated full passes over the growing list would otherwise triple the time of reading
    a large catalog."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def scan_catalog(path: Path) -> list[CatalogLine]:
    """Every non-blank line of a catalog file, parsed and checked (nothing raised for a bad line)."""
    with gc_paused():
        return list(iter_catalog(path))


def open_catalog(path: Path) -> BinaryIO | None:
    """The catalog opened for reading, None when it does not exist."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise CorruptRecord(f"{path} is a directory, not a catalog; move it aside", path) from None


def iter_catalog(path: Path) -> Iterator[CatalogLine]:
    """The lines of :func:`scan_catalog` one at a time: memory holds one line, whatever the
    catalog's size (a group of 10^6 battles has a catalog of about a gigabyte)."""
    handle = open_catalog(path)
    if handle is not None:
        with handle:
            yield from catalog_lines(path, handle)


def catalog_lines(path: Path, handle: Iterable[bytes], end: int | None = None, *, start: int = 0,
                  first_number: int = 1) -> Iterator[CatalogLine]:
    """The lines of a catalog (``handle``: its lines as read, from its start, or from byte ``start``
    where line ``first_number`` begins), up to byte ``end`` (default: its end); a line cut at
    ``end`` is read as cut (as it was when ``end`` was its size)."""
    pos = start
    for number, raw in enumerate(handle, first_number):
        if end is not None:
            if pos >= end:
                return
            raw = raw[:end - pos]
        start, pos = pos, pos + len(raw)
        terminated = raw.endswith(b"\n")  # only the last line can be unterminated
        if terminated:
            raw = raw[:-1]
        if not raw.strip():
            continue
        entry, error = parse_catalog_line(path, number, raw, terminated)
        yield CatalogLine(number, raw, entry, error, terminated, start)


def valid_lines(lines: Iterable[CatalogLine]) -> Iterator[CatalogLine]:
    """The valid lines, as a reader takes them: a damaged line raises (CorruptRecord, with what
    to do), another schema_version is UnsupportedSchema, a torn last line is skipped."""
    for line in lines:
        if line.error is None:
            yield line
        elif line.terminated or not isinstance(line.error, CorruptRecord):
            raise reader_error(line.error)


def fold_offsets(path: Path, lines: Iterable[bytes]) -> dict[str, tuple[int, int]]:
    """battle id -> (its index, the byte offset of its latest line) over a catalog's ``lines``
    as read (checked as :func:`valid_lines` does): the fold without the entries."""
    with gc_paused():
        return {line.entry["battle_id"]: (line.entry["index"], line.offset)  # type: ignore[index]
                for line in valid_lines(catalog_lines(path, lines))}


def entry_at(path: Path, handle: BinaryIO, offset: int, end: int) -> dict[str, Any]:
    """The entry (``started`` shown as ``unfinished``) of the valid line at byte ``offset`` of
    an open catalog (from :func:`fold_offsets` over its first ``end`` bytes)."""
    handle.seek(offset)
    raw = handle.readline(end - offset)
    entry, error = parse_catalog_line(path, 0, raw.rstrip(b"\n"))
    if error is not None:  # the bytes under the offset changed: the file is not the one folded
        raise reader_error(error)
    return shown(entry)  # type: ignore[arg-type]


def shown(entry: dict[str, Any]) -> dict[str, Any]:
    """A battle's latest entry as readers see it: ``started`` (no final line yet) is ``unfinished``."""
    return {**entry, "status": "unfinished"} if entry["status"] == "started" else entry


def reader_error(error: RLHFError) -> RLHFError:
    """The error a reader raises for a bad catalog line: with what to do about it."""
    if isinstance(error, CorruptRecord):
        return CorruptRecord(f"{error}. The catalog is damaged and was not read: {REPAIR_HINT}", error.path,
                             error.line, error.field)
    return error


def problem(group: str | None, path: Path | str, line: int | None, field_name: str | None, code: str, message: str,
            repairable: bool) -> dict[str, Any]:
    """One entry of :func:`check_sessions`' list."""
    return {"group": group, "path": str(path), "line": line, "field": field_name, "code": code, "message": message,
            "repairable": repairable, "repaired": False}
