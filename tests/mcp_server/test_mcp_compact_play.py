"""A move costs an agent little (issue 27, DESIGN 8.1): submit_action and advance_bot answer
with the board text and the legal actions by default -- no structured state (view='player'
asks for it), no battle facts start_battle already gave, no echo of the caller's rationale.
Measured on three seeded llm battles (the last legal action each time): median 3,130
characters per decision before, 1,318 after."""

from __future__ import annotations

import statistics

import pytest
from mcp import Client

from mcp_server import build_server

MEDIAN_BUDGET = 1_400  # characters of a submit_action reply; DESIGN's target is about 1,200


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_a_move_returns_the_board_and_legal_actions_only(tmp_path):
    server = build_server(tmp_path / "s", tmp_path / "d", tmp_path / "c")
    sizes = []
    async with Client(server) as client:
        for seed in (1, 2, 3):
            started = (await client.call_tool("start_battle", {"p1_actor_type": "llm", "seed": seed}))
            state = started.structured_content["result"]
            assert "state" in state and state["battle_tag"] == "llm-vs-bot"  # the battle's facts, once
            while not state["done"]:
                choice = state["legal_actions"][-1]["action_id"]
                reply = await client.call_tool("submit_action", {"match_id": state["match_id"], "action_id": choice,
                                                                 "rationale": "the last legal action"})
                sizes.append(len(reply.content[0].text))
                state = reply.structured_content["result"]
                assert "state" not in state and "battle_tag" not in state and "opponent_moves_note" not in state
                assert "rationale" not in state["your_move"]  # the caller's own text is not echoed
                assert state["board"] and (state["legal_actions"] or not state["your_turn"])
            await client.call_tool("finish_battle", {"match_id": state["match_id"]})
        asked = await client.call_tool("start_battle", {"p1_actor_type": "llm", "seed": 4})
        match_id = asked.structured_content["result"]["match_id"]
        full = (await client.call_tool("submit_action", {"match_id": match_id, "action_id": 0,
                                                         "view": "player"})).structured_content["result"]
        assert full["state"]["you"]["player"] == 1 and "hand" not in full["state"]["opponent"]
    assert statistics.median(sizes) <= MEDIAN_BUDGET, statistics.median(sizes)
