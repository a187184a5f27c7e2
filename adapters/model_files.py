"""Reading a model file safely: every read of an ``.onnx`` file (loading it to play, hashing it
for the registry, parsing it for its signature or weights hash) goes through
:func:`open_model_file`.

A model file is opened without following a symbolic link in its last component
(``O_NOFOLLOW``) and without blocking (``O_NONBLOCK``, so a FIFO does not wait for a writer),
then ``fstat`` on the opened descriptor must show a regular file no larger than the size cap,
before a byte is read; reads stop one byte past the cap, so a file that grows meanwhile is
refused too. A registered model replaced by a link to ``/dev/zero``, by a FIFO or by a huge
file is therefore refused at once with :class:`ModelFileError`, never read forever. Only the
source file of a registration may be reached through a link (``follow_symlinks=True``: it is
the user's own path), and it must still be a regular file under the cap.

The cap is ``RLHF_MAX_MODEL_BYTES`` (bytes), else :data:`DEFAULT_MAX_MODEL_BYTES` (256 MiB);
a checkpoint registry may set its own for registration.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from typing import BinaryIO, Iterator

from .decision import AdapterError

DEFAULT_MAX_MODEL_BYTES = 256 * 1024 * 1024
MAX_MODEL_BYTES_ENV = "RLHF_MAX_MODEL_BYTES"
CHUNK = 1024 * 1024

_TYPES = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"))


class ModelFileError(AdapterError):
    """A model file that is not read: missing (``not_found``), a symbolic link, a FIFO, a
    device or a folder (``unsafe_model_file``), or above the size cap (``model_too_large``)."""

    code = "unsafe_model_file"


def size_text(n: int) -> str:
    """``1.0 GiB (1073741824 bytes)``."""
    for unit, size in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.1f} {unit} ({n} bytes)"
    return f"{n} bytes"


def max_model_bytes() -> int:
    """The size cap of a model file: ``RLHF_MAX_MODEL_BYTES``, else 256 MiB; a value that is not
    a positive number of bytes is refused (``invalid_argument``)."""
    raw = os.environ.get(MAX_MODEL_BYTES_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_MAX_MODEL_BYTES
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise AdapterError(f"{MAX_MODEL_BYTES_ENV}={raw!r} is not a positive number of bytes (e.g. "
                           f"{MAX_MODEL_BYTES_ENV}={2 * DEFAULT_MAX_MODEL_BYTES} for 512 MiB)", "invalid_argument")
    return value


def _kind_of(mode: int) -> str:
    return next((what for test, what in _TYPES if test(mode)), "not a regular file")


@contextlib.contextmanager
def open_model_file(path: str | os.PathLike[str], *, follow_symlinks: bool = False,
                    max_bytes: int | None = None) -> Iterator[tuple[BinaryIO, int]]:
    """``(binary file, size)`` of the regular model file at ``path`` (see the module docstring);
    :class:`ModelFileError` otherwise, before anything is read. ``max_bytes``: the cap (default
    :func:`max_model_bytes`); callers read at most ``max_bytes + 1`` bytes."""
    p = os.fspath(path)
    cap = max_model_bytes() if max_bytes is None else max_bytes
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(p, flags)
    except (FileNotFoundError, NotADirectoryError):
        raise ModelFileError(f"model file {p} does not exist", "not_found") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            target = os.path.realpath(p)
            raise ModelFileError(f"model file {p} is a symbolic link (to {target}); model files are read without "
                                 f"following links: put the file itself there (register the model again)") from None
        raise ModelFileError(f"cannot open model file {p}: {os.strerror(exc.errno or 0)}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ModelFileError(f"model file {p} is {_kind_of(st.st_mode)}, not a regular file; it is not read: put "
                                 f"the model file itself there (register the model again)")
        if st.st_size > cap:
            raise ModelFileError(f"model file {p} is {size_text(st.st_size)}, above the model size cap of "
                                 f"{size_text(cap)}; it is not read (raise the cap with {MAX_MODEL_BYTES_ENV}=<bytes> "
                                 f"if the model is really this large)", "model_too_large")
        os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        yield handle, st.st_size


def _grew(path: str | os.PathLike[str], cap: int) -> ModelFileError:
    return ModelFileError(f"model file {os.fspath(path)} grew past the model size cap of {size_text(cap)} while it was "
                          f"read; it is not used", "model_too_large")


def read_model_file(path: str | os.PathLike[str], *, max_bytes: int | None = None) -> bytes:
    """The bytes of the model file at ``path`` (never following a link; see :func:`open_model_file`)."""
    cap = max_model_bytes() if max_bytes is None else max_bytes
    with open_model_file(path, max_bytes=cap) as (handle, _):
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise _grew(path, cap)
    return data


def iter_model_chunks(path: str | os.PathLike[str], *, follow_symlinks: bool = False,
                      max_bytes: int | None = None) -> Iterator[bytes]:
    """The model file's bytes in chunks of :data:`CHUNK` (memory stays flat whatever its size)."""
    cap = max_model_bytes() if max_bytes is None else max_bytes
    read = 0
    with open_model_file(path, follow_symlinks=follow_symlinks, max_bytes=cap) as (handle, _):
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            read += len(chunk)
            if read > cap:
                raise _grew(path, cap)
            yield chunk


def sha256_model_file(path: str | os.PathLike[str], *, max_bytes: int | None = None) -> str:
    """sha256 (hex) of the model file at ``path``, read in chunks."""
    digest = hashlib.sha256()
    for chunk in iter_model_chunks(path, max_bytes=max_bytes):
        digest.update(chunk)
    return digest.hexdigest()
