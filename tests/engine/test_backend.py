"""engine.backend, the EXTRAARENA_ENGINE switch (DESIGN 16), each case in a fresh interpreter.

The backend is resolved once per process (and the "not built" line printed once), so every
case runs in a real subprocess with its own environment; "not built" is a subprocess in which
``import engine_native`` fails (``sys.modules['engine_native'] = None``, what Python does for
a module it must not import), not a mock of the backend module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Resolves the backend twice (the second call must print nothing more), then prints the outcome.
PROBE = """
import json, sys
if {blocked}:
    sys.modules["engine_native"] = None  # import engine_native raises ImportError from here on
from engine import backend, EngineError
try:
    first = backend.native()
    second = backend.native()
    result = {{"native": getattr(first, "__name__", None), "same": first is second, "name": backend.name(),
               "imported": "engine_native" in sys.modules and sys.modules["engine_native"] is not None}}
except EngineError as exc:
    result = {{"error": type(exc).__name__, "message": str(exc)}}
print(json.dumps(result))
"""


def probe(setting: str | None, blocked: bool = False) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k != "EXTRAARENA_ENGINE"}
    if setting is not None:
        env["EXTRAARENA_ENGINE"] = setting
    done = subprocess.run([sys.executable, "-c", PROBE.format(blocked=blocked)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def native_built() -> bool:
    try:
        import engine_native  # noqa: F401
    except ImportError as exc:
        if os.environ.get("RLHF_REQUIRE_NATIVE") == "1":
            raise RuntimeError(f"RLHF_REQUIRE_NATIVE=1 (make test) but engine_native is not importable ({exc})") from None
        return False
    return True


def test_unset_means_native_when_built():
    if not native_built():
        pytest.skip("engine_native is not built; `make setup` builds it")
    result, stderr = probe(None)
    assert result == {"native": "engine_native", "same": True, "name": "native", "imported": True}
    assert stderr == ""


@pytest.mark.parametrize("setting", ["python", " Python "])
def test_python_means_no_native_core_and_it_is_not_even_imported(setting):
    result, stderr = probe(setting)
    assert result == {"native": None, "same": True, "name": "python", "imported": False}
    assert stderr == ""


def test_native_when_not_importable_is_a_clear_error():
    result, stderr = probe("native", blocked=True)
    assert result["error"] == "EngineError"
    message = result["message"]
    assert message.startswith("EXTRAARENA_ENGINE=native but the native engine core is not importable (")
    assert "`make setup` or `pip install` of the checkout builds it" in message and "or set EXTRAARENA_ENGINE=python" in message
    assert "Traceback" not in stderr


@pytest.mark.parametrize("setting", ["cuda", "c++", "pythn"])
def test_a_bad_value_is_a_clear_error(setting):
    result, _ = probe(setting)
    assert result == {"error": "EngineError", "message": f"EXTRAARENA_ENGINE={setting!r} is not a backend; use one "
                                                         "of python, native (or leave it unset: native when built, "
                                                         "else python)"}


def test_unset_and_not_built_falls_back_with_one_stderr_line_once():
    result, stderr = probe(None, blocked=True)
    assert result == {"native": None, "same": True, "name": "python", "imported": False}
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr  # native() twice and name() once: still one line
    assert lines[0].startswith("extraarena: the native engine core is not built (")
    assert "); using the Python engine, about 50x slower in the vector env (a C++17 compiler, then " in lines[0]
    assert "`pip install --force-reinstall --no-deps <checkout>` or `make setup`, builds it" in lines[0]


def test_the_native_package_imports_no_engine_and_refuses_use_until_engine_registers_it():
    """Issue 48: the dependency is one-way (engine -> engine_native). Importing the core loads no
    module of engine; before engine registers the card table every entry point says how, in a
    RuntimeError, instead of touching an empty table; engine.backend registers it once."""
    if not native_built():
        pytest.skip("engine_native is not built")
    script = """
import json, sys
import engine_native, engine_native.batch
loaded = sorted(m for m in sys.modules if m == "engine" or m.startswith(("engine.", "adapters", "extrarlhf")))
refusals = []
for call in (lambda: engine_native.new_battle(1), lambda: engine_native.State.from_dict({}),
             lambda: engine_native.play_random_battles([1]), lambda: engine_native.play_greedy_battles([1]),
             lambda: engine_native._core._new_battle("1", None, None, 0), lambda: engine_native.batch.BattleBatch(2),
             lambda: engine_native._core.set_card_pool([]), lambda: engine_native.greedy_act(object())):
    try:
        call()
        refusals.append(None)
    except RuntimeError as exc:
        refusals.append(str(exc))
from engine import backend
core = backend.load_native()
state = core.new_battle(5)
print(json.dumps({"loaded": loaded, "refusals": refusals, "same": core is engine_native,
                  "after": len(state.legal_actions()) > 0, "native_again": backend.load_native() is core}))
"""
    env = {k: v for k, v in os.environ.items() if k != "EXTRAARENA_ENGINE"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["loaded"] == []
    assert all(r is not None and "not registered with the Python engine" in r for r in result["refusals"]), result
    assert "engine.backend.load_native()" in result["refusals"][0]
    assert result["same"] and result["after"] and result["native_again"]
