"""The three files of a V5 trace on disk, plain or compact (DESIGN 6.1).

A trace is ``v5/meta.jsonl``, ``v5/turns.jsonl`` and ``v5/actions.jsonl`` (DESIGN 6). The
*compact* form stores ``turns`` and ``actions`` as zstd frames of exactly those bytes
(``turns.jsonl.zst``, ``actions.jsonl.zst``: level 5, with the frame's content size and its
xxhash checksum); ``meta.jsonl`` (one short record, read by every listing) stays plain. What a
reader gets is the same bytes either way: the catalog's sha256 digests are of the plain bytes,
so checks, repairs, replays and datasets are the same for both forms, and ``zstd -d`` or
``zstdcat`` gives back the plain file. Series write the compact form by default
(``run_series(..., compact_traces=False)`` writes plain files); one-by-one battles (MCP, the
arena) stay plain. :func:`expand_battle` and :func:`compact_battle` convert
a battle's folder in place, one file at a time by an atomic rename (a reader sees one whole
form of each file; a killed conversion leaves both forms of one file, identical, and the
plain one is read).

A battle written compact also gets ``compact_sha256`` on its catalog line
(:func:`compact_digest`: a sha256 over the sha256 of each stored compact file). It spares a
reader the hashing of the plain bytes (18x more of them): stored bytes that match it decompress
to exactly the plain bytes written, whose digests are ``files``. It is a shortcut, never the
authority: a battle expanded or compacted again since (or a line without it) is checked against
``files`` as before, and ``check`` always does that.

Why zstd of the same bytes, and why the observations stay in the trace: docs/data-format.md
("Compact traces") has the measurements.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
from pathlib import Path

import zstandard

from ..core.fileio import fsync_dir

TRACE_FILES = ("meta.jsonl", "turns.jsonl", "actions.jsonl")
COMPACT_FILES = ("turns.jsonl", "actions.jsonl")  # meta.jsonl stays plain
SUFFIX = ".zst"
LEVEL = 5  # 11% smaller than level 3 on teacher traces for +0.6 ms a battle (docs/data-format.md 1.1)
# A decompressed trace file larger than this is refused, from the frames' declared sizes and
# before decompressing (a damaged or hostile frame cannot make a reader allocate without
# bound); the longest battles write about 2 MB.
MAX_PLAIN_BYTES = 256 << 20

__all__ = ["TRACE_FILES", "COMPACT_FILES", "SUFFIX", "CompactFileError", "stored_name", "encode", "find", "read",
           "stored_files", "is_compact", "expand_battle", "compact_battle", "compact_digest", "read_compact",
           "read_from"]


class CompactFileError(Exception):
    """A compact trace file that does not decompress (damaged frame, bad checksum, too large)."""


def stored_name(name: str, compact: bool) -> str:
    """The file name ``name`` (a logical trace file) is stored under."""
    return name + SUFFIX if compact and name in COMPACT_FILES else name


def _compressor() -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(level=LEVEL, write_checksum=True, write_content_size=True)


def encode(files: dict[str, bytes], compact: bool) -> dict[str, bytes]:
    """The bytes to store per stored file name, for the plain files ``files`` (logical names)."""
    if not compact:
        return dict(files)
    compressor = _compressor()
    return {stored_name(name, True): compressor.compress(data) if name in COMPACT_FILES else data
            for name, data in files.items()}


_local = threading.local()


def _decompressor() -> zstandard.ZstdDecompressor:
    """This thread's decompressor (one context reused: a decompressor is not thread-safe)."""
    d = getattr(_local, "decompressor", None)
    if d is None:
        d = _local.decompressor = zstandard.ZstdDecompressor()
    return d


def find(v5: Path, name: str) -> Path | None:
    """The stored file of logical trace file ``name`` in ``v5`` (the plain one when both exist:
    a conversion was interrupted after writing it), None when neither exists."""
    plain = v5 / name
    if plain.is_file():
        return plain
    if name in COMPACT_FILES:
        packed = v5 / (name + SUFFIX)
        if packed.is_file():
            return packed
    return None


