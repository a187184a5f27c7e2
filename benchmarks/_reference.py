"""A ``*_compare`` benchmark's child run: the script again with ``--child`` in a fresh process,
in this checkout or in a reference one (e.g. a worktree of a2150ce, with its own engine core on
``pythonpath``); the child prints its figures as its last line of JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CHILD_TIMEOUT_S = 1_800


def run_child(script: str, tree: Path, pythonpath: str, args: list[str], what: str,
              env: dict[str, str] | None = None) -> dict:
    """The child's JSON; SystemExit naming ``what`` and the tree, with its stderr's tail, if it fails."""
    full_env = {**os.environ, "PYTHONPATH": pythonpath, **(env or {})}
    # -P: not the script's folder first on sys.path (benchmarks/engine.py would shadow the engine)
    proc = subprocess.run([sys.executable, "-P", str(Path(script).resolve()), "--child", *args], cwd=tree,
                          env=full_env, text=True, capture_output=True, timeout=CHILD_TIMEOUT_S)
    if proc.returncode:
        raise SystemExit(f"{what} in {tree} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
