"""Which core runs the hot paths: the native C++ core (``engine_native``) or this package.

``EXTRAARENA_ENGINE=python|native`` chooses (DESIGN 16); unset means native when it is built,
Python otherwise. The Python engine stays the reference and the API: ``engine.State`` is always
this package's class, and the native core takes over whole operations where it is built (the
greedy baseline, the search actor's rollouts, observations and features, battles stepped in
bulk), giving the same results bit for bit (tests/engine/test_native_*.py).

    from engine import backend
    core = backend.native()     # the engine_native module, or None on the Python engine
    backend.name()              # "native" or "python"
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

from .errors import EngineError

ENV_VAR = "EXTRAARENA_ENGINE"
CHOICES = ("python", "native")

_resolved: tuple[str, str | None] | None = None  # (requested setting, import error) of the last lookup
_module: ModuleType | None = None


def _requested() -> str:
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value and value not in CHOICES:
        raise EngineError(f"{ENV_VAR}={os.environ[ENV_VAR]!r} is not a backend; use one of {', '.join(CHOICES)} "
                          f"(or leave it unset: native when built, else python)")
    return value


def _load() -> tuple[ModuleType | None, str | None]:
    try:
        import engine_native
    except ImportError as exc:  # not built (no compiler at make setup) or a broken build
        return None, str(exc)
    return engine_native, None


def native() -> ModuleType | None:
    """The native core when it is the backend in use, else None.

    Unset: native when built, else None (and one line on stderr saying so, once). ``python``:
    None. ``native`` when it is not built: an EngineError saying how to build it."""
    global _resolved, _module
    requested = _requested()
    if _resolved is not None and _resolved[0] == requested:
        return _module
    module, error = (None, None) if requested == "python" else _load()
    if module is None and requested == "native":
        raise EngineError(f"{ENV_VAR}=native but the native engine core is not importable ({error}); "
                          f"`make setup` builds it (it needs a C++ compiler, see .venv/native-build.log), "
                          f"or set {ENV_VAR}=python")
    if module is None and requested == "" and (_resolved is None or _resolved[0] != ""):
        print(f"extraarena: the native engine core is not built ({error}); using the Python engine",
              file=sys.stderr)
    _resolved, _module = (requested, error), module
    return module


def name() -> str:
    """``native`` or ``python``: the backend :func:`native` resolves to."""
    return "python" if native() is None else "native"
