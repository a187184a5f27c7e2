"""A move costs an agent little (issue 27, DESIGN 8.1): start_battle, submit_action and advance_bot
answer with the board text and the legal actions by default -- no structured state (view='player'
asks for it), each fact once: the battle's facts only in start_battle, no match_id echoed back, no
to_move next to your_turn, no echo of the caller's own move, the routine "your move" hint left to
the server instructions, the bots' moves as their descriptions. Measured on three seeded llm
battles (the last legal action each time): median 3,130 characters per decision at the issue,
1,318 after the first pass, 1,018 now."""

from __future__ import annotations

import statistics

import pytest
from mcp import Client

from mcp_server import build_server

MEDIAN_BUDGET = 1_200  # characters of a submit_action reply (DESIGN 8.1)


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
            match_id = state["match_id"]
            assert state["battle_tag"] == "llm-vs-bot" and state["opponent"] == "baseline:greedy"  # facts, once
            assert "state" not in state and "opponent_moves_note" not in state and "codename" not in state
            assert state["board"] and state["legal_actions"] and "next" not in state  # your_turn says it
            assert all(isinstance(move, str) for move in state["opponent_moves"])
            while not state["done"]:
                choice = state["legal_actions"][-1]["action_id"]
                reply = await client.call_tool("submit_action", {"match_id": match_id, "action_id": choice,
                                                                 "rationale": "the last legal action"})
                sizes.append(len(reply.content[0].text))
                state = reply.structured_content["result"]
                assert not {"state", "battle_tag", "match_id", "to_move", "your_move"} & set(state)
                assert "the last legal action" not in reply.content[0].text  # the caller's own text
                assert all(isinstance(move, str) for move in state["opponent_moves"])
                assert state["board"] and (state["legal_actions"] or not state["your_turn"])
                assert ("next" in state) == (not state["your_turn"])  # only when it is not simply your move
            assert "finish_battle" in state["next"] and state["winner"] in (0, 1, 2)
            await client.call_tool("finish_battle", {"match_id": match_id})
        asked = await client.call_tool("start_battle", {"p1_actor_type": "llm", "seed": 4, "view": "player"})
        match_id = asked.structured_content["result"]["match_id"]
        assert asked.structured_content["result"]["state"]["you"]["player"] == 1
        full = (await client.call_tool("submit_action", {"match_id": match_id, "action_id": 0,
                                                         "view": "player"})).structured_content["result"]
        assert full["state"]["you"]["player"] == 1 and "hand" not in full["state"]["opponent"]
        advanced = (await client.call_tool("advance_bot", {"match_id": match_id})).structured_content["result"]
        assert "state" not in advanced and advanced["board"] == full["board"]  # nothing to move: the same board
    assert statistics.median(sizes) <= MEDIAN_BUDGET, statistics.median(sizes)
