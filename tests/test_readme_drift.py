"""The documentation (README.md and the pages under docs/) names every MCP tool and every CLI
command that exists (drift fails here)."""

import asyncio
import re
from pathlib import Path

from extrarlhf.cli import build_parser
from mcp_server import build_server

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DOCS = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)


def test_every_mcp_tool_is_named_in_the_docs(tmp_path):
    server = build_server(tmp_path / "s", tmp_path / "d", tmp_path / "c")
    tools = {t.name for t in asyncio.run(server.list_tools())} - {"ping"}
    assert len(tools) > 30
    missing = sorted(t for t in tools if f"`{t}`" not in DOCS)
    assert missing == [], f"MCP tools missing from README.md and docs/*.md: {missing}"


def test_every_cli_command_is_named_in_the_docs():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    commands = set(sub.choices)
    missing = sorted(c for c in commands if not re.search(rf"extrarlhf {c}\b", DOCS))
    assert missing == [], f"CLI commands missing from README.md and docs/*.md: {missing}"
