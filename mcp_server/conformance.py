"""JSON-RPC 2.0 answers for inbound lines the SDK would drop without a word.

The SDK's stdio transport parses each line into a JSON-RPC message and, when that fails,
hands the exception to its dispatcher, which logs it: the client never hears back and waits
for its request forever. :func:`check_line` looks at every inbound line first. A line the
SDK accepts passes through untouched (one extra parse, about 3 microseconds); anything else
is answered the way JSON-RPC 2.0 says, with the request's id whenever it can be recovered:

* not JSON (a torn line): ``-32700 Parse error`` with id null;
* not a request object (an array -- MCP has no batches --, a scalar, ``jsonrpc`` missing or
  not ``"2.0"``, an id that is null, fractional, boolean or longer than the parser accepts, a
  method that is not text): ``-32600 Invalid Request``; each request of a batch that carries
  an id gets its own answer;
* a request holding ``NaN``, ``Infinity`` or ``-Infinity`` anywhere (Python's parser and the
  SDK's read them; JSON has no such numbers): ``-32600 Invalid Request`` with the request's
  id, so the client waiting for that id hears back (id null when the id itself is one of them
  or a fraction: MCP ids are strings or integers);
* params the SDK cannot read (an array instead of an object, a string with a lone UTF-16
  surrogate, an integer of more than ``sys.get_int_max_str_digits()`` digits, nesting deeper
  than the SDK's parser accepts, 200 levels): ``-32602 Invalid params`` (the same content
  elsewhere in the message: ``-32600``).

Nothing the client sent is repeated in an answer (no method names, keys or values).
Notifications are never answered unless they are not even a request object (JSON-RPC
answers those with id null), and a malformed response from the client is dropped (logged),
never answered. Deep nesting is measured without recursion, so no input can exhaust the
stack or hang the server.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from pydantic import ValidationError

log = logging.getLogger("mcp_server")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602

_SCAN_LIMIT_CHARS = 1024 * 1024  # the id of a too-deep message is looked for in lines up to this size
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.DOTALL)


@dataclass(frozen=True)
class Verdict:
    """What to do with one inbound line: pass it to the SDK, or answer (possibly nothing)."""

    passes: bool
    answers: list[types.JSONRPCError] = field(default_factory=list)
    reason: str = ""


PASS = Verdict(True)


class _HugeInt(int):
    """An integer literal longer than Python (and the SDK's parser) will convert."""

    def __new__(cls, digits: str) -> "_HugeInt":
        return super().__new__(cls, 0)


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > _max_digits():
        return _HugeInt(text)
    return int(text)


def _max_digits() -> int:
    return sys.get_int_max_str_digits() or 4300


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _error(code: int, request_id: Any, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def _answer(code: int, request_id: Any, message: str) -> Verdict:
    return Verdict(False, [_error(code, request_id, message)], message)


def _drop(reason: str) -> Verdict:
    return Verdict(False, [], reason)


def _text_ok(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a \\ud800 escape
        return False
    return True


def _valid_id(value: Any) -> str | int | None:
    """The request id when it is one MCP accepts (a string or an integer), else None."""
    if isinstance(value, str) and _text_ok(value):
        return value
    if isinstance(value, int) and not isinstance(value, (bool, _HugeInt)):
        return value
    return None


def _content_problem(value: Any, sdk_depth: int = 200) -> str | None:
    """Why the SDK cannot read ``value`` (lone surrogates, huge integers, deep nesting), or None.

    Iterative, so a deep value cannot exhaust the stack."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    deepest = 0
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, str):
            if not _text_ok(item):
                return "a string contains a lone UTF-16 surrogate escape, which is not text"
        elif isinstance(item, _HugeInt):
            return f"an integer has more than {_max_digits()} digits"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not _text_ok(key):
                    return "a key contains a lone UTF-16 surrogate escape, which is not text"
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    if deepest > sdk_depth:
        return f"the params nest {deepest} levels deep; the server reads at most {sdk_depth}"
    return None


def _scan_too_deep(line: str) -> tuple[str | int | None, bool]:
    """For a message too deep to parse: its top-level ``"id"`` and whether its deepest part
    lies inside ``"params"``, found by a flat scan of the tokens (no recursion)."""
    if len(line) > _SCAN_LIMIT_CHARS:
        return None, False
    request_id: str | int | None = None
    depth = deepest_params = deepest_other = 0
    expecting_key = after_colon = in_params = False
    key: str | None = None
    for match in _TOKEN.finditer(line):
        token = match.group()
        if token in "{[":
            if depth == 1 and after_colon:
                in_params = key == '"params"'
                after_colon, key = False, None
            depth += 1
            expecting_key = token == "{" and depth == 1
            if in_params:
                deepest_params = max(deepest_params, depth)
            else:
                deepest_other = max(deepest_other, depth)
            continue
        if token in "}]":
            depth -= 1
            if depth <= 1:
                in_params = False
            continue
        if depth != 1:
            continue
        if token == ",":
            expecting_key, key, after_colon = True, None, False
        elif token == ":":
            after_colon = True
        elif expecting_key and not after_colon and token.startswith('"'):
            key, expecting_key = token, False
        elif after_colon:
            if key == '"id"':
                try:
                    request_id = _valid_id(json.loads(token, parse_int=_parse_int, parse_constant=_reject_constant))
                except (ValueError, RecursionError):
                    request_id = None
            after_colon, key = False, None
    return request_id, deepest_params > deepest_other


def check_line(line: str) -> Verdict:
    """:data:`PASS` for a line the SDK reads as a JSON-RPC message, else the answers (see the module)."""
    if not line.strip():
        return _drop("blank line")
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError:
        return _diagnose(line, sdk_failed=True)
    if isinstance(message, types.JSONRPCNotification) and '"id"' in line:
        return _diagnose(line, sdk_failed=False)  # `"id": null` (or another bad id) read as a notification
    if "NaN" in line or "Infinity" in line:
        return _diagnose(line, sdk_failed=False)  # the SDK's parser takes these tokens; JSON has no such values
    return PASS


def _diagnose(line: str, *, sdk_failed: bool) -> Verdict:
    not_json = False  # the line holds NaN, Infinity or -Infinity, which JSON does not have
    try:
        doc = json.loads(line, parse_int=_parse_int, parse_constant=_reject_constant)
    except RecursionError:
        request_id, in_params = _scan_too_deep(line)
        if in_params:
            return _answer(INVALID_PARAMS, request_id, "Invalid params: the params nest too deeply to be read")
        return _answer(INVALID_REQUEST, request_id, "Invalid Request: the message nests too deeply to be read")
    except ValueError:
        try:  # NaN / Infinity: Python's parser (and the SDK's) reads them, so the request and its id are known
            doc = json.loads(line, parse_int=_parse_int)
        except (ValueError, RecursionError):
            return _answer(PARSE_ERROR, None, "Parse error: the line is not a JSON text (one JSON-RPC message per "
                                              "line, UTF-8, no NaN or Infinity)")
        not_json = True
    if isinstance(doc, list):
        message = "Invalid Request: batches (JSON arrays) are not supported by MCP; send each message on its own line"
        answers = [_error(INVALID_REQUEST, rid, message) for item in doc if isinstance(item, dict)
                   and "method" in item and (rid := _valid_id(item.get("id"))) is not None]
        return Verdict(False, answers or [_error(INVALID_REQUEST, None, message)], message)
    if not isinstance(doc, dict):
        return _answer(INVALID_REQUEST, None, "Invalid Request: a JSON-RPC message is a JSON object")
    has_id = "id" in doc
    rid = _valid_id(doc.get("id"))
    if "method" not in doc and ("result" in doc or "error" in doc):
        return PASS if not (sdk_failed or not_json) else _drop("malformed response from the client")
    if doc.get("jsonrpc") != "2.0":
        return _answer(INVALID_REQUEST, rid, 'Invalid Request: "jsonrpc" must be "2.0"')
    if has_id and rid is None:
        return _answer(INVALID_REQUEST, None, "Invalid Request: id must be a string or an integer (not null, a "
                                              f"fraction, NaN or Infinity, a boolean, or longer than "
                                              f"{_max_digits()} digits)")
    method = doc.get("method")
    if not isinstance(method, str) or not _text_ok(method):
        return _answer(INVALID_REQUEST, rid, "Invalid Request: method must be a string of text")
    params = doc.get("params")
    if params is not None and not isinstance(params, dict):
        if isinstance(params, list):
            return _answer(INVALID_PARAMS, rid, "Invalid params: MCP params are a JSON object, not an array") \
                if has_id else _drop("notification with array params")
        return _answer(INVALID_REQUEST, rid, "Invalid Request: params must be a JSON object")
    for code, part in ((INVALID_PARAMS, params), (INVALID_REQUEST, {k: v for k, v in doc.items() if k != "params"})):
        problem = _content_problem(part)
        if problem:
            label = "Invalid params" if code == INVALID_PARAMS else "Invalid Request"
            return _answer(code, rid, f"{label}: {problem}") if has_id else _drop(f"notification: {problem}")
    if not_json:
        return _answer(INVALID_REQUEST, rid, "Invalid Request: NaN, Infinity and -Infinity are not JSON numbers; "
                                             "send a finite number (or null)") \
            if has_id else _drop("notification with NaN or Infinity")
    if sdk_failed:
        return _answer(INVALID_REQUEST, rid, "Invalid Request: the message is not a JSON-RPC 2.0 request") \
            if has_id else _drop("unreadable notification")
    return PASS
