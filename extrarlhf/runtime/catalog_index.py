"""A group's catalog index (``catalog.index.npz``): the catalog's fold and summary, saved so that
a reader of a large group need not fold the whole catalog again.

A derived, rebuildable cache, never the record: the catalog stays the truth. It is written
with the summary (:meth:`SessionStore.write_summary`: at the end of a series, every few
seconds during one, after a battle, by a repair) and holds, for the first ``size``
bytes of ``catalog.jsonl``, each battle's index, id, and the byte offset and line number of its
latest line, sorted by (index, battle id), and the group's summary computed from those lines.

A reader uses it only while it still describes the catalog: same device, inode, size and
modification time as when it was built. An append changes the size, a repair renames a new
file in (another inode), an edit changes the time. An edit that keeps the size within the
file system's timestamp granularity of the build would keep the time too, so an index built
less than ``RACY_NS`` after the catalog's last change (a "racy" index, as git calls the same
case) also records the crc32 of those bytes, and its readers check it. Anything else (no
index, another catalog, an unreadable or foreign file) and readers fold the catalog as
before. Whatever the index says, entries are read from the catalog itself, at their offsets.

:func:`build` folds the whole catalog. A series, the one process appending to its group's
catalog while it runs, keeps a :class:`LiveIndex` instead, which folds only the lines appended
since its last refresh: folding the whole catalog every few seconds cost the series' parent
process a core from about 4 x 10^5 battles on (8.4 CPU-s a fold at 336,000 battles, 23.2 at 10^6).
"""

from __future__ import annotations

import io
import os
import time
import zipfile
import zlib
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Protocol, Sequence

import numpy as np
import orjson

from ..core.fileio import atomic_write_chunks
from .catalog_lines import CatalogLine, catalog_lines, entry_at, gc_paused, shown, valid_lines
from .records import FINAL_STATUSES

INDEX_FILE = "catalog.index.npz"
INDEX_VERSION = 1
RACY_NS = 2_000_000_000  # a catalog changed less than this before its index was built: check its crc32
_CHUNK = 1 << 22


@dataclass(frozen=True)
class Identity:
    """What an index was built from: the catalog file as ``stat`` saw it, and how many bytes were folded."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    crc32: int | None  # of the first ``size`` bytes, for a racy index only

    @classmethod
    def of(cls, stat: os.stat_result) -> Identity:
        return cls(stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, None)

    def same_file(self, other: Identity) -> bool:
        return (self.dev, self.ino, self.size, self.mtime_ns) == (other.dev, other.ino, other.size, other.mtime_ns)


class SortedKeys(Sequence[tuple[int, str]]):
    """The index's (battle index, battle id) keys, ascending, as a sequence (``bisect`` works on it)."""

    def __init__(self, index: np.ndarray, battle_id: np.ndarray) -> None:
        self._index, self._battle_id = index, battle_id

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return int(self._index[i]), self._battle_id[i].decode()


@dataclass(frozen=True)
class CatalogIndex:
    keys: SortedKeys
    offsets: np.ndarray  # int64: the byte offset of each key's latest line
    lines: np.ndarray  # int64: its line number
    summary: dict[str, Any]  # as SessionStore.compute_summary gives it, at build time
    identity: Identity


def _crc32(path: Path, size: int) -> int:
    with open(path, "rb") as handle:
        return _crc32_of(handle, size)


def _crc32_of(handle: BinaryIO, size: int) -> int:
    """The crc32 of the first ``size`` bytes at ``handle``."""
    crc = 0
    for block in prefix_blocks(handle, size):
        crc = zlib.crc32(block, crc)
    return crc


def prefix_blocks(handle: BinaryIO, size: int) -> Iterator[memoryview]:
    """The first ``size`` bytes at ``handle`` (fewer if the file is shorter), block by block,
    read into one reused buffer (each block is valid until the next): a hash of a large
    catalog then allocates nothing per block."""
    buffer = bytearray(min(size, 1 << 20))
    view = memoryview(buffer)
    handle.seek(0)
    while size > 0 and (count := handle.readinto(view[:min(len(buffer), size)])):
        size -= count
        yield view[:count]


