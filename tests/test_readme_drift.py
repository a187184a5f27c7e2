"""The README names every MCP tool and every CLI command that exists (drift fails here)."""

import asyncio
import re
from pathlib import Path

from extrarlhf.cli import build_parser
from mcp_server import build_server

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_every_mcp_tool_is_named_in_the_readme(tmp_path):
    server = build_server(tmp_path / "s", tmp_path / "d", tmp_path / "c")
    tools = {t.name for t in asyncio.run(server.list_tools())} - {"ping"}
    assert len(tools) > 30
    missing = sorted(t for t in tools if f"`{t}`" not in README)
    assert missing == [], f"MCP tools missing from README.md: {missing}"


def test_every_cli_command_is_named_in_the_readme():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    commands = set(sub.choices)
    missing = sorted(c for c in commands if not re.search(rf"extrarlhf {c}\b", README))
    assert missing == [], f"CLI commands missing from README.md: {missing}"
