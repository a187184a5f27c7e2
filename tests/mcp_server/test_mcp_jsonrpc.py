"""JSON-RPC 2.0 conformance for malformed requests (issue 14, item 6).

The SDK dropped every line it could not read as a JSON-RPC message -- lone surrogates, a
float id, a batch array, ``jsonrpc`` missing or "1.0", a 5,000-digit integer, deep nesting --
and the client waited forever; a request holding NaN or Infinity was answered with id null,
so the client waiting for its id still waited (issue 24: now -32600 with that id). Now each gets the answer the spec asks for (-32700 / -32600 /
-32602, with the id when it can be recovered), the server stays up, and -32601 does not
repeat the method name. Tested with raw lines on the real server's stdin, on both stdio paths
(pipes, and a regular file, which uses the SDK's own stdio), and line by line on the checker.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import time

import pytest

from mcp_server.conformance import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, check_line
from tests.mcp_helpers import REPO, stdio_params
from tests.mcp_server.test_mcp_stdio import RawServer

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "jsonrpc-test", "version": "0"}}}
DIGITS = "9" * 5000
DEEP = "[" * 100_000 + "]" * 100_000
CALL = '{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": {"name": "submit_action", "arguments": %s}}'

# (line, expected code, expected id) -- every one of them used to get no answer at all
MALFORMED: list[tuple[str, int, object]] = [
    ("this is not json {{{", PARSE_ERROR, None),
    ('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": ', PARSE_ERROR, None),  # torn
    # NaN / Infinity are not JSON, but the request is readable: answered with its id (issue 24)
    ('{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"x": NaN}}', INVALID_REQUEST, 3),
    ('{"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"x": -Infinity}}', INVALID_REQUEST, 4),
    (CALL % ('"nan-args"', '{"match_id": "m", "action_id": NaN}'), INVALID_REQUEST, "nan-args"),
    ('{"jsonrpc": "2.0", "id": 5, "method": "ping", "extra": [Infinity]}', INVALID_REQUEST, 5),
    ('{"jsonrpc": "2.0", "id": NaN, "method": "ping"}', INVALID_REQUEST, None),   # the id itself
    ('{"jsonrpc": "2.0", "id": -Infinity, "method": "ping"}', INVALID_REQUEST, None),
    (CALL % ("1.5", '{"match_id": "m", "action_id": 1}'), INVALID_REQUEST, None),  # a float id on a tools/call
    ("[1, 2, 3]", INVALID_REQUEST, None),
    ("[]", INVALID_REQUEST, None),
    ('"just a string"', INVALID_REQUEST, None),
    ("42", INVALID_REQUEST, None),
    ("null", INVALID_REQUEST, None),
    ("{}", INVALID_REQUEST, None),
    ('{"id": 10, "method": "ping"}', INVALID_REQUEST, 10),                      # jsonrpc missing
    ('{"jsonrpc": "1.0", "id": 11, "method": "ping"}', INVALID_REQUEST, 11),
    ('{"jsonrpc": 2.0, "id": "twelve", "method": "ping"}', INVALID_REQUEST, "twelve"),
    ('{"jsonrpc": "2.0", "id": 13.5, "method": "ping"}', INVALID_REQUEST, None),  # a float id
    ('{"jsonrpc": "2.0", "id": 14.0, "method": "ping"}', INVALID_REQUEST, None),
    ('{"jsonrpc": "2.0", "id": true, "method": "ping"}', INVALID_REQUEST, None),
    ('{"jsonrpc": "2.0", "id": null, "method": "ping"}', INVALID_REQUEST, None),
    ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', INVALID_REQUEST, None),
    ('{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}', INVALID_REQUEST, None),
    ('{"jsonrpc": "2.0", "id": %s, "method": "ping"}' % DIGITS, INVALID_REQUEST, None),
    ('{"jsonrpc": "2.0", "id": 20, "method": 5}', INVALID_REQUEST, 20),
    ('{"jsonrpc": "2.0", "id": 21, "method": "ping\\udc00"}', INVALID_REQUEST, 21),
    ('{"jsonrpc": "2.0", "id": 22}', INVALID_REQUEST, 22),
    ('{"jsonrpc": "2.0", "id": 23, "method": "tools/list", "params": "all"}', INVALID_REQUEST, 23),
    ('{"jsonrpc": "2.0", "id": 24, "method": "tools/call", "params": [1, 2]}', INVALID_PARAMS, 24),
    (CALL % (25, '{"match_id": "m", "action_id": 1, "rationale": "\\ud800 alone"}'), INVALID_PARAMS, 25),
    (CALL % (26, '{"match_id": "m", "action_id": 1, "rationale": "\\udfff"}'), INVALID_PARAMS, 26),
    (CALL % ('"27"', '{"match_id": "m", "\\ud83d": 1}'), INVALID_PARAMS, "27"),   # in a key
    (CALL % (28, '{"match_id": "m", "action_id": %s}' % DIGITS), INVALID_PARAMS, 28),
    (CALL % (29, '{"match_id": "m", "action_id": -%s}' % DIGITS), INVALID_PARAMS, 29),
    (CALL % (30, '{"match_id": "m", "x": %s}' % ("[" * 300 + "]" * 300)), INVALID_PARAMS, 30),
    (CALL % (31, '{"match_id": "m", "x": %s}' % DEEP), INVALID_PARAMS, 31),
    ('{"jsonrpc": "2.0", "method": "tools/call", "params": {"x": %s}, "id": "late-id"}' % DEEP,
     INVALID_PARAMS, "late-id"),
    ('{"jsonrpc": "2.0", "id": 32, "method": "ping", "params": {}, "extra": %s}' % DEEP, INVALID_REQUEST, 32),
    ('{"jsonrpc": "2.0", "id": 33, "method": "ping", "params": {"a": 1}, "extra": %s}' % ("[" * 300 + "]" * 300),
     INVALID_REQUEST, 33),
    ('{"jsonrpc": "2.0", "method": 7}', INVALID_REQUEST, None),                 # not even a notification
]


def _expected(line: str, code: int, request_id: object) -> None:
    verdict = check_line(line)
    assert not verdict.passes, line[:80]
    assert [(a.error.code, a.id) for a in verdict.answers] == [(code, request_id)], (line[:80], verdict)


@pytest.mark.parametrize("line,code,request_id", MALFORMED, ids=[f"{i}:{m[0][:30]}" for i, m in enumerate(MALFORMED)])
def test_checker_answers_each_malformed_line(line, code, request_id):
    _expected(line, code, request_id)
    message = check_line(line).answers[0].error.message
    for echoed in ("ping", "tools/call", "twelve", "late-id", "\\ud800", DIGITS[:50]):  # nothing sent repeated
        assert echoed not in message


def test_checker_passes_what_the_sdk_reads_and_never_answers_responses_or_notifications():
    good = [
        json.dumps(INIT),
        ('{"jsonrpc": "2.0", "id": "abc", "method": "tools/call", "params": {"name": "x", "arguments": '
         '{"rationale": "NaN and Infinity in text are fine", "emoji": "\\ud83d\\ude00"}}}'),
        '{"jsonrpc": "2.0", "id": 123456789012345678901234567890, "method": "ping"}',
        '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        '{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"note": "\\"id\\": 1"}}',
        '{"jsonrpc": "2.0", "id": 5, "result": {}}',
        '{"jsonrpc": "2.0", "id": 6, "error": {"code": 1, "message": "m"}}',
        '{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": null}',
    ]
    for line in good:
        assert check_line(line).passes, line
    silent = [
        "", "   \n",                                                                 # blank lines
        '{"jsonrpc": "2.0", "method": "notifications/x", "params": {"t": "\\ud800"}}',  # bad notification
        '{"jsonrpc": "2.0", "method": "notifications/x", "params": [1]}',
        '{"jsonrpc": "2.0", "id": 5, "result": "\\ud800"}',                        # a malformed response
        '{"jsonrpc": "2.0", "method": "notifications/x", "params": {"t": NaN}}',     # NaN in a notification
        '{"jsonrpc": "2.0", "id": 8, "result": {"t": Infinity}}',                  # ... or in a response
    ]
    for line in silent:
        verdict = check_line(line)
        assert not verdict.passes and verdict.answers == [], line


def test_a_batch_answers_each_request_it_carries():
    line = json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "n"},
                       {"jsonrpc": "2.0", "id": "two", "method": "ping"}, {"jsonrpc": "2.0", "id": 1.5,
                                                                           "method": "ping"}])
    assert [(a.error.code, a.id) for a in check_line(line).answers] == [(INVALID_REQUEST, 1),
                                                                        (INVALID_REQUEST, "two")]


def test_checking_is_fast_for_ordinary_and_bounded_for_hostile_lines():
    line = CALL % (1, json.dumps({"match_id": "m_0123abcd_" + "0" * 24, "action_id": 3, "rationale": "x" * 200}))
    started = time.perf_counter()
    for _ in range(2000):
        assert check_line(line).passes
    assert (time.perf_counter() - started) / 2000 < 0.0005
    hostile = '{"jsonrpc": "2.0", "method": "x", "params": {"a": %s}, "id": 9}' % ("[" * 400_000 + "]" * 400_000)
    started = time.perf_counter()
    assert check_line(hostile).answers[0].id == 9
    assert time.perf_counter() - started < 5


class _Wire(RawServer):
    def next_message(self, timeout: float = 20.0) -> dict:
        return json.loads(self.lines.get(timeout=timeout))

    def quiet(self, seconds: float = 0.3) -> bool:
        try:
            self.lines.get(timeout=seconds)
        except queue.Empty:
            return True
        return False


def test_malformed_lines_get_json_rpc_errors_and_the_server_stays_up(tmp_path):
    server = _Wire(tmp_path / "sessions", tmp_path / "stderr.txt")
    try:
        server.send(INIT)
        assert server.next_message()["result"]["serverInfo"]["name"] == "extra-rlhf"
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for line, code, request_id in MALFORMED:
            server.send(line)
            answer = server.next_message()
            assert answer["jsonrpc"] == "2.0" and answer["error"]["code"] == code, (line[:80], answer)
            assert "id" in answer and answer["id"] == request_id, (line[:80], answer)
            assert "result" not in answer
        # notifications and responses are never answered, blank lines are ignored
        for line in ("", '{"jsonrpc": "2.0", "method": "notifications/x", "params": {"t": "\\ud800"}}',
                     '{"jsonrpc": "2.0", "id": 77, "result": {}}'):
            server.send(line)
        assert server.quiet()
        # an unknown method: -32601 without its name
        server.send({"jsonrpc": "2.0", "id": 40, "method": "secret/method-name"})
        answer = server.next_message()
        assert answer["id"] == 40 and answer["error"] == {"code": -32601, "message": "Method not found"}
        # invalid params the SDK itself detects keep their -32602
        server.send({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
                     "params": {"name": "get_state", "arguments": "not an object"}})
        assert server.next_message()["error"]["code"] == INVALID_PARAMS
        # and the server still works
        server.send({"jsonrpc": "2.0", "id": 42, "method": "tools/call",
                     "params": {"name": "ping", "arguments": {}}})
        answer = server.next_message()
        assert answer["id"] == 42 and answer["result"]["structuredContent"]["result"]["pong"] is True
        assert server.proc.poll() is None
    finally:
        code = server.close()
    assert code == 0
    for line in server.raw_stdout:
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()


def test_stdin_from_a_regular_file_gets_the_same_answers(tmp_path):
    """The SDK's own stdio (stdin not a pipe) goes through the same checks."""
    lines = [json.dumps(INIT), '{"jsonrpc": "2.0", "method": "notifications/initialized"}']
    lines += [line for line, _, _ in MALFORMED]
    lines += [json.dumps({"jsonrpc": "2.0", "id": 99, "method": "ping"})]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open(requests, "rb") as stdin:
        done = subprocess.run([sys.executable, "-m", "mcp_server", "--sessions-dir", str(tmp_path / "s")],
                              cwd=REPO, env=stdio_params(tmp_path).env, stdin=stdin, capture_output=True,
                              timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    answers = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert answers[0]["id"] == 0 and answers[0]["result"]["serverInfo"]["name"] == "extra-rlhf"
    errors = [(a["error"]["code"], a["id"]) for a in answers if "error" in a]
    assert errors == [(code, request_id) for _, code, request_id in MALFORMED]
    assert answers[-1] == {"jsonrpc": "2.0", "id": 99, "result": {}}
