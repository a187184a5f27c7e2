"""A third-party client: the MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``, installed
by ``make tools`` into ``.tools/``) lists the tools and calls some against ``python -m mcp_server``.

The Inspector's TypeScript SDK validates structured content against the declared
outputSchema, so the error call checks that error envelopes satisfy it too.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.mcp_helpers import REPO, stdio_params

INSPECTOR = REPO / ".tools" / "node_modules" / ".bin" / "mcp-inspector"

pytestmark = pytest.mark.skipif(
    not INSPECTOR.exists() or shutil.which("node") is None,
    reason=f"MCP Inspector CLI not installed at {INSPECTOR} (run `make tools`; needs node/npm)")


def inspector(sessions, *method_args: str) -> dict:
    command = [str(INSPECTOR), "--cli", sys.executable, "-m", "mcp_server", "--sessions-dir", str(sessions),
               *method_args]
    done = subprocess.run(command, cwd=REPO, env=stdio_params(sessions).env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, f"inspector failed ({done.returncode}): {done.stderr}\n{done.stdout}"
    return json.loads(done.stdout)


def test_inspector_lists_the_tools_with_schemas(tmp_path):
    listed = inspector(tmp_path / "sessions", "--method", "tools/list")
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert {"start_battle", "get_state", "legal_actions", "submit_action", "advance_bot", "finish_battle",
            "abandon_battle", "list_matches", "run_series", "series_status", "claim_codename",
            "release_codename", "list_codenames", "list_sessions", "inspect_session", "replay_battle",
            "list_models", "register_checkpoint", "register_custom_model", "inspect_model"} <= set(tools)
    for tool in tools.values():
        assert tool["description"] and tool["inputSchema"]["type"] == "object"
        assert "outputSchema" not in tool  # one envelope for every tool, described in the server instructions
    assert tools["submit_action"]["inputSchema"]["required"] == ["match_id", "action_id"]


def test_inspector_calls_a_tool_and_accepts_an_error_envelope(tmp_path):
    sessions = tmp_path / "sessions"
    result = inspector(sessions, "--method", "tools/call", "--tool-name", "list_sessions")
    assert result["isError"] is False
    assert result["structuredContent"] == {"ok": True, "error": None,
                                           "result": {"sessions_dir": str(sessions), "groups": [], "count": 0,
                                                      "total": 0, "returned": 0, "limit": 50, "next_cursor": None}}
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]

    failed = inspector(sessions, "--method", "tools/call", "--tool-name", "get_state", "--tool-arg", "match_id=nope")
    assert failed["isError"] is True
    assert failed["structuredContent"]["ok"] is False and failed["structuredContent"]["result"] is None
    assert failed["structuredContent"]["error"]["code"] == "unknown_match"


def test_the_shipped_client_config_starts_the_server(tmp_path):
    """skills/extra-rlhf/mcp/extra-rlhf.mcp.json, with <REPO_ROOT> filled in as its comment says,
    starts this checkout's server (only the sessions dir is redirected to a temp dir)."""
    template = (REPO / "skills" / "extra-rlhf" / "mcp" / "extra-rlhf.mcp.json").read_text()
    config = json.loads(template.replace("<REPO_ROOT>", str(REPO)))
    entry = config["mcpServers"]["extra-rlhf"]
    assert entry["command"] == str(REPO / ".venv" / "bin" / "python") and entry["cwd"] == str(REPO)
    args = entry["args"]
    args[args.index("--sessions-dir") + 1] = str(tmp_path / "sessions")
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config))
    if not (REPO / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv in this checkout (run `make setup`)")
    done = subprocess.run([str(INSPECTOR), "--cli", "--config", str(path), "--server", "extra-rlhf",
                           "--method", "tools/call", "--tool-name", "ping"],
                          cwd=tmp_path, env={k: v for k, v in stdio_params(tmp_path).env.items() if k != "PYTHONPATH"},
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["structuredContent"]["result"]["pong"] is True
