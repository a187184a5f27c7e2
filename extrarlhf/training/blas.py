"""Run numpy's BLAS on one thread while training.

Why: OpenBLAS splits a matrix product differently with another thread count, so float32
results (and the weights hash) changed with the number of threads; and on a busy machine
its spinning worker threads made an epoch up to ten times slower. One thread gives the same
bits wherever the run happens (same numpy build) and steady timings.

numpy wheels bundle OpenBLAS (``numpy.libs/libscipy_openblas*.so``); its thread count is
set through ctypes. When the library or its symbols cannot be found (another BLAS), nothing
is changed and :func:`single_blas_thread` reports ``None``: results are then only
reproducible with the same thread count (set ``OPENBLAS_NUM_THREADS=1`` / ``OMP_NUM_THREADS=1``).
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import threading
from collections.abc import Iterator

import numpy as np

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads_64_", "openblas_set_num_threads64_",
            "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads_64_", "openblas_get_num_threads64_",
            "openblas_get_num_threads")
_LOCK = threading.RLock()  # trainings in one process take turns (they all want one thread)
_API: tuple | None | bool = False  # False: not looked up yet; None: unavailable


def _find() -> tuple | None:
    base = os.path.dirname(os.path.dirname(np.__file__))
    candidates = sorted(glob.glob(os.path.join(base, "numpy.libs", "*openblas*.so*"))
                        + glob.glob(os.path.join(os.path.dirname(np.__file__), ".dylibs", "*openblas*")))
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        setter = next((getattr(lib, n) for n in _SETTERS if hasattr(lib, n)), None)
        getter = next((getattr(lib, n) for n in _GETTERS if hasattr(lib, n)), None)
        if setter is not None and getter is not None:
            setter.argtypes, setter.restype = [ctypes.c_int], None
            getter.argtypes, getter.restype = [], ctypes.c_int
            return setter, getter
    return None


def _api() -> tuple | None:
    global _API
    if _API is False:
        _API = _find()
    return _API  # type: ignore[return-value]


@contextlib.contextmanager
def single_blas_thread() -> Iterator[int | None]:
    """Hold numpy's OpenBLAS at one thread for the block (restored after); yields the thread
    count in force (1) or None when the BLAS could not be controlled."""
    api = _api()
    if api is None:
        yield None
        return
    setter, getter = api
    with _LOCK:
        before = int(getter())
        setter(1)
        try:
            yield int(getter())
        finally:
            setter(before)
