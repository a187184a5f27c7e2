"""What an LLM player reads from the MCP server, in characters; prints one JSON object.

    .venv/bin/python -m benchmarks.mcp_play_budget [--battles 3] [--tree DIR]

Spawns ``python -m mcp_server`` over stdio (the official ``mcp`` client, as an agent calls it)
from ``--tree`` (default: this checkout; another checkout measures another state of the code),
then:

1. reads ``tools/list`` once, measured as tests/mcp_server/test_mcp_listing.py does (the
   compact JSON of the listed tools);
2. records ``--battles`` battles of ``baseline:greedy`` as player 1 against ``baseline:greedy``
   (seeds 1, 2, 3, ...) with ``p1_actor_type='rl'`` and reads player 1's action ids from each
   trace (actions.jsonl);
3. replays each as an ``llm`` battle with the same seed and opponent: ``start_battle``, then
   ``submit_action`` with each recorded action id and a one-sentence rationale
   (``advance_bot`` when a reply says player 2 is to move), then ``finish_battle``; the same
   seed and moves give the same battle, so every recorded id is legal when its turn comes.

A decision costs the text of its reply (``content[0].text``, as
tests/mcp_server/test_mcp_compact_play.py measures; ``structuredContent`` carries the same
JSON). Reported per battle: the start, each move (median, p90, total), the finish and the
battle's total, and over all battles the same plus tools/list + everything (one session).
``actions_sha256`` digests the replayed moves, so two runs can be checked to play the same
battles.

Before and after issue 27, measured here (``git worktree add /tmp/wt-21119e9 21119e9``, then
``python -m benchmarks.mcp_play_budget --tree /tmp/wt-21119e9`` and without ``--tree``: the
same 3 battles, 99 moves, the same actions_sha256): tools/list 122,664 -> 29,437 characters;
a move median 3,472 -> 1,150, p90 4,926 -> 2,171; a start 2,344-2,959 -> 879-1,242; the three
battles 372,893 -> 136,724; the session (tools/list once and the three battles) 495,557 ->
166,161 characters.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
RATIONALE = "Develop the board first and trade only when it keeps my hero safe."
OPPONENT = "baseline:greedy"


def _env(tree: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"), "PYTHONPATH": str(tree)}


def _p90(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def _figures(moves: list[int]) -> dict[str, int | float]:
    return {"moves": len(moves), "median": statistics.median(moves), "p90": _p90(moves), "total": sum(moves)}


class _Session:
    """Tool calls that fail loudly and count what the agent reads."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def call(self, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
        reply = await self.client.call_tool(tool, arguments)
        envelope = json.loads(reply.content[0].text)
        if not envelope["ok"]:
            raise RuntimeError(f"{tool}: {envelope['error']}")
        return envelope["result"], len(reply.content[0].text)


async def _record(session: _Session, seed: int) -> list[int]:
    """Player 1's action ids of a greedy-vs-greedy battle with this seed (from its trace)."""
    started, _ = await session.call("start_battle", {"p1_actor_type": "rl", "p1_model": "baseline:greedy",
                                                     "opponent": OPPONENT, "group": "recorded", "seed": seed})
    done, _ = await session.call("finish_battle", {"match_id": started["match_id"]})
    rows = [json.loads(line) for line in Path(done["paths"]["actions.jsonl"]).read_text().splitlines() if line]
    return [row["action_id"] for row in rows if row["player"] == 1]


async def _replay(session: _Session, seed: int, actions: list[int]) -> dict[str, Any]:
    state, start_chars = await session.call("start_battle", {"p1_actor_type": "llm", "opponent": OPPONENT,
                                                             "group": "replayed", "seed": seed})
    match_id = state["match_id"]
    moves: list[int] = []
    for action_id in actions:
        if state["done"]:
            raise RuntimeError(f"seed {seed}: the battle ended before the recorded moves did (divergence)")
        state, chars = await session.call("submit_action", {"match_id": match_id, "action_id": action_id,
                                                            "rationale": RATIONALE})
        while not state["done"] and not state["your_turn"]:  # player 2 to move, or a paused call
            state, more = await session.call("advance_bot", {"match_id": match_id})
            chars += more
        moves.append(chars)
    if not state["done"]:
        raise RuntimeError(f"seed {seed}: the battle is not over after the recorded moves (divergence)")
    finished, finish_chars = await session.call("finish_battle", {"match_id": match_id})
    return {"seed": seed, "winner": finished["result"]["winner"], "start": start_chars,
            "per_move": _figures(moves), "finish": finish_chars,
            "battle_total": start_chars + sum(moves) + finish_chars, "_moves": moves}


async def measure(tree: Path, battles: int, sessions_dir: Path) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable, cwd=str(tree), env=_env(tree),
                                   args=["-m", "mcp_server", "--sessions-dir", str(sessions_dir)])
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        listing = json.dumps({"tools": [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]},
                             separators=(",", ":"), ensure_ascii=False)
        session = _Session(client)
        recorded = {seed: await _record(session, seed) for seed in range(1, battles + 1)}
        played = [await _replay(session, seed, actions) for seed, actions in recorded.items()]
    moves = [chars for battle in played for chars in battle.pop("_moves")]
    battles_total = sum(battle["battle_total"] for battle in played)
    digest = hashlib.sha256(json.dumps(list(recorded.values())).encode()).hexdigest()
    return {"tools": len(tools), "tools_list_chars": len(listing), "battles": played,
            "per_move": _figures(moves), "battles_total": battles_total,
            "session_total": len(listing) + battles_total, "actions_sha256": digest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--battles", type=int, default=3, help="battles recorded and replayed (default 3)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose server is measured")
    args = parser.parse_args()
    tree = args.tree.resolve()
    with tempfile.TemporaryDirectory(prefix="extrarlhf-play-budget-") as tmp:
        figures = anyio.run(measure, tree, args.battles, Path(tmp) / "sessions")
    print(json.dumps({"benchmark": "mcp_play_budget", "tree": str(tree), "opponent": OPPONENT,
                      "player_1_moves": "recorded baseline:greedy moves, replayed as an llm player",
                      "unit": "characters of JSON text the client receives", **figures}, indent=2))


if __name__ == "__main__":
    main()
