"""The native engine core for tests: ``engine_native`` when it is built; when it is not, a skip
(or a failure under ``RLHF_REQUIRE_NATIVE=1``, as `make test` sets it)."""

from __future__ import annotations

import os
from types import ModuleType

import pytest


def native_or_none() -> ModuleType | None:
    """engine_native registered with the engine (engine.backend.load_native, whatever the backend
    switch says), or None when it is not built (an error under RLHF_REQUIRE_NATIVE=1)."""
    from engine import backend

    try:
        import engine_native.batch  # noqa: F401  (the batched API is part of every build)
    except ImportError as exc:
        if os.environ.get("RLHF_REQUIRE_NATIVE") == "1":
            raise RuntimeError(f"RLHF_REQUIRE_NATIVE=1 (make test) but engine_native is not importable ({exc}); "
                               "run `make setup` and read .venv/native-build.log") from None
        return None
    return backend.load_native()


def require_native() -> ModuleType:
    """engine_native, or a skip of the whole calling test module when it is not built."""
    module = native_or_none()
    if module is None:
        pytest.skip("engine_native is not built; `make setup` builds it (needs a C++ compiler)",
                    allow_module_level=True)
    return module