def build(catalog: Path, summarize: Callable[[Iterable[dict[str, Any]]], dict[str, Any]]) -> CatalogIndex:
    """Fold the catalog as it is now (a damaged line raises, as readers do) and summarize its
    latest entries (``summarize``, given them in catalog order); nothing is written."""
    try:
        stat = os.stat(catalog)
    except FileNotFoundError:
        identity = Identity(0, 0, 0, 0, None)
        return CatalogIndex(SortedKeys(np.zeros(0, np.int64), np.zeros(0, "S1")), np.zeros(0, np.int64),
                            np.zeros(0, np.int64), summarize(()), identity)
    now = time.time_ns()
    identity = Identity.of(stat)
    with open(catalog, "rb") as handle:
        with gc_paused():
            latest = {line.entry["battle_id"]: (line.entry["index"], line.number, line.offset)  # type: ignore[index]
                      for line in valid_lines(catalog_lines(catalog, handle, end=identity.size))}
        by_line = sorted(latest.values(), key=lambda v: v[1])

        def entries() -> Iterator[dict[str, Any]]:
            for _, _, offset in by_line:
                yield entry_at(catalog, handle, offset, identity.size)

        summary = summarize(entries())
    del by_line
    order = sorted(latest.items(), key=lambda kv: (kv[1][0], kv[0]))
    del latest
    if now - identity.mtime_ns < RACY_NS:
        identity = Identity(identity.dev, identity.ino, identity.size, identity.mtime_ns,
                            _crc32(catalog, identity.size))
    keys = SortedKeys(np.array([v[0] for _, v in order], np.int64),
                      np.array([b.encode() for b, _ in order], dtype=f"S{max((len(b) for b, _ in order), default=1)}"))
    return CatalogIndex(keys, np.array([v[2] for _, v in order], np.int64), np.array([v[1] for _, v in order], np.int64),
                        summary, identity)


class Fold(Protocol):
    """What a :class:`LiveIndex` keeps current: a fold of the latest entries (as readers see
    them: ``started`` shown as ``unfinished``) that can take back an entry a later line replaces."""

    def add(self, entry: dict[str, Any]) -> None: ...

    def retract(self, status: str) -> bool: ...  # take back an entry of that status; False: it cannot


