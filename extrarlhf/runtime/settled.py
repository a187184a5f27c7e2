"""What a clean reconcile established about a group's catalog, kept by the process that starts
battles in it one by one (:func:`next_index`, for ``match.start_match``: the MCP server, the
arena, the terminal player), so that its next start reads only what was appended since.

A start must never act on a damaged catalog or reuse a battle index: :meth:`SessionStore.reconcile`
reads the whole catalog and lists the trace folders to make sure (0.51 s a start at 20,000
battles, about 22 s at 10^6: docs/benchmarks.md). After one clean reconcile (nothing to repair,
nothing to refuse) this process keeps a :class:`SettledCatalog`: the sha256 of the catalog bytes
that reconcile read, the battle id of each index and whether its latest line is final, and the
manifest's configuration. The next start in the group, under the same locks:

1. reads the manifest and the catalog's earlier bytes, which must be the configuration and
   exactly the bytes (their sha256) that reconcile read;
2. parses the lines appended since (by this process or another): each must be valid and
   terminated, give its index the battle id it had (one id per index), not follow a final
   line of its battle, agree with the manifest (``consistency.LineCheck``), and each battle it
   makes final must have a trace meta that agrees too (up to ``consistency.RESUME_SAMPLE`` of
   them, evenly spaced);
3. lists the trace folders: each one not seen before must be a battle whose latest line is
   final (one seen before was, and stays so: nothing may follow a final line).

Anything else -- another catalog file (a repair renamed one in), a shorter one, an edited
byte, a damaged or unterminated line, a disagreement, a folder without a final line -- and the
start runs the whole reconcile instead, which repairs or refuses exactly as before (and keeps a
new :class:`SettledCatalog` when it ends clean). What the shortcut leaves out is the rest of the
meta sample: a full reconcile reads up to 256 metas of the whole group, the shortcut those of
the battles finished since. The cost left is reading and hashing the catalog (about 1 GB/s) and
listing the folders, a fraction of parsing every line; the memory kept is about 9 bytes a
battle, and the names of the folders seen (about 100 bytes a battle).
"""

from __future__ import annotations

import hashlib
import io
import os
from array import array
from typing import TYPE_CHECKING, Any, BinaryIO

from ..core.fileio import locked
from . import consistency
from .catalog_index import prefix_blocks
from .catalog_lines import CatalogLine, catalog_lines, open_catalog
from .records import BATTLE_ID, FINAL_STATUSES

if TYPE_CHECKING:
    from .sessions import SessionStore

__all__ = ["SettledCatalog", "next_index"]


def next_index(store: SessionStore, group: str) -> int:
    """The index of the next battle started one by one in ``group`` (the caller holds its
    allocation lock): what ``store.reconcile(group)["next_index"]`` gives, reading only what was
    appended since this store's last clean reconcile of the group when it can (module docstring)."""
    known = store.settled.pop(group, None)
    if known is not None:
        with locked(store.catalog_path(group)):
            index = known.advance(store, group)
        if index is not None:
            store.settled[group] = known
            return index
    fresh = SettledCatalog(store.read_manifest(group)["configuration"])
    index = store.reconcile(group, fresh)["next_index"]
    if fresh.complete:
        store.settled[group] = fresh
    return index


