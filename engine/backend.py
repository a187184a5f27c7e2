"""Which core runs the battles: the native C++ core (``engine_native``) or this package.

``EXTRAARENA_ENGINE=python|native`` chooses (DESIGN 16); unset means native when it is built,
Python otherwise. The API is the same either way: on the native backend ``engine.new_battle``,
``engine.State.from_dict`` and ``clone`` return an ``engine.State`` whose every operation runs
in the core (engine.native_state), and the baselines, the search actor, the features and the
batched battles run there too, giving the same results bit for bit (tests/engine/test_native_*.py).
The pure-Python engine stays the readable reference (``engine.reference``) and the fallback.

The native package never imports ``engine``: :func:`load_native` imports it and makes the one
registration call (the card table, the player view's card texts, the error classes and the
reference functions whose words the core reuses).

    from engine import backend
    core = backend.native()     # the engine_native module, or None on the Python engine
    backend.name()              # "native" or "python"
    backend.load_native()       # engine_native registered, whatever the switch (tests, benchmarks)
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


_registered: ModuleType | None = None
_HOW_TO_BUILD = ("`make setup` or `pip install` of the checkout builds it (it needs a C++17 compiler; cmake comes "
                 "from PyPI if missing; see docs/rl.md)")


def _load() -> tuple[ModuleType | None, str | None]:
    global _registered
    if _registered is not None:
        return _registered, None
    try:
        import engine_native
    except ImportError as exc:  # not built (no compiler at install) or a broken build
        return None, str(exc)
    from .native_link import registration
    engine_native.register(registration())
    _registered = engine_native
    return engine_native, None


def require_native(what: str = "this") -> ModuleType:
    """``engine_native``, registered (whatever the switch says), or an EngineError saying that
    ``what`` needs it and how to build it."""
    module, error = _load()
    if module is None:
        raise EngineError(f"{what} needs the native engine core, which is not importable ({error}); {_HOW_TO_BUILD}")
    return module


def load_native() -> ModuleType | None:
    """``engine_native``, registered with this engine, whatever ``EXTRAARENA_ENGINE`` says; None
    when it is not built. For code that compares the two engines (tests, benchmarks)."""
    return _load()[0]


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
                          f"{_HOW_TO_BUILD}, or set {ENV_VAR}=python")
    if module is None and requested == "" and (_resolved is None or _resolved[0] != ""):
        print(f"extraarena: the native engine core is not built ({error}); using the Python engine, about 50x "
              f"slower in the vector env (a C++17 compiler, then `pip install --force-reinstall --no-deps "
              f"<checkout>` or `make setup`, builds it; see docs/rl.md)", file=sys.stderr)
    _resolved, _module = (requested, error), module
    return module


def name() -> str:
    """``native`` or ``python``: the backend :func:`native` resolves to."""
    return "python" if native() is None else "native"
