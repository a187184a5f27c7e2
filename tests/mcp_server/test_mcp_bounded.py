"""No request can hold the server (issue 24, section 1), over the real stdio server.

* a battle against a search actor is long work: cancelling it stops the CPU within about a
  second (it used to play on to the end), and ping answers meanwhile;
* a play call spends at most ``--max-rollouts-per-call`` search rollouts, then returns
  ``paused``; advance_bot goes on, and the battle is the same as one played in one call;
* long calls beyond the pool's slots and queue are refused with ``busy`` at once;
* at the end of input, the running long work is stopped and every request is answered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from ..mcp_helpers import REPO, Checked, stdio_params

# ~3 s per decision on the Python engine, so a whole battle is minutes. The native core decides
# it in about 50 ms (a battle in seconds, over before the test cancels it), so the servers that
# play HEAVY run on the Python engine, whose search checks cancellation at every rollout; on the
# native core a search decision is one call, checked between decisions (a cancelled native series:
# tests/runtime/test_work_bounds.py::test_a_cancelled_series_stops_within_a_decision).
HEAVY = "search:baseline:greedy?sims=4096"


def python_engine(params: StdioServerParameters) -> StdioServerParameters:
    params.env["EXTRAARENA_ENGINE"] = "python"
    return params


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _server_pid(marker: Path) -> int:
    """The pid of the ``python -m mcp_server`` whose command line names ``marker``."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"mcp_server" in cmdline and str(marker).encode() in cmdline:
                return int(entry.name)
    raise AssertionError(f"no server process for {marker}")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def _ping_seconds(client: Client) -> float:
    started = time.monotonic()
    result = await client.call_tool("ping", {})
    assert result.structured_content["ok"]
    return time.monotonic() - started


async def _cpu_over(pid: int, seconds: float) -> float:
    before = _cpu_seconds(pid)
    await anyio.sleep(seconds)
    return _cpu_seconds(pid) - before


@pytest.mark.anyio
async def test_cancelling_a_search_battle_stops_its_work_and_ping_answers_meanwhile(tmp_path):
    sessions = tmp_path / "sessions"
    async with Client(python_engine(stdio_params(sessions, "--max-rollouts-per-call", "100000000"))) as client:
        c = Checked(client)
        pid = _server_pid(sessions)
        async with anyio.create_task_group() as group:
            async def battle() -> None:
                await client.call_tool("start_battle", {"p1_actor_type": "rl", "p1_model": HEAVY, "opponent": HEAVY,
                                                        "seed": 5})
                raise AssertionError("a battle of 4096-sims decisions ended although it was cancelled")

            group.start_soon(battle)
            await anyio.sleep(2.0)
            assert await _cpu_over(pid, 1.5) > 0.3  # the search is playing (on a loaded machine too)
            assert await _ping_seconds(client) < 1.0
            listed = await c.ok("list_matches")  # a cheap call answers too
            assert listed["matches"] == []
            group.cancel_scope.cancel()  # notifications/cancelled
        await anyio.sleep(1.0)
        assert await _cpu_over(pid, 1.5) < 0.2, "the search went on after its call was cancelled"
        assert await _ping_seconds(client) < 1.0
        entries = [json.loads(line) for line in (sessions / "interactive" / "catalog.jsonl").read_text().splitlines()]
        final = [e for e in entries if e["status"] != "started"]
        assert [e["status"] for e in final] == ["abandoned"]  # nobody got its match id: recorded, never dangling


