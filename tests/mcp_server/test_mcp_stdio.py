"""The MCP server as a real ``python -m mcp_server`` subprocess over stdio: a complete llm
battle checked on disk (rationales included), an rl series with progress notifications, a
match id from another server process, and malformed requests that must not kill it."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from mcp import Client

from extrarlhf.runtime.sessions import SessionStore
from tests.mcp_helpers import REPO, Checked, play_to_the_end, read_jsonl, stdio_params


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_llm_battle_over_stdio_leaves_a_complete_trace_with_rationales(tmp_path):
    sessions = tmp_path / "sessions"
    async with Client(stdio_params(sessions)) as client:
        c = Checked(client)
        start = await c.ok("start_battle", {"p1_actor_type": "llm", "opponent": "baseline:greedy",
                                            "group": "stdio-llm", "seed": 42, "codename": "Stdio"})
        assert start["battle_tag"] == "llm-vs-bot" and start["your_turn"] and start["legal_actions"]
        final, rationales = await play_to_the_end(c, start["match_id"],
                                                  rationale="LLM move {i}: I chose '{description}'")
        assert final["done"] and final["winner"] in (0, 1, 2)
        done = await c.ok("finish_battle", {"match_id": start["match_id"]})
        assert done["status"] == "finished" and done["winner"] == final["winner"]
        await c.err("legal_actions", {"match_id": start["match_id"]}, "match_finished")

    battle_dir = sessions / "stdio-llm" / "battles" / done["battle_id"] / "v5"
    assert {Path(p) for p in done["paths"].values()} == {battle_dir / n for n in
                                                         ("meta.jsonl", "turns.jsonl", "actions.jsonl")}
    (meta,) = read_jsonl(battle_dir / "meta.jsonl")
    assert meta["battle_id"] == done["battle_id"] and meta["seed"] == 42 and meta["codename"] == "Stdio"
    assert meta["actors"]["p1"]["type"] == "llm" and meta["actors"]["p2"]["spec"] == "baseline:greedy"
    assert meta["result"]["status"] == "finished" and meta["result"]["winner"] == final["winner"]
    actions = read_jsonl(battle_dir / "actions.jsonl")
    assert len(actions) == done["result"]["decisions"] == meta["result"]["decisions"]
    p1 = [r for r in actions if r["player"] == 1]
    assert [r["rationale"] for r in p1] == rationales and all(r["actor"]["type"] == "llm" for r in p1)
    assert all(r["rationale"] is None for r in actions if r["player"] == 2)
    for record in p1:  # the recorded choice is one of the legal actions shown, with its description
        shown = {a["action_id"]: a["description"] for a in record["legal_actions"]}
        assert record["action_id"] in shown and shown[record["action_id"]] in record["rationale"]
    assert read_jsonl(battle_dir / "turns.jsonl")
    (entry,) = SessionStore(sessions).read_catalog("stdio-llm")
    assert entry["status"] == "finished" and entry["battle_id"] == done["battle_id"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 per-request envelope / initialize handshake
async def test_rl_series_over_stdio_reports_progress(tmp_path, mode):
    progress: list[tuple[float, float | None]] = []

    async def on_progress(done, total, message):
        progress.append((done, total))

    async with Client(stdio_params(tmp_path / "sessions"), mode=mode) as client:
        c = Checked(client)
        result = await c.ok("run_series", {"group": "stdio-rl", "n_battles": 6, "p1_model": "baseline:greedy",
                                           "opponent": "baseline:random", "seed": 3, "max_workers": 2,
                                           "codename": "Runner"}, progress_callback=on_progress)
        assert result["ran"] == 6 and result["summary"]["by_status"]["finished"] == 6
        assert result["summary"]["battle_tags"] == {"rl-vs-bot": 6}
        assert progress and progress[-1] == (6, 6)
        assert [p[0] for p in progress] == sorted(p[0] for p in progress)
        assert (await c.ok("list_codenames"))["leases"] == []
        assert (await c.ok("series_status", {"group": "stdio-rl"}))["complete"] is True


@pytest.mark.anyio
async def test_a_match_id_from_another_server_process_is_foreign(tmp_path):
    sessions = tmp_path / "sessions"
    async with Client(stdio_params(sessions)) as first, Client(stdio_params(sessions)) as second:
        a, b = Checked(first), Checked(second)
        start = await a.ok("start_battle", {"p1_actor_type": "human", "group": "two", "seed": 1})
        for tool, args in (("get_state", {}), ("legal_actions", {}), ("submit_action", {"action_id": 0}),
                           ("finish_battle", {})):
            err = await b.err(tool, {"match_id": start["match_id"], **args}, "foreign_match")
            assert "another MCP server process" in err["message"]
        assert (await b.ok("list_matches"))["count"] == 0
        # the owner still plays it
        assert (await a.ok("legal_actions", {"match_id": start["match_id"]}))["your_turn"]


class RawServer:
    """The server subprocess spoken to line by line, to send what no SDK client would."""

    def __init__(self, sessions: Path, stderr_path: Path) -> None:
        self.stderr = open(stderr_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "mcp_server", "--sessions-dir", str(sessions)],
                                     cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env=stdio_params(sessions).env)
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.raw_stdout: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.raw_stdout.append(line)
            self.lines.put(line)

    def send(self, payload: dict | str) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def response(self, request_id: int, timeout: float = 20.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            message = json.loads(line)
            if message.get("id") == request_id:
                return message

    def close(self) -> int:
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=20)
        finally:
            self.stderr.close()


def test_malformed_requests_and_stray_output_do_not_break_the_server(tmp_path):
    server = RawServer(tmp_path / "sessions", tmp_path / "stderr.txt")
    try:
        server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "raw-test", "version": "0"}}})
        assert server.response(1)["result"]["serverInfo"]["name"] == "extra-rlhf"
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        server.send("this is not json at all {{{")
        server.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": ')  # torn line
        server.send("[1, 2, 3]")
        server.send({"jsonrpc": "2.0", "id": 3, "method": "no/such/method"})
        assert server.response(3)["error"]["code"] == -32601

        server.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "no_such_tool"}})
        result = server.response(4)["result"]
        assert result["isError"] and result["structuredContent"]["error"]["code"] == "unknown_tool"

        server.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                     "params": {"name": "submit_action", "arguments": {"match_id": 7, "action_id": "seven"}}})
        result = server.response(5)["result"]
        assert result["isError"] and result["structuredContent"]["error"]["code"] == "invalid_argument"
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]

        server.send({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                     "params": {"name": "get_state", "arguments": "not an object"}})
        assert server.response(6)["error"]["code"] == -32602

        # code in the server process that writes to stdout (print and raw fd 1) cannot touch the wire
        server.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                     "params": {"name": "register_custom_model",
                                "arguments": {"kind": "noisy", "factory": "tests.noisy_factory:make"}}})
        assert server.response(7)["result"]["structuredContent"]["ok"] is True

        server.send({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                     "params": {"name": "list_sessions", "arguments": {}}})
        result = server.response(8)["result"]
        assert result["isError"] is False and result["structuredContent"]["ok"] is True
        assert server.proc.poll() is None
    finally:
        code = server.close()
    assert code == 0
    for line in server.raw_stdout:  # stdout carried JSON-RPC messages only
        assert json.loads(line)["jsonrpc"] == "2.0"
    stderr = (tmp_path / "stderr.txt").read_text()
    assert "print() at import" in stderr and "raw write to fd 1" in stderr


def test_stdin_from_a_regular_file_uses_the_sdk_stdio_and_exits_cleanly(tmp_path):
    """Not a pipe (the pipe transport's precondition): the server falls back to the SDK's stdio."""
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                               "clientInfo": {"name": "file", "version": "0"}}}) + "\n")
    with open(requests, "rb") as stdin:
        done = subprocess.run([sys.executable, "-m", "mcp_server", "--sessions-dir", str(tmp_path / "s")],
                              cwd=REPO, env=stdio_params(tmp_path).env, stdin=stdin, capture_output=True,
                              timeout=30)
    assert done.returncode == 0, done.stderr.decode()
    (line,) = done.stdout.decode().splitlines()
    assert json.loads(line)["result"]["serverInfo"]["name"] == "extra-rlhf"