class SettledCatalog:
    """A group's catalog as a clean reconcile read it (module docstring): fed each line of the
    reconcile's pass (:meth:`take`), then the bytes it covered (:meth:`taken`)."""

    def __init__(self, configuration: dict[str, Any]) -> None:
        self.configuration = configuration
        self.file: tuple[int, int] | None = None  # (device, inode) of the catalog read
        self.end = 0  # bytes of it read
        self.digest = b""  # their sha256
        self.ids = array("q")  # battle index -> 1 + its battle id's hex suffix (0: no line)
        self.final = bytearray()  # battle index -> 1 when its battle's latest line is final
        self.top = -1  # the highest battle index seen
        self.seen: set[str] = set()  # trace folder names found to be final battles (or no battle) before
        self.valid = True  # False: the shortcut cannot describe this catalog
        self.complete = False  # taken() accepted the bytes

    def take(self, line: CatalogLine) -> None:
        """Fold ``line``, the next of a pass over the whole catalog from its start."""
        if self.valid and not self._fold(line):
            self.valid = False

    def taken(self, handle: BinaryIO, end: int) -> None:
        """The pass covered the first ``end`` bytes of the catalog open at ``handle``, and the
        reconcile found nothing to repair: their sha256 is kept (a second read, for the hash only)."""
        if not self.valid:
            return
        digest = _prefix_digest(handle, end)
        if digest is not None:
            stat = os.fstat(handle.fileno())
            self.file, self.end, self.digest, self.complete = (stat.st_dev, stat.st_ino), end, digest.digest(), True

    def advance(self, store: SessionStore, group: str) -> int | None:
        """The next battle index, when the catalog is still what :meth:`taken` saw plus valid
        lines and every trace folder has a final line; else None (the caller reconciles). The
        caller holds the catalog's lock; on None this object is left half-updated: drop it."""
        if not self.complete or store.read_manifest(group)["configuration"] != self.configuration:
            return None
        path = store.catalog_path(group)
        handle = open_catalog(path)
        if handle is None:
            return None
        with handle:
            stat = os.fstat(handle.fileno())
            if (stat.st_dev, stat.st_ino) != self.file or stat.st_size < self.end:
                return None
            digest = _prefix_digest(handle, self.end)
            if digest is None or digest.digest() != self.digest:
                return None
            handle.seek(self.end)
            appended = handle.read(stat.st_size - self.end)
        if appended and not appended.endswith(b"\n"):
            return None  # under the lock no append is in progress: a torn line is damage
        lines = consistency.LineCheck(self.configuration)
        finished = []
        for line in catalog_lines(path, io.BytesIO(appended), start=self.end):
            entry = line.entry
            if entry is None or not self._fold(line):
                return None
            lines.see(entry)
            if entry["status"] in FINAL_STATUSES:
                finished.append(entry["battle_id"])
        if lines.found:
            return None
        if finished:
            battle_dir = store.battle_dirs(group)
            if any(store._meta_mismatch(battle_dir, self.configuration, battle_id) is not None
                   for battle_id in consistency.evenly(finished)):
                return None
        if not self._folders_final(store.battles_path(group)):
            return None  # a trace folder without a final line: the reconcile rebuilds or refuses it
        digest.update(appended)
        self.end, self.digest = stat.st_size, digest.digest()
        return self.top + 1

    def _folders_final(self, battles: os.PathLike[str]) -> bool:
        """Whether every trace folder in ``battles`` is a battle whose latest line is final. A
        name is read as a battle id without the regex first (a name that is not one and still
        reads as a final battle is left alone, as the reconcile leaves it)."""
        try:
            names = set(os.listdir(battles))
        except (FileNotFoundError, NotADirectoryError):
            return True
        ids, final = self.ids, self.final
        new = names - self.seen  # a battle final once stays final: a line after a final one is refused (_fold)
        for name in new:
            try:
                index = int(name[1:-11])
                if ids[index] == 1 + int(name[-10:], 16) and final[index]:
                    continue
            except (ValueError, IndexError):
                pass
            if BATTLE_ID.fullmatch(name):
                return False
        self.seen |= new
        return True

    def _fold(self, line: CatalogLine) -> bool:
        """Fold a valid, terminated line; False for any other, for an index another battle id
        has, or for a battle whose line was final already."""
        entry = line.entry
        if entry is None or not line.terminated:
            return False
        battle_id, index = entry["battle_id"], entry["index"]  # checked against records.BATTLE_ID
        if int(battle_id[1:-11]) != index:
            return False
        suffix = 1 + int(battle_id[-10:], 16)
        if index >= len(self.ids):
            grow = max(index + 1, 2 * len(self.ids), 1024) - len(self.ids)  # doubling: amortized
            self.ids.extend(array("q", bytes(8 * grow)))
            self.final.extend(bytes(grow))
        if self.ids[index] not in (0, suffix) or self.final[index]:
            return False  # two battles for one index, or a line after a final one (the fold's latest changes)
        self.ids[index], self.final[index] = suffix, entry["status"] in FINAL_STATUSES
        self.top = max(self.top, index)
        return True


def _prefix_digest(handle: BinaryIO, end: int) -> Any:
    """The sha256 (a hashlib object, to extend) of the first ``end`` bytes at ``handle``, which
    must end a line; None when the file is shorter or they do not."""
    digest, size, last = hashlib.sha256(), 0, b""
    for block in prefix_blocks(handle, end):
        digest.update(block)
        size += len(block)
        last = bytes(block[-1:])
    if size != end or (end and last != b"\n"):
        return None
    return digest
