"""Shared helpers of the MCP server tests: envelope-checked tool calls and stdio server params."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import jsonschema
from mcp import Client, StdioServerParameters

from extrarlhf.runtime import trace_files
from mcp_server import ENVELOPE_SCHEMA

REPO = Path(__file__).resolve().parent.parent


def stdio_params(sessions_dir: Path, *extra: str) -> StdioServerParameters:
    """``python -m mcp_server`` as a real subprocess (the child gets only the env we pass)."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"), "PYTHONPATH": str(REPO)}
    return StdioServerParameters(command=sys.executable, args=["-m", "mcp_server", "--sessions-dir", str(sessions_dir),
                                                               *extra], env=env, cwd=str(REPO))


class Checked:
    """Calls tools and checks every result's wire shape, errors included:

    content[0] is the envelope as JSON text, structuredContent the same object, isError
    matches ``ok``, and the envelope validates against the tool's declared outputSchema.
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self.schemas: dict[str, Any] | None = None
        self.validated = {"ok": 0, "error": 0}

    async def envelope(self, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        if self.schemas is None:
            listed = await self.client.list_tools()
            self.schemas = {t.name: t.output_schema for t in listed.tools}
        result = await self.client.call_tool(name, arguments if arguments is not None else {}, **kw)
        envelope = result.structured_content
        assert envelope is not None, f"{name}: no structuredContent"
        assert len(result.content) >= 1 and result.content[0].type == "text"
        assert json.loads(result.content[0].text) == envelope
        assert envelope["ok"] is (not result.is_error)
        assert "Error executing tool" not in result.content[0].text
        schema = self.schemas.get(name) or ENVELOPE_SCHEMA  # unknown tools answer with the envelope too
        jsonschema.Draft202012Validator(schema).validate(envelope)
        self.validated["ok" if envelope["ok"] else "error"] += 1
        return envelope

    async def ok(self, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        envelope = await self.envelope(name, arguments, **kw)
        assert envelope["ok"], f"{name} failed: {envelope['error']}"
        assert envelope["error"] is None and isinstance(envelope["result"], dict)
        return envelope["result"]

    async def err(self, name: str, arguments: dict[str, Any] | None = None, code: str | None = None,
                  **kw: Any) -> dict[str, Any]:
        envelope = await self.envelope(name, arguments, **kw)
        assert not envelope["ok"], f"{name} unexpectedly succeeded: {envelope['result']}"
        assert envelope["result"] is None and envelope["error"]["message"]
        if code is not None:
            assert envelope["error"]["code"] == code, envelope["error"]
        return envelope["error"]


async def play_to_the_end(checked: Checked, match_id: str, max_moves: int = 2000,
                          rationale: str = "move {i}: {description}") -> tuple[dict[str, Any], list[str]]:
    """Play player 1 (the last legal action each time, End turn when alone) until the battle is over.

    Returns the last submit result and the rationales sent, in order."""
    rationales: list[str] = []
    state = await checked.ok("get_state", {"match_id": match_id})
    for i in range(max_moves):
        if state["done"]:
            return state, rationales
        listed = await checked.ok("legal_actions", {"match_id": match_id})
        assert listed["your_turn"] and listed["actions"] == state["legal_actions"]
        choice = listed["actions"][-1]
        text = rationale.format(i=i, description=choice["description"])
        state = await checked.ok("submit_action", {"match_id": match_id, "action_id": choice["action_id"],
                                                   "rationale": text})
        assert state["board"] and "your_move" not in state  # your own move is not echoed
        rationales.append(text)
    raise AssertionError(f"battle not over after {max_moves} moves")


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file; a compact trace file (``.jsonl.zst``) is decompressed."""
    path = Path(path)
    text = trace_files.decode(path, path.read_bytes()).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]