def decode(path: Path, data: bytes) -> bytes:
    """The plain bytes of a stored file's contents ``data`` (decompressed when ``path`` is compact)."""
    if not path.name.endswith(SUFFIX):
        return data
    if not data:
        raise CompactFileError(f"{path} is empty: not a zstd frame (the file is damaged)")
    try:  # the usual file, one frame that declares its size: one call, into one buffer of that size
        if 0 <= zstandard.frame_content_size(data) <= MAX_PLAIN_BYTES:
            return _decompressor().decompress(data, allow_extra_data=False)
    except zstandard.ZstdError:
        pass  # several frames, or damage: the loop below reads them, or says what is wrong
    out, rest, total = [], data, 0
    try:
        while rest:  # this project writes one frame; zstdcat reads concatenated ones, and so does this
            size = zstandard.frame_content_size(rest)
            if size < 0:
                raise CompactFileError(f"{path} holds a zstd frame without a declared size; rewrite it with "
                                       f"`extrarlhf sessions compact` (or zstd on a file, which declares it)")
            total += size
            if total > MAX_PLAIN_BYTES:  # refused before anything is allocated
                raise CompactFileError(f"{path} decompresses to more than {MAX_PLAIN_BYTES >> 20} MiB: not a trace "
                                       f"file")
            frame = _decompressor().decompressobj()
            out.append(frame.decompress(rest))
            if not frame.eof:
                raise CompactFileError(f"{path} is truncated: its last zstd frame is incomplete (the file is "
                                       f"damaged)")
            rest = frame.unused_data
    except zstandard.ZstdError as exc:
        raise CompactFileError(f"{path} does not decompress ({exc}): the file is damaged") from None
    return b"".join(out)


def read(v5: Path, name: str) -> bytes:
    """The plain bytes of logical trace file ``name`` in ``v5``; FileNotFoundError when it is
    stored in neither form, :class:`CompactFileError` when its compact form is damaged."""
    for _ in range(2):  # a conversion may remove the form found between finding and reading it
        path = find(v5, name)
        if path is None:
            break
        try:
            return decode(path, path.read_bytes())
        except FileNotFoundError:
            continue
    raise FileNotFoundError(str(v5 / name))


def compact_digest(stored: dict[str, bytes]) -> str:
    """The catalog's ``compact_sha256`` of a battle's stored compact files (``stored``: stored
    name -> bytes): the sha256 of the sha256 digests of ``turns.jsonl.zst`` and
    ``actions.jsonl.zst``, in that order."""
    return hashlib.sha256(b"".join(hashlib.sha256(stored[name + SUFFIX]).digest()
                                   for name in COMPACT_FILES)).hexdigest()


def read_compact(v5: Path) -> dict[str, bytes] | None:
    """The stored bytes of ``turns`` and ``actions`` (stored name -> bytes) when both are
    stored compact only; None when either has a plain copy or is missing (read it by name)."""
    out, folder = {}, str(v5)
    for name in COMPACT_FILES:
        if os.path.lexists(os.path.join(folder, name)):
            return None
        try:
            with open(os.path.join(folder, name + SUFFIX), "rb") as handle:
                out[name + SUFFIX] = handle.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
    return out


def read_from(v5: Path, name: str, stored: dict[str, bytes] | None) -> bytes:
    """:func:`read`, decoding the bytes ``stored`` (:func:`read_compact`'s) holds for ``name``
    instead of reading its file again."""
    packed = None if stored is None else stored.get(name + SUFFIX)
    return read(v5, name) if packed is None else decode(v5 / (name + SUFFIX), packed)


def stored_files(v5: Path) -> dict[str, Path]:
    """Logical name -> stored path of the trace files present in ``v5``."""
    return {name: path for name in TRACE_FILES if (path := find(v5, name)) is not None}


def is_compact(v5: Path) -> bool:
    """True when any of the battle's files is stored compact (and no plain copy shadows it)."""
    return any(p.name.endswith(SUFFIX) for p in stored_files(v5).values())


def _replace(v5: Path, name: str, data: bytes, other: Path, fsync: bool) -> None:
    """Write ``data`` as ``v5/name`` (temp file, rename), then remove ``other``."""
    tmp = v5 / f".tmp-{name}-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, v5 / name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        fsync_dir(v5)
    other.unlink()
    if fsync:
        fsync_dir(v5)


def expand_battle(v5: Path, fsync: bool = True) -> int:
    """Rewrite a battle's compact files as plain ones; returns how many were expanded."""
    done = 0
    for name in COMPACT_FILES:
        path = find(v5, name)
        if path is not None and path.name.endswith(SUFFIX):
            _replace(v5, name, decode(path, path.read_bytes()), path, fsync)
            done += 1
    return done


def compact_battle(v5: Path, fsync: bool = True) -> int:
    """Rewrite a battle's plain ``turns``/``actions`` as compact ones; returns how many."""
    done = 0
    compressor = _compressor()
    for name in COMPACT_FILES:
        path = find(v5, name)
        if path is not None and not path.name.endswith(SUFFIX):
            _replace(v5, name + SUFFIX, compressor.compress(path.read_bytes()), path, fsync)
            done += 1
    return done
