"""Raw identifiers of a window and a scan of written files for them (the ``no_raw_identifiers``
check of the production assets, DESIGN 12.1).

:func:`window_identifiers` reads, in one ``REPEATABLE READ READ ONLY`` snapshot, every raw id a
window's export could have seen: battle and player ids of the battles of the window (V5), or
session, assignment and player ids of its sessions and treatments (ReturnClock).
:func:`scan_for_identifiers` then looks for them in every file of a dataset folder: Parquet
files decoded (compressed pages would hide text; every string and list-of-string column,
each distinct value split into tokens at whitespace and punctuation), every other file as
UTF-8 text split the same way. An id is found when it equals a value or a token.

Ids shorter than :data:`MIN_SCANNED_CHARS` or made only of digits are not scanned (they
cannot be told apart from counts and row numbers); the report says how many were skipped.
Nothing here returns or logs an id: findings name the file and how many distinct ids it held.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, Mapping

from .export import check_window
from .gate import open_gate
from .reader import Window, close_connections, connect_production, reading

__all__ = ["window_identifiers", "scan_for_identifiers", "MIN_SCANNED_CHARS"]

MIN_SCANNED_CHARS = 6
_TOKEN = re.compile(r"[^\s\"',;()\[\]{}<>=|/\\]+")

_SESSIONS_SQL = ("SELECT session_id, player_id FROM player_sessions WHERE started_at < $1 "
                 "AND (ended_at IS NULL OR ended_at >= $2)")
_TREATMENTS_SQL = "SELECT assignment_id, player_id FROM return_treatments WHERE assigned_at < $1 AND assigned_at >= $2"


async def _read(access: Any, kind: str, window: Window) -> set[str]:
    conn = await connect_production(access)
    try:
        with reading("reading the window's identifiers", access):
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                if kind == "v5":
                    cond, args = window.where("b")
                    rows = await conn.fetch(f"SELECT battle_id, p1_player_id, p2_player_id FROM battles b WHERE "
                                            f"{cond}", *args)
                else:
                    args = [window.end_at, window.start_at]
                    rows = [*await conn.fetch(_SESSIONS_SQL, *args), *await conn.fetch(_TREATMENTS_SQL, *args)]
    finally:
        await close_connections(conn)
    return {value for row in rows for value in row if isinstance(value, str) and value}


def window_identifiers(kind: str, start_at: Any, end_at: Any, *,
                       environ: Mapping[str, str] | None = None) -> set[str]:
    """Every raw id of ``[start_at, end_at)`` for ``kind`` ``"v5"`` or ``"returnclock"``
    (whatever their ingestion time). Needs the gate open (``ProductionDisabled`` otherwise)."""
    if kind not in ("v5", "returnclock"):
        raise ValueError(f"kind must be 'v5' or 'returnclock', got {kind!r}")
    access = open_gate(environ)
    window = check_window(start_at, end_at, None)
    if window.start_at is None:
        raise ValueError("the identifier scan needs a bounded window (start_at)")
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(_read(access, kind, window))
    finally:
        loop.close()


def _string_values(column: Any) -> list[str]:
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if pa.types.is_dictionary(kind):
        column, kind = column.cast(kind.value_type), kind.value_type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _string_values(pc.list_flatten(column))
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return [v for v in pc.unique(column).to_pylist() if v]
    return []


def _parquet_texts(path: Path) -> list[str]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return [value for column in table.columns for value in _string_values(column)]


def _hits(texts: list[str], ids: set[str]) -> set[str]:
    found = set()
    for text in texts:
        if text in ids:
            found.add(text)
        found.update(t for t in _TOKEN.findall(text) if t in ids)
    return found


def scan_for_identifiers(folder: str | Path, identifiers: set[str]) -> dict[str, Any]:
    """Look for ``identifiers`` in every file under ``folder`` (see the module docstring).
    Returns ``{"clean", "files_scanned", "identifiers_scanned", "identifiers_not_scanned",
    "findings": [{"file", "distinct_ids"}]}`` -- never an id itself."""
    scanned = {i for i in identifiers if len(i) >= MIN_SCANNED_CHARS and not i.isdigit()}
    findings, files = [], 0
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        files += 1
        texts = _parquet_texts(path) if path.suffix == ".parquet" else [path.read_text("utf-8", errors="replace")]
        hits = _hits(texts, scanned)
        if hits:
            findings.append({"file": str(path.relative_to(folder)), "distinct_ids": len(hits)})
    return {"clean": not findings, "files_scanned": files, "identifiers_scanned": len(scanned),
            "identifiers_not_scanned": len(identifiers) - len(scanned), "findings": findings}
