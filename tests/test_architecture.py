"""The architecture holds (issue 25): import-linter's contracts in pyproject.toml are kept --
engine <- adapters <- extrarlhf <- {mcp_server, extrarlhf_assets, web}, the core never imports
dagster, mcp or the arena's web stack, extrarlhf's concerns import only the ones below them, and
no circle joins the modules of extrarlhf's top level, of mcp_server or of web -- and a planted
circle or upward import breaks them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "adapters", "extrarlhf", "mcp_server", "extrarlhf_assets", "web")
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_the_contracts_are_kept():
    done = _lint(REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Contracts: 4 kept, 0 broken." in done.stdout


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize("module, planted, broken", [
    ("extrarlhf/runtime/series.py", "from extrarlhf.policies import benchmarking",
     ["extrarlhf.runtime is not allowed to import extrarlhf.policies", "- .runtime -> .policies"]),
    ("mcp_server/tools_training.py", "from mcp_server import server",
     ["No cycles are allowed in mcp_server"]),
    ("extrarlhf/core/fileio.py", "import dagster",
     ["the core never imports dagster, mcp or the web stack BROKEN"]),
    ("extrarlhf/runtime/live.py", "import web.arena",
     ["extrarlhf is not allowed to import web"]),
    ("web/views.py", "import mcp_server.server",
     ["web is not allowed to import mcp_server"]),
    ("extrarlhf/core/fileio.py", "import starlette",
     ["the core never imports dagster, mcp or the web stack BROKEN"]),
], ids=["runtime-imports-policies", "tool-module-imports-the-server", "core-imports-dagster", "core-imports-web",
        "web-imports-mcp-server", "core-imports-starlette"])
def test_a_planted_circle_or_forbidden_import_breaks_them(copy: Path, module: str, planted: str, broken: list[str]):
    with open(copy / module, "a", encoding="utf-8") as fh:
        fh.write(f"\n{planted}  # planted by the test\n")
    done = _lint(copy)
    assert done.returncode != 0
    for text in broken:
        assert text in done.stdout, done.stdout[-3000:]
