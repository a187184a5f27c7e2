"""``run_doctor``: is this checkout ready for an agent? Each check says ok, fail (with a one-line
fix) or info.

It checks the server the way a client starts it -- the pinned entry of
:func:`clients.pinned_entry`, or the entry a client's installed config holds -- with that
interpreter, args, cwd and env: the interpreter and its version, the imports the server needs
(in that interpreter), ``initialize`` + ``tools/list`` over stdio, the session, dataset and
checkpoint dirs the server would write, and the production gate (variable names only).
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ..production.gate import VARIABLES, gate_status
from .clients import REPO, ServerEntry, SetupError, client, entry_from_config, parse_config, pinned_entry

IMPORTS = ("numpy", "onnxruntime", "asyncpg", "pyarrow", "dagster", "mcp")
MIN_PYTHON = (3, 11)
EXPECTED_TOOL = "start_battle"  # a server that lists tools but not this one is not ExtraRLHF's
# The variables an MCP SDK stdio client passes to its child besides the config's env.
CLIENT_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
SETUP_FIX = f"run `make setup` in {REPO}, then `python -m extrarlhf skills install --target <client>` again"

_PROBE = """
import importlib, importlib.metadata as md, json, sys
out = {"python": sys.version.split()[0], "executable": sys.executable, "imports": {}}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        out["imports"][name] = {"ok": True, "version": md.version(name)}
    except Exception as exc:
        out["imports"][name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
print(json.dumps(out))
"""


def _check(name: str, status: str, detail: str, fix: str | None = None) -> dict[str, Any]:
    return {"check": name, "status": status, "detail": detail, "fix": fix}


def _child_env(entry: ServerEntry) -> dict[str, str]:
    return {**{k: os.environ[k] for k in CLIENT_ENV if k in os.environ}, **entry.env}


def _interpreter(entry: ServerEntry, timeout: float) -> tuple[list[dict[str, Any]], bool]:
    command = Path(entry.command)
    if not command.exists() or not os.access(command, os.X_OK):
        return [_check("interpreter", "fail", f"{entry.command} does not exist or is not executable", SETUP_FIX)], False
    try:
        done = subprocess.run([entry.command, "-c", _PROBE, *IMPORTS], cwd=entry.cwd, env=_child_env(entry),
                              capture_output=True, text=True, timeout=timeout)
        probe = json.loads(done.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return [_check("interpreter", "fail", f"{entry.command} could not run a probe ({type(exc).__name__})",
                       SETUP_FIX)], False
    version = tuple(int(p) for p in probe["python"].split(".")[:2])
    checks = [_check("interpreter", "ok" if version >= MIN_PYTHON else "fail",
                     f"{entry.command} (Python {probe['python']})",
                     None if version >= MIN_PYTHON else f"ExtraRLHF needs Python >= 3.11: `make clean setup "
                                                        f"PYTHON=/path/to/python3.11+` in {REPO}")]
    for name, result in probe["imports"].items():
        if result["ok"]:
            checks.append(_check(f"import {name}", "ok", result["version"]))
        else:
            checks.append(_check(f"import {name}", "fail", result["error"], SETUP_FIX))
    return checks, checks[0]["status"] == "ok"


def _rpc(proc: subprocess.Popen, lines: "queue.Queue[str | None]", message: dict[str, Any],
         deadline: float) -> dict[str, Any] | None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    if "id" not in message:
        return None
    while True:
        line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        if line is None:
            raise EOFError("the server closed stdout")
        reply = json.loads(line)
        if reply.get("id") == message["id"]:
            return reply


def list_tools_over_stdio(entry: ServerEntry, timeout: float = 60.0) -> list[str]:
    """Start the server exactly as ``entry`` says, run ``initialize`` and ``tools/list``, stop it;
    returns the tool names. Raises ``OSError``, ``EOFError``, ``queue.Empty`` (timeout) or
    ``ValueError`` (not JSON-RPC) on the way."""
    with tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen([entry.command, *entry.args], cwd=entry.cwd, env=_child_env(entry),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
        lines: "queue.Queue[str | None]" = queue.Queue()

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        try:
            _rpc(proc, lines, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "extrarlhf-doctor", "version": "1"}}}, deadline)
            _rpc(proc, lines, {"jsonrpc": "2.0", "method": "notifications/initialized"}, deadline)
            reply = _rpc(proc, lines, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, deadline)
            if not reply or "result" not in reply:
                raise ValueError(f"tools/list answered {json.dumps(reply)[:200]}")
            return [tool["name"] for tool in reply["result"]["tools"]]
        except (EOFError, ValueError, queue.Empty, OSError) as exc:
            stderr.seek(0)
            tail = [line for line in stderr.read().splitlines() if line.strip()][-1:]
            raise type(exc)(f"{exc or type(exc).__name__}{'; stderr: ' + tail[0][:300] if tail else ''}") from None
        finally:
            if proc.stdin:
                proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _server(entry: ServerEntry, timeout: float) -> dict[str, Any]:
    started = time.monotonic()
    try:
        tools = list_tools_over_stdio(entry, timeout)
    except queue.Empty:
        return _check("mcp server", "fail", f"no tools/list answer within {timeout:g} s",
                      f"run `{shlex.join([entry.command, *entry.args])}` in {entry.cwd or '.'} and read its stderr")
    except (OSError, EOFError, ValueError) as exc:
        return _check("mcp server", "fail", f"did not answer tools/list: {exc}",
                      f"run `{shlex.join([entry.command, *entry.args])}` in {entry.cwd or '.'} and read its stderr")
    if EXPECTED_TOOL not in tools:
        return _check("mcp server", "fail", f"answered tools/list without {EXPECTED_TOOL} ({len(tools)} tools): "
                                            f"not the ExtraRLHF server", SETUP_FIX)
    return _check("mcp server", "ok", f"tools/list answered {len(tools)} tools over stdio in "
                                      f"{time.monotonic() - started:.1f} s")


def _writable(name: str, path: Path) -> dict[str, Any]:
    fix = f"make {path} a writable directory, or pass another --{name}-dir in the MCP config"
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        return _check(f"{name} dir", "fail", f"{path}: {probe} is not a directory", fix)
    if probe != path:
        if os.access(probe, os.W_OK | os.X_OK):
            return _check(f"{name} dir", "ok", f"{path} (created on first use)")
        return _check(f"{name} dir", "fail", f"{path} is missing and {probe} is not writable", fix)
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".doctor-"):
            pass
    except OSError as exc:
        return _check(f"{name} dir", "fail", f"{path} is not writable ({exc.strerror})", fix)
    return _check(f"{name} dir", "ok", f"{path} (writable)")


def _gate(entry: ServerEntry) -> dict[str, Any]:
    """The gate as the server process would see it: the client passes only the config's env."""
    status = gate_status(_child_env(entry))
    passed = [name for name in VARIABLES if name in entry.env]
    if status["open"]:
        return _check("production gate", "info", "open in the server's environment (values not shown)")
    if not passed:
        return _check("production gate", "info", "closed (off by default; the config passes none of "
                                                  f"{', '.join(VARIABLES)}): local data only")
    problems = [f"{n} {v['problem']}" for n, v in status["variables"].items() if v["problem"]]
    return _check("production gate", "fail", "partly configured: " + "; ".join(problems),
                  "set all four variables in the server's env (never as tool arguments), or none of them")


def run_doctor(target: str | None = None, *, user: bool = False, project: str | os.PathLike[str] = ".",
               home: str | os.PathLike[str] | None = None, timeout: float = 60.0) -> dict[str, Any]:
    """Every check with its status; ``ok`` is false when one failed. ``target`` checks the entry
    that client's installed config holds, else the pinned entry of this checkout."""
    if not timeout > 0:
        raise SetupError(f"--timeout must be a positive number of seconds, got {timeout!r}", "invalid_argument")
    checks: list[dict[str, Any]] = []
    if target is None:
        source = "the pinned entry of this checkout (what `skills install` writes)"
        try:
            entry = pinned_entry()
        except SetupError as exc:
            checks.append(_check("interpreter", "fail", str(exc), SETUP_FIX))
            return {"ok": False, "source": source, "checks": checks}
    else:
        c = client(target)
        path = c.config_path(Path(project).absolute(), Path(home if home is not None else Path.home()), user)
        source = f"{path} ({c.label})"
        try:
            found = entry_from_config(target, parse_config(path, c.fmt)) if path.exists() else None
        except (SetupError, KeyError, TypeError, IndexError, AttributeError) as exc:
            found, problem = None, str(exc)
        else:
            problem = f"{path} does not exist" if not path.exists() else f"{path} has no extra-rlhf server"
        fix = f"python -m extrarlhf skills install --target {target}" + (" --user" if user else "")
        checks.append(_check("mcp config", "ok" if found else "fail", source if found else problem,
                             None if found else f"run `{fix}`"))
        if found is None:
            return {"ok": False, "source": source, "checks": checks}
        entry = found
    interpreter_checks, runs = _interpreter(entry, timeout)
    checks.extend(interpreter_checks)
    if runs:
        checks.append(_server(entry, timeout))
    checks.extend(_writable(name, path) for name, path in entry.dirs().items())
    checks.append(_gate(entry))
    return {"ok": all(c["status"] != "fail" for c in checks), "source": source,
            "server": {"command": entry.command, "args": entry.args, "cwd": entry.cwd, "env_names": sorted(entry.env)},
            "checks": checks}