class LiveIndex:
    """The index of a catalog kept current by the process appending to it: each :meth:`refresh`
    folds only the whole lines appended since the one before (a line still being written waits
    for the next), keeps the (index, battle id) keys, offsets, line numbers and statuses in
    arrays and the crc32 of the bytes folded, and gives the :class:`CatalogIndex` that
    :func:`build` would give for the same bytes (tests/runtime/test_catalog_index.py compares
    them). It starts over when the catalog is another file (a repair renamed one in) or shorter
    than what it folded, and falls back to :func:`build` when a line replaces an entry ``fold``
    cannot take back (a final one). A damaged line raises as readers raise, and the next refresh
    starts over.

    A caller already reading the whole catalog (a resume's diagnosis) can fold it here as it
    goes instead: :meth:`take` each line, then :meth:`taken`; the first refresh then reads only
    what was appended since.

    ``verify``: for a process that is not the group's only writer (battles started one by one,
    from the MCP server, the arena and the terminal at once), each refresh first checks that the
    bytes folded before are still the same (their crc32: a read, not a parse) and starts over
    when they are not: an edit in place since the last refresh is never folded as the old line."""

    def __init__(self, catalog: Path, new_fold: Callable[[], Fold], *, verify: bool = False) -> None:
        self.catalog, self._new_fold, self.verify = catalog, new_fold, verify
        self._reset(None)

    def _reset(self, file: tuple[int, int] | None) -> None:
        self._file = file  # (device, inode) of the catalog folded
        self._fold = self._new_fold()
        self._where: dict[str, int] = {}  # battle id -> its position in the arrays, first seen first
        self._index, self._offset, self._line = array("q"), array("q"), array("q")
        self._final = bytearray()  # 1 where the position's entry is final (its fold cannot take it back)
        self._ordered = True  # positions are in (index, battle id) order: no sort needed
        self._last: tuple[int, str] = (-1, "")
        self._width = 1
        self._size = self._lines = self._crc = 0
        self._whole = False  # a line replaced a final entry: this file is folded by build()
        self._taking = True  # take() may still fold lines from the file's start

    def _restart(self) -> None:
        """What was taken is dropped: the first refresh folds the catalog from its start."""
        self._reset(None)
        self._taking = False

    def take(self, line: CatalogLine) -> None:
        """Fold ``line``, the next line of a pass over the whole catalog from its start (damaged
        or not: a damaged one and the fold starts over at the first refresh)."""
        if not self._taking or self._whole:
            return
        if line.entry is None or not line.terminated:
            self._taking = False  # a damaged or unterminated line: a repair (or the refresh) reads it
            return
        self._whole = not self._fold_line(line)

    def taken(self, handle: BinaryIO, end: int) -> None:
        """The pass :meth:`take` was given covered the first ``end`` bytes of the catalog open at
        ``handle`` (read again here for their crc32 and line count, a fraction of parsing them)."""
        if not self._taking:
            self._restart()
            return
        stat = os.fstat(handle.fileno())
        handle.seek(0)
        crc = lines = size = 0
        while size < end and (block := handle.read(min(_CHUNK, end - size))):
            crc, lines, size = zlib.crc32(block, crc), lines + block.count(b"\n"), size + len(block)
        if size != end or (end and not _ends_line(handle, end)):
            self._restart()
            return
        self._file, self._size, self._lines, self._crc = (stat.st_dev, stat.st_ino), end, lines, crc
        self._taking = False

    def refresh(self, finish: Callable[[Any], dict[str, Any]]) -> CatalogIndex:
        """The index of the catalog as it is now; ``finish(fold)`` makes its summary."""
        now = time.time_ns()
        try:
            stat = os.stat(self.catalog)
        except FileNotFoundError:
            stat = None
        file = None if stat is None else (stat.st_dev, stat.st_ino)
        if stat is None or file != self._file or stat.st_size < self._size:
            self._reset(file)
        self._taking = False
        whole = lambda: build(self.catalog, lambda entries: finish(folded(self._new_fold(), entries)))  # noqa: E731
        if stat is None or self._whole:
            return whole()
        try:
            with open(self.catalog, "rb") as handle, gc_paused():
                if self.verify and self._size and _crc32_of(handle, self._size) != self._crc:
                    self._reset(file)  # an earlier byte changed: fold the file from its start
                    self._taking = False
                self._extend(handle, stat.st_size)
        except BaseException:
            self._reset(None)
            raise
        if self._whole:
            return whole()
        identity = Identity(stat.st_dev, stat.st_ino, self._size, stat.st_mtime_ns,
                            self._crc if now - stat.st_mtime_ns < RACY_NS else None)
        index = np.frombuffer(self._index, np.int64).copy()
        offsets = np.frombuffer(self._offset, np.int64).copy()
        lines = np.frombuffer(self._line, np.int64).copy()
        ids = np.array(list(self._where), dtype=f"S{self._width}") if self._where else np.zeros(0, "S1")
        if not self._ordered:
            order = np.lexsort((ids, index))
            index, offsets, lines, ids = index[order], offsets[order], lines[order], ids[order]
        return CatalogIndex(SortedKeys(index, ids), offsets, lines, finish(self._fold), identity)

    def _complete_lines(self, handle: BinaryIO, end: int) -> Iterator[bytes]:
        """The whole lines from where the last refresh stopped to byte ``end``, counted as read."""
        handle.seek(self._size)
        for raw in handle:
            if self._size + len(raw) > end or not raw.endswith(b"\n"):
                return  # being appended (or appended after the stat): the next refresh folds it
            self._crc = zlib.crc32(raw, self._crc)
            self._size += len(raw)
            self._lines += 1
            yield raw

    def _extend(self, handle: BinaryIO, end: int) -> None:
        start, first = self._size, self._lines + 1
        for line in valid_lines(catalog_lines(self.catalog, self._complete_lines(handle, end), start=start,
                                              first_number=first)):
            if not self._fold_line(line):
                self._whole = True
                return

    def _fold_line(self, line: CatalogLine) -> bool:
        """Fold one valid line; False when it replaces an entry the fold cannot take back."""
        entry = shown(line.entry)  # type: ignore[arg-type]
        battle_id, number = entry["battle_id"], entry["index"]
        final = entry["status"] in FINAL_STATUSES
        at = self._where.get(battle_id)
        if at is None:
            key = (number, battle_id)
            self._ordered = self._ordered and key > self._last
            self._last = key  # once out of order, the arrays are sorted at the end whatever comes
            self._where[battle_id] = len(self._index)
            self._width = max(self._width, len(battle_id))
            self._index.append(number)
            self._offset.append(line.offset)
            self._line.append(line.number)
            self._final.append(final)
        else:
            if self._final[at] or not self._fold.retract("unfinished"):
                return False
            if number != self._index[at]:
                self._index[at] = number
                self._ordered = False
            self._offset[at], self._line[at], self._final[at] = line.offset, line.number, final
        self._fold.add(entry)
        return True