@pytest.mark.anyio
async def test_a_play_call_stops_at_its_rollout_cap_and_advance_bot_goes_on(tmp_path):
    arguments = {"p1_actor_type": "rl", "p1_model": "search:baseline:greedy?sims=48", "opponent": "baseline:greedy",
                 "seed": 21}
    async with Client(stdio_params(tmp_path / "capped", "--max-rollouts-per-call", "400")) as client:
        c = Checked(client)
        state = await c.ok("start_battle", {**arguments, "group": "capped"})
        assert state["done"] is False
        assert state["paused"] == {"reason": "work_cap", "cap": "max_rollouts_per_call", "limit": 400,
                                   "rollouts": state["paused"]["rollouts"]}
        assert 400 <= state["paused"]["rollouts"] < 400 + 48 * 2  # at most one decision past the cap
        assert "advance_bot" in state["next"]
        calls, match_id = 1, state["match_id"]
        while not state["done"]:
            state = await c.ok("advance_bot", {"match_id": match_id})
            calls += 1
            assert calls < 100
        capped = await c.ok("finish_battle", {"match_id": match_id})
    assert calls > 2
    async with Client(stdio_params(tmp_path / "whole")) as client:
        c = Checked(client)
        state = await c.ok("start_battle", {**arguments, "group": "whole"})
        assert state["done"] is True and "paused" not in state
        whole = await c.ok("finish_battle", {"match_id": state["match_id"]})
    assert capped["result"] == whole["result"]  # pausing changes nothing in the battle

    def played(result: dict) -> list[tuple]:
        return [(a["action_id"], a["state_hash_after"], a["policy"])
                for a in map(json.loads, Path(result["paths"]["actions.jsonl"]).read_text().splitlines())]

    assert played(capped) == played(whole)


@pytest.mark.anyio
async def test_long_calls_beyond_the_slots_and_the_queue_are_refused_busy(tmp_path):
    series = {"n_battles": 400, "p1_model": "search:baseline:greedy?sims=64", "opponent": "baseline:greedy"}
    async with Client(stdio_params(tmp_path / "s", "--long-slots", "1", "--long-waiting", "1")) as client:
        c = Checked(client)
        async with anyio.create_task_group() as group:
            for name in ("first", "second"):
                group.start_soon(client.call_tool, "run_series", {"group": name, **series})
            await anyio.sleep(1.5)  # one runs, one waits
            started = time.monotonic()
            refused = await c.err("run_series", {"group": "third", **series}, code="busy")
            assert time.monotonic() - started < 1.0
            assert "1 call(s) running" in refused["message"] and "1 waiting" in refused["message"]
            assert await _ping_seconds(client) < 1.0
            group.cancel_scope.cancel()
        assert not (tmp_path / "s" / "third").exists()  # refused before anything was written


def test_at_the_end_of_input_running_work_is_stopped_and_every_request_answered(tmp_path):
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "bounded-test", "version": "0"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "run_series", "arguments": {"group": "eof", "n_battles": 1_000_000,
                                                             "p1_model": "baseline:greedy",
                                                             "opponent": "baseline:greedy"}}},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "start_battle", "arguments": {"p1_actor_type": "rl", "p1_model": HEAVY,
                                                               "opponent": HEAVY}}},
             {"jsonrpc": "2.0", "id": 3, "method": "tools/call",  # waits for a slot, then is refused
              "params": {"name": "start_battle", "arguments": {"p1_actor_type": "rl", "p1_model": HEAVY,
                                                               "opponent": HEAVY}}},
             *({"jsonrpc": "2.0", "id": 10 + i, "method": "ping"} for i in range(50))]
    payload = "".join(json.dumps(line) + "\n" for line in lines).encode()
    command = [sys.executable, "-m", "mcp_server", "--sessions-dir", str(tmp_path / "s"), "--long-slots", "2",
               "--drain-seconds", "2", "--log-level", "INFO"]
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, env=python_engine(stdio_params(tmp_path)).env, input=payload,
                          capture_output=True, timeout=120, check=False)
    elapsed = time.monotonic() - started
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr[-2000:]
    assert "Traceback" not in stderr
    answers = {a["id"]: a for a in map(json.loads, done.stdout.decode().splitlines()) if "id" in a}
    assert set(answers) == {0, 1, 2, 3, *range(10, 60)}  # every request read got a reply
    assert all(answers[10 + i]["result"] == {} for i in range(50))
    series = answers[1]["result"]["structuredContent"]
    assert series["ok"] and series["result"]["cancelled"] is True and series["result"]["ran"] > 0
    for request_id in (2, 3):
        assert answers[request_id]["result"]["structuredContent"]["error"]["code"] == "shutting_down"
    assert "stopping their work" in stderr and "are cancelled" not in stderr
    assert elapsed < 2 + 5 + 20  # the drain, the grace, and the start-up on a loaded machine
