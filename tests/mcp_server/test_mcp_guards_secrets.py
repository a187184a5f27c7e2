"""Secret-looking argument names, nested keys and values sent to every tool of the real stdio
server are refused with a stable code, and never repeated: not in any result (message or
details) and not in the server's stderr. Names the tool does not accept, nested keys its
schema does not declare and rejected values are not repeated either, even harmless ones."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from mcp_server import build_server
from mcp_server.guards import describe_validation_errors, redact_loc

from ..mcp_helpers import REPO, Checked

DSN_NAME = "postgresql://admin:S3cr3tPw@db.example/prod"
DSN_KEY = "postgres://u:p@h/d"
SALT_NAME = "RETURNCLOCK_DATASET_SALT"
PASSWORD_VALUE = "password=hunter2"
# Harmless-looking text the caller sent that errors must not repeat either.
UNKNOWN_NAME = "zz_unknown_name_q7"
UNKNOWN_KEY = "zz_nested_key_q7"
BAD_VALUE = "zz_value_q7"

SECRETS = ["S3cr3tPw", "admin:", "db.example", "postgresql://", "postgres://", "u:p@h", SALT_NAME, "hunter2",
           UNKNOWN_NAME, UNKNOWN_KEY, BAD_VALUE]


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _server(tmp: Path, errlog: Path, log_level: str) -> StdioServerParameters:
    """The real server over stdio, its stderr appended to ``errlog`` so that it can be scanned."""
    command = " ".join(shlex.quote(a) for a in (
        sys.executable, "-m", "mcp_server", "--sessions-dir", str(tmp / "sessions"), "--datasets-dir",
        str(tmp / "datasets"), "--checkpoints-dir", str(tmp / "checkpoints"), "--log-level", log_level))
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"), "PYTHONPATH": str(REPO)}
    return StdioServerParameters(command="/bin/sh", args=["-c", f"exec {command} 2>>{shlex.quote(str(errlog))}"],
                                 env=env, cwd=str(REPO))


def _kinds(prop: dict[str, Any]) -> set[str]:
    kinds = {prop["type"]} if isinstance(prop.get("type"), str) else set()
    for option in prop.get("anyOf") or []:
        kinds |= _kinds(option)
    return kinds


def _cases(tool: Any) -> list[tuple[str, dict[str, Any], str]]:
    """(label, arguments, expected code) for one tool, from its input schema."""
    props: dict[str, Any] = tool.input_schema.get("properties") or {}
    strings = [name for name, prop in props.items() if "string" in _kinds(prop)]
    arrays = [name for name, prop in props.items() if "array" in _kinds(prop)]
    objects = [name for name, prop in props.items() if "object" in _kinds(prop) or "$ref" in json.dumps(prop)]
    cases = [
        ("dsn as an argument name", {DSN_NAME: 1}, "forbidden_argument"),
        ("dsn name next to a harmless unknown one", {UNKNOWN_NAME: 2, DSN_NAME: "x"}, "forbidden_argument"),
        ("salt variable as an argument name", {SALT_NAME: "0123456789abcdef"}, "forbidden_argument"),
        ("dsn key inside policy", {"policy": {"min_v5_battles": 1, DSN_KEY: 1}}, "forbidden_argument"),
        ("dsn key inside readiness_policy", {"readiness_policy": {DSN_KEY: 2}}, "forbidden_argument"),
        ("password value in an unknown argument", {"note": PASSWORD_VALUE}, "forbidden_argument"),
        ("dsn value deep inside an unknown argument", {"options": {"a": [1, {"b": DSN_NAME}]}}, "forbidden_argument"),
        ("harmless unknown argument name", {UNKNOWN_NAME: True}, "invalid_argument"),
        ("harmless unknown key inside policy", {"policy": {UNKNOWN_KEY: 1}}, "invalid_argument"),
    ]
    cases += [(f"password value in {name}", {name: PASSWORD_VALUE}, "forbidden_argument") for name in strings]
    cases += [(f"dsn value in {name}", {name: f"RLHF_PRODUCTION_DSN={DSN_NAME}"}, "forbidden_argument")
              for name in strings]
    cases += [(f"password value inside {name}", {name: ["ok", PASSWORD_VALUE]}, "forbidden_argument")
              for name in arrays]
    cases += [(f"dsn key inside {name}", {name: {DSN_KEY: 1}}, "forbidden_argument") for name in objects]
    cases += [(f"harmless unknown key inside {name}", {name: {UNKNOWN_KEY: 1}}, "invalid_argument")
              for name in objects]
    cases += [(f"wrong-typed value in {name}", {name: {UNKNOWN_KEY: BAD_VALUE}}, "invalid_argument")
              for name in props if name not in objects]
    return cases


@pytest.mark.anyio
@pytest.mark.parametrize("log_level", ["WARNING", "INFO"])
async def test_secret_names_keys_and_values_are_refused_by_every_tool_and_never_repeated(tmp_path, log_level):
    errlog = tmp_path / "server-stderr.log"
    results: list[str] = []
    calls = 0
    async with Client(_server(tmp_path, errlog, log_level)) as client:
        c = Checked(client)
        tools = (await client.list_tools()).tools
        assert len(tools) > 30
        for tool in tools:
            for label, arguments, code in _cases(tool):
                envelope = await c.envelope(tool.name, arguments)
                results.append(json.dumps(envelope))
                assert not envelope["ok"], f"{tool.name} / {label}: accepted {envelope['result']}"
                error = envelope["error"]
                assert error["code"] == code, f"{tool.name} / {label}: {error}"
                assert error["message"]
                if code == "forbidden_argument":  # says how many and where, lists the accepted names
                    assert error["details"]["refused"] >= 1 and error["details"]["arguments"]
                    assert "refused" in error["message"] and "Accepted arguments" in error["message"]
                calls += 1
        # an unknown tool named like a DSN is not repeated either
        envelope = await c.envelope(DSN_NAME, {"x": PASSWORD_VALUE})
        assert envelope["error"]["code"] == "unknown_tool"
        results.append(json.dumps(envelope))
    assert calls > 300
    blobs = {"results": "\n".join(results), "stderr": errlog.read_text(encoding="utf-8", errors="replace")}
    for where, text in blobs.items():
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} repeated in {where}"
    # every call was refused before running: nothing was written
    assert not any((tmp_path / d).exists() and any((tmp_path / d).rglob("*"))
                   for d in ("sessions", "datasets", "checkpoints"))


@pytest.mark.anyio
async def test_refusals_count_and_locate_what_they_do_not_repeat(tmp_path):
    server = build_server(tmp_path / "s", tmp_path / "d", tmp_path / "c")
    async with Client(server) as client:
        c = Checked(client)
        err = await c.err("list_sessions", {"limit": 3, UNKNOWN_NAME: 1, DSN_NAME: 2}, "forbidden_argument")
        assert err["details"]["arguments"] == ["<argument 3>"] and err["details"]["refused"] == 1
        assert "1 argument refused" in err["message"] and "Accepted arguments: limit, cursor" in err["message"]
        err = await c.err("list_sessions", {"limit": 3, UNKNOWN_NAME: 1, "other": 2}, "invalid_argument")
        assert "2 unknown arguments (names not repeated" in err["message"]
        assert err["details"] == {"unknown_count": 2, "unknown": ["<argument 2>", "<argument 3>"],
                                  "accepted": ["limit", "cursor"]}
        err = await c.err("dataset_readiness", {"group": "g", "policy": {"min_v5_battles": 1, DSN_KEY: 2}},
                          "forbidden_argument")
        assert err["details"]["arguments"] == ["policy.<key 2>"] and "policy.<key 2>" in err["message"]
        # an undeclared key is located by position; a declared one is named
        err = await c.err("dataset_readiness", {"group": "g", "policy": {"min_v5_battles": 1, UNKNOWN_KEY: 2}},
                          "invalid_argument")
        assert err["details"]["fields"] == ["policy.<key 2>"] and "Extra inputs are not permitted" in err["message"]
        err = await c.err("train_policy", {"dataset": "d", "name": "n", "readiness_policy": {"min_v5_battles": -1}},
                          "invalid_argument")
        assert err["details"]["fields"] == ["readiness_policy.min_v5_battles"]
        err = await c.err("split_v5_training_dataset", {"dataset": "d", "fractions": [0.5, BAD_VALUE]},
                          "invalid_argument")
        assert err["details"]["fields"] == ["fractions[1]"]
        err = await c.err("get_state", {"match_id": "m", "view": BAD_VALUE}, "invalid_argument")
        assert "'player' or 'omniscient'" in err["message"] and BAD_VALUE not in json.dumps(err)
        err = await c.err(DSN_NAME, {}, "unknown_tool")
        assert "S3cr3t" not in json.dumps(err) and "list_sessions" in err["message"]
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())


def test_validation_messages_never_repeat_the_input():
    """pydantic's loc and msg both pass through the redaction: string loc parts the caller
    sent become positions, a msg that quotes its input is replaced by the error type."""
    arguments = {"policy": {"a": 1, DSN_KEY: {"nested": BAD_VALUE}}, "groups": ["x", BAD_VALUE]}
    errors = [
        {"loc": ("policy", DSN_KEY, "nested"), "msg": f"Value error, {BAD_VALUE} is wrong", "type": "value_error",
         "input": BAD_VALUE},
        {"loc": ("groups", 1), "msg": "Input should be a valid integer", "type": "int_parsing", "input": BAD_VALUE},
        {"loc": ("policy", "a", "[key]"), "msg": f"bad {DSN_NAME}", "type": "x", "input": 1},
        {"loc": (UNKNOWN_NAME,), "msg": "Field required", "type": "missing", "input": {}},
    ]
    refusal = describe_validation_errors("t", errors, ["policy", "groups"], arguments, declared={"nested"})
    text = str(refusal) + json.dumps(refusal.details)
    for secret in (BAD_VALUE, DSN_KEY, "S3cr3tPw", UNKNOWN_NAME):
        assert secret not in text
    assert refusal.details["fields"] == ["<argument>", "groups[1]", "policy.<key 1>.[key]", "policy.<key 2>.nested"]
    assert "invalid value (value_error)" in str(refusal) and "invalid value (x)" in str(refusal)
    assert redact_loc(("policy", "min_v5_battles"), {"policy": {"min_v5_battles": "x"}}, ["policy"],
                      {"min_v5_battles"}) == "policy.min_v5_battles"
    assert redact_loc(("policy", "str"), {"policy": "str"}, ["policy"]) == "policy.<redacted>"
