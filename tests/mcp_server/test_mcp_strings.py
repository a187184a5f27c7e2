"""String arguments reach the core exactly as sent (issue 14, item 5), over the real stdio server.

The SDK re-parsed strings that look like JSON for any parameter not annotated exactly
``str``: a rationale "null" was recorded as null, a codename "null" dropped, a group "null"
became the default group, and a rationale "{}" or "[1]" was refused as not a string.

* Every string parameter of every tool (found in the published input schemas: top-level
  strings, optional strings, strings inside arrays; enums separately) is sent each tricky
  value through ``python -m tests.mcp_server.echo_server`` -- the real server, transport and
  SDK with each tool body replaced by an echo -- and must arrive as that very string.
* The real server records the values the issue names: group names, a codename in the trace
  and the lease, rationales and an abandon reason in the trace; content the core refuses
  ("{}" as a group name) is refused for its content, never for its type.
"""

from __future__ import annotations

import json
import sys

import pytest
from mcp import Client, StdioServerParameters

from tests.mcp_helpers import REPO, Checked, read_jsonl, stdio_params
from tests.mcp_server.schema_walk import arguments_with, leaves

TRICKY = ["null", "{}", "[1]", "1", "true", "false", "[]", "1.5", '"quoted"', "NaN", " null "]
ISSUE_VALUES = ["null", "{}", "[1]", "1", "true"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


def echo_params(tmp_path) -> StdioServerParameters:
    real = stdio_params(tmp_path / "sessions")
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "tests.mcp_server.echo_server", "--sessions-dir",
                                       str(tmp_path / "sessions"), "--datasets-dir", str(tmp_path / "datasets"),
                                       "--checkpoints-dir", str(tmp_path / "checkpoints")],
                                 env=real.env, cwd=str(REPO))


def _type_refusal(error: dict) -> bool:
    """The error is argument validation refusing the value's JSON type (what must not happen)."""
    return error["code"] == "invalid_argument" and "Input should be a valid" in error["message"]


@pytest.mark.anyio
async def test_every_string_parameter_of_every_tool_arrives_as_sent(tmp_path):
    async with Client(echo_params(tmp_path)) as client:
        c = Checked(client)
        tools = (await client.list_tools()).tools
        text_leaves = [leaf for tool in tools for leaf in leaves(tool) if leaf.type == "string"]
        by_name = {tool.name: tool for tool in tools}
        free = [leaf for leaf in text_leaves if "enum" not in leaf.schema]
        enums = [leaf for leaf in text_leaves if "enum" in leaf.schema]
        # not vacuous: the parameters the issue names are among them
        names = {leaf.name for leaf in free}
        assert {"submit_action.rationale", "start_battle.codename", "start_battle.group", "run_series.codename",
                "abandon_battle.reason", "claim_codename.codename", "materialize_v5_dataset.groups[0]",
                "inspect_session.cursor", "export_production_v5_dataset.start_at"} <= names
        assert len(free) >= 70 and len({leaf.tool for leaf in free}) >= 30

        for leaf in free:
            for value in TRICKY:
                tool = by_name[leaf.tool]
                sent = arguments_with(leaf, value, tool)
                result = await c.ok(leaf.tool, sent)
                received = result["received"][leaf.argument]
                if leaf.key is None:
                    assert received == {"type": "str", "value": value}, (leaf.name, value, received)
                else:
                    assert received["value"] == sent[leaf.argument], (leaf.name, value, received)
                    assert received["value"][leaf.key] == value and isinstance(received["value"][leaf.key], str)

        # enums: a tricky string is not one of the values, so it is refused -- never turned into
        # null (the default) or anything else
        assert {leaf.name for leaf in enums} >= {"start_battle.p1_actor_type", "register_checkpoint.kind",
                                                 "get_state.view"}
        for leaf in enums:
            for value in TRICKY:
                if value in leaf.schema["enum"]:
                    continue
                error = await c.err(leaf.tool, arguments_with(leaf, value, by_name[leaf.tool]), "invalid_argument")
                assert any(field.startswith(leaf.argument) for field in error["details"]["fields"]), error


@pytest.mark.anyio
async def test_json_looking_strings_are_recorded_by_the_real_core(tmp_path):
    sessions = tmp_path / "sessions"
    async with Client(stdio_params(sessions)) as client:
        c = Checked(client)
        # group and codename: "null" stays the group "null" (not 'interactive') and the codename "null"
        start = await c.ok("start_battle", {"p1_actor_type": "llm", "opponent": "baseline:random", "group": "null",
                                            "seed": 5, "codename": "null"})
        assert start["group"] == "null" and start["codename"] == "null"
        match_id = start["match_id"]

        # rationales: each tricky value is recorded as that text
        sent = []
        for value in ISSUE_VALUES:
            state = await c.ok("get_state", {"match_id": match_id})
            if state["done"]:
                break
            action = state["legal_actions"][-1]["action_id"]
            await c.ok("submit_action", {"match_id": match_id, "action_id": action, "rationale": value})
            sent.append(value)
        assert sent
        done = await c.ok("abandon_battle", {"match_id": match_id, "reason": "null"})

        for value in ("1", "true"):  # valid group names made only of digits or a JSON keyword
            other = await c.ok("start_battle", {"p1_actor_type": "human", "group": value, "codename": "true"})
            assert other["group"] == value and other["codename"] == "true"
            await c.ok("abandon_battle", {"match_id": other["match_id"], "reason": "{}"})
        for value in ("{}", "[1]"):  # not group names: refused for the content, by the core
            error = await c.err("start_battle", {"p1_actor_type": "human", "group": value}, "invalid_argument")
            assert not _type_refusal(error) and "group" in error["message"]
            error = await c.err("claim_codename", {"codename": value, "group": "null"}, "invalid_argument")
            assert not _type_refusal(error) and "codename" in error["message"]

        # the lease keeps the codename and the group as sent
        lease = (await c.ok("claim_codename", {"codename": "null", "group": "true"}))["lease"]
        assert lease["codename"] == "null" and lease["group"] == "true"
        listed = (await c.ok("list_codenames"))["leases"]
        assert [(row["codename"], row["group"]) for row in listed] == [("null", "true")]
        assert (await c.ok("release_codename", {"codename": "null"}))["released"] is True

        # readers find the groups by those names
        assert (await c.ok("inspect_session", {"group": "null"}))["group"] == "null"
        readiness = await c.ok("dataset_readiness", {"group": "null"})
        assert json.dumps(readiness).count('"null"') >= 1
        error = await c.err("inspect_model", {"name": "null"}, "not_found")
        assert "'null'" in error["message"]

        # a series: group "null" resumes into the same group, codename "true" recorded
        series = await c.ok("run_series", {"group": "series", "n_battles": 1,
                                           "p1_model": "baseline:greedy", "opponent": "baseline:random",
                                           "codename": "true"})
        assert series["codename"] == "true"

    battle_dir = sessions / "null" / "battles" / done["battle_id"] / "v5"
    (meta,) = read_jsonl(battle_dir / "meta.jsonl")
    assert meta["codename"] == "null" and meta["result"]["status"] == "abandoned"
    assert meta["result"]["reason"] == "null"
    p1 = [row for row in read_jsonl(battle_dir / "actions.jsonl") if row["player"] == 1]
    assert [row["rationale"] for row in p1] == sent
    assert not (sessions / "interactive").exists()
    assert {"1", "null", "series", "true"} <= {p.name for p in sessions.iterdir() if p.is_dir()}
