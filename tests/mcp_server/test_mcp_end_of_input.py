"""The end of stdin does not cost the answers to the requests read before it.

CI caught it: ``python -m mcp_server < requests.jsonl`` whose last line was a ``ping`` got no
answer to it on a loaded machine, because the SDK cancels the handlers still running when its
read stream ends. Now every request read before the end of the input is answered (or cancelled
by the client) before the server stops, up to a bound; on both stdio paths (a regular file and
a pipe), and at the stream level for the cancellation and the bound.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from mcp_server.drain import answered_before_exit
from tests.mcp_helpers import REPO, stdio_params

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "end-of-input-test", "version": "0"}}}
SLOW_SERIES = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "run_series",
                          "arguments": {"group": "eof", "n_battles": 2, "p1_model": "search:baseline:greedy?sims=4",
                                        "opponent": "baseline:greedy"}}}


def _serve(tmp_path, lines: list[dict], *, from_file: bool) -> tuple[list[dict], str, float]:
    payload = ("\n".join(json.dumps(line) for line in lines) + "\n").encode()
    command = [sys.executable, "-m", "mcp_server", "--sessions-dir", str(tmp_path / "s"), "--log-level", "INFO"]
    started = time.monotonic()
    if from_file:
        requests = tmp_path / "requests.jsonl"
        requests.write_bytes(payload)
        with open(requests, "rb") as stdin:
            done = subprocess.run(command, cwd=REPO, env=stdio_params(tmp_path).env, stdin=stdin,
                                  capture_output=True, timeout=120, check=False)
    else:
        done = subprocess.run(command, cwd=REPO, env=stdio_params(tmp_path).env, input=payload,
                              capture_output=True, timeout=120, check=False)
    elapsed = time.monotonic() - started
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr[-2000:]
    assert "Traceback" not in stderr
    return [json.loads(line) for line in done.stdout.decode().splitlines()], stderr, elapsed


@pytest.mark.parametrize("from_file", [True, False], ids=["regular-file", "pipe"])
def test_a_request_still_running_at_the_end_of_input_is_answered(tmp_path, from_file):
    lines = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}, SLOW_SERIES,
             {"jsonrpc": "2.0", "id": 6, "method": "ping"}]
    answers, stderr, _ = _serve(tmp_path, lines, from_file=from_file)
    by_id = {a["id"]: a for a in answers if "id" in a}
    assert by_id[6] == {"jsonrpc": "2.0", "id": 6, "result": {}}
    series = by_id[5]["result"]["structuredContent"]
    assert series["ok"] is True, series
    assert series["result"]["ran"] == 2
    assert "answering them before stopping" in stderr  # the series was still running at the end of input
    assert "cancelled" not in stderr
    assert len(list((tmp_path / "s" / "eof").glob("**/*.jsonl"))) >= 2  # both traces are on disk


def _request(request_id: int) -> SessionMessage:
    return SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping"))


async def _end_after(reader, seconds: float) -> bool:
    """True when the wrapped read stream ended within ``seconds``."""
    with anyio.move_on_after(seconds):
        with pytest.raises(StopAsyncIteration):
            await reader.__anext__()
        return True
    return False


@pytest.mark.anyio
async def test_the_end_of_input_waits_for_the_response_then_ends():
    send_in, receive_in = anyio.create_memory_object_stream(4)
    send_out, receive_out = anyio.create_memory_object_stream(4)
    reader, writer = answered_before_exit(receive_in, send_out, drain_seconds=30)
    await send_in.send(_request(1))
    assert (await reader.receive()).message.id == 1
    send_in.close()  # the end of the input, with request 1 unanswered
    assert not await _end_after(reader, 0.2)
    await writer.send(SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=1, result={})))
    assert await _end_after(reader, 1.0)
    assert (await receive_out.receive()).message.id == 1  # the answer went out


@pytest.mark.anyio
async def test_a_request_the_client_cancelled_does_not_hold_the_end():
    send_in, receive_in = anyio.create_memory_object_stream(4)
    send_out, _receive_out = anyio.create_memory_object_stream(4)
    reader, _writer = answered_before_exit(receive_in, send_out, drain_seconds=30)
    await send_in.send(_request(7))
    await send_in.send(SessionMessage(types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 7})))
    send_in.close()
    await reader.receive()
    await reader.receive()
    assert await _end_after(reader, 1.0)


@pytest.mark.anyio
async def test_the_wait_is_bounded_and_says_how_many_were_cancelled(caplog):
    send_in, receive_in = anyio.create_memory_object_stream(4)
    send_out, _receive_out = anyio.create_memory_object_stream(4)
    reader, _writer = answered_before_exit(receive_in, send_out, drain_seconds=0.3, grace_seconds=0.3)
    await send_in.send(_request(1))
    await send_in.send(_request(2))
    send_in.close()
    await reader.receive()
    await reader.receive()
    started = time.monotonic()
    assert await _end_after(reader, 5.0)
    assert 0.55 < time.monotonic() - started < 3.0  # the drain, then the grace after stopping their work
    assert "2 request(s) still running after 0 s; stopping their work" in caplog.text
    assert "2 request(s) still running 0 s after their work was stopped are cancelled" in caplog.text