def _ends_line(handle: BinaryIO, end: int) -> bool:
    handle.seek(end - 1)
    return handle.read(1) == b"\n"


def folded(fold: Any, entries: Iterable[dict[str, Any]]) -> Any:
    """``fold`` with every entry of ``entries`` added."""
    for entry in entries:
        fold.add(entry)
    return fold


def save(index: CatalogIndex, path: Path) -> None:
    """Write ``index`` to ``path`` atomically (a reader sees the old index or the new one)."""
    meta = {"version": INDEX_VERSION, "identity": index.identity.__dict__, "summary": index.summary}
    buffer = io.BytesIO()
    np.savez(buffer, meta=np.frombuffer(orjson.dumps(meta), np.uint8), index=index.keys._index,
             battle_id=index.keys._battle_id, offset=index.offsets, line=index.lines)
    atomic_write_chunks(path, [buffer.getvalue()])


def load(path: Path, catalog: Path) -> CatalogIndex | None:
    """The index at ``path`` if it still describes ``catalog`` (see the module docstring), else None."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = orjson.loads(data["meta"].tobytes())
            if meta.get("version") != INDEX_VERSION:
                return None
            identity = Identity(**meta["identity"])
            if not identity.same_file(Identity.of(os.stat(catalog))):
                return None
            if identity.crc32 is not None and _crc32(catalog, identity.size) != identity.crc32:
                return None
            keys = SortedKeys(data["index"], data["battle_id"])
            offsets, lines, summary = data["offset"], data["line"], meta["summary"]
    except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile):
        return None  # no index, no catalog, or a file this code did not write: fold the catalog instead
    if not (len(keys) == len(offsets) == len(lines)) or not isinstance(summary, dict):
        return None
    return CatalogIndex(keys, offsets, lines, summary, identity)


def position(index: CatalogIndex, battle_id: str) -> int | None:
    """Where ``battle_id`` is among the index's keys (a vectorized scan: milliseconds at 10^6), or None."""
    try:
        wanted = np.bytes_(battle_id.encode("ascii"))
    except UnicodeEncodeError:
        return None  # the catalog's battle ids are ASCII
    found = np.flatnonzero(index.keys._battle_id == wanted)
    return int(found[0]) if len(found) else None


@dataclass(frozen=True)
class CatalogView:
    """A catalog's battles as a reader pages them: ``keys`` (index, battle id) ascending, one per
    battle, and ``entries(start, stop)``: battle id -> latest entry of the keys in that range."""

    keys: Sequence[tuple[int, str]]
    entries: Callable[[int, int], dict[str, dict[str, Any]]]
    indexed: bool  # True: from the catalog index; False: the catalog was folded


def indexed_view(index: CatalogIndex, catalog: Path) -> CatalogView:
    """The view of a fresh index: each page reads its entries at their offsets (``entry_at``
    refuses bytes that are not a valid line, as when the file changed under the offsets)."""

    def entries(start: int, stop: int) -> dict[str, dict[str, Any]]:
        with open(catalog, "rb") as handle:
            return {index.keys[i][1]: entry_at(catalog, handle, int(index.offsets[i]), index.identity.size)
                    for i in range(start, min(stop, len(index.keys)))}

    return CatalogView(index.keys, entries, True)
