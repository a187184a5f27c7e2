"""The L2 skill's documented steps, followed literally by the official SDK client over stdio:
the tool calls are read from the skill's "Steps" section (constants as written, the names
bound from earlier results), the loop is the one the skill describes, and the trace it says
finish_battle writes is checked on disk."""

from __future__ import annotations

import ast
import re
from typing import Any

import pytest
from mcp import Client

from tests.mcp_helpers import Checked, read_jsonl, stdio_params
from tests.skills.skilldocs import SKILLS

L2 = SKILLS / "extra-rlhf-l2-battle" / "SKILL.md"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def documented_steps() -> tuple[list[ast.Call], tuple[int, int]]:
    """The calls of the numbered steps, in order, and the (first, last) step of the repeat."""
    text = L2.read_text(encoding="utf-8")
    section = re.search(r"^## Steps\n(.*?)^## ", text, flags=re.S | re.M).group(1)
    calls = [ast.parse(m, mode="eval").body for m in re.findall(r"^\d+\. `([a-z_]+\(.*\))`$", section, flags=re.M)]
    repeat = re.search(r"^\d+\. Repeat steps (\d) and (\d) while `done` is false", section, flags=re.M)
    assert calls and repeat, "the L2 skill lost its numbered steps"
    return calls, (int(repeat.group(1)), int(repeat.group(2)))


def arguments(call: ast.Call, bound: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments as written: constants literally, names from what earlier steps returned."""
    out = {}
    for kw in call.keywords:
        out[kw.arg] = bound[kw.value.id] if isinstance(kw.value, ast.Name) else ast.literal_eval(kw.value)
    return out


def test_the_documented_steps_are_the_l2_lifecycle():
    calls, repeat = documented_steps()
    assert [c.func.id for c in calls] == ["start_battle", "legal_actions", "submit_action", "finish_battle"]
    assert repeat == (2, 3)


@pytest.mark.anyio
async def test_following_the_l2_skill_literally_records_a_complete_trace(tmp_path):
    calls, (first, last) = documented_steps()
    start, legal, submit, finish = calls
    assert (first, last) == (2, 3)  # steps 2-3 are calls[1:3]
    sessions = tmp_path / "sessions"
    async with Client(stdio_params(sessions)) as client:
        c = Checked(client)
        bound: dict[str, Any] = {}
        started = await c.ok(start.func.id, arguments(start, bound))
        bound["match_id"] = started["match_id"]
        assert started["your_turn"] and started["legal_actions"] and started["board"]
        sent: list[tuple[int, str]] = []
        state = started
        while not state["done"]:  # "Repeat steps 2 and 3 while done is false"
            listed = await c.ok(legal.func.id, arguments(legal, bound))
            assert listed["actions"], "it is our turn: there is something to play"
            choice = listed["actions"][len(sent) % len(listed["actions"])]
            bound["action_id"] = choice["action_id"]
            bound["rationale"] = f"step {len(sent)}: {choice['description']}"
            state = await c.ok(submit.func.id, arguments(submit, bound))
            assert state["board"] and "your_move" not in state  # your own move is not echoed
            sent.append((choice["action_id"], bound["rationale"]))
            assert len(sent) < 2000
        assert state["winner"] in (0, 1, 2) and state["end_reason"] in ("hero_defeated", "simultaneous_death",
                                                                         "turn_limit")
        done = await c.ok(finish.func.id, arguments(finish, bound))
        # what the skill says to read in the result
        assert done["result"]["status"] == "finished" and done["result"]["winner"] == state["winner"]
        assert done["degraded"] is False and done["policy_warnings"] == []
        assert set(done["paths"]) == {"meta.jsonl", "turns.jsonl", "actions.jsonl"}
        await c.err(legal.func.id, arguments(legal, bound), "match_finished")  # the match_id is retired

    literal = arguments(start, {})
    meta = read_jsonl(done["paths"]["meta.jsonl"])
    assert len(meta) == 1 and meta[0]["group"] == literal["group"] == done["group"]
    assert meta[0]["battle_tag"] == "llm-vs-bot" and meta[0]["p1_actor_type"] == literal["p1_actor_type"]
    assert meta[0]["actors"]["p2"]["spec"] == literal["opponent"]
    assert meta[0]["result"]["winner"] == state["winner"] and meta[0]["omniscient_peeks"] == []
    actions = read_jsonl(done["paths"]["actions.jsonl"])
    ours = [(a["action_id"], a["rationale"]) for a in actions if a["player"] == 1]
    assert ours == sent, "every move and its rationale, in order"
    assert all(a["rationale"] is None for a in actions if a["player"] == 2)
    assert meta[0]["result"]["decisions"] == len(actions)
    assert len(read_jsonl(done["paths"]["turns.jsonl"])) == meta[0]["result"]["turns"]
    assert (sessions / literal["group"] / "catalog.jsonl").is_file()
