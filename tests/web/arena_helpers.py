"""Shared helpers of the arena tests: a TestClient arena over a temp dir, forms, whole battles,
and the MCP-played trace the arena's traces are compared with."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from starlette.testclient import TestClient

from mcp_server import build_server
from tests.mcp_helpers import Checked, play_to_the_end
from web.app import build_app
from web.config import ArenaConfig

CSRF = re.compile(r'name="csrf" value="([^"]+)"')
DECISION = re.compile(r'name="decision" value="(\d+)"')
ON_CARD = re.compile(r'<button class="act[^"]*" type="submit" name="action_id" value="(\d+)"')


def client(tmp: Path, **config: Any) -> TestClient:
    """A browser session of a fresh arena over ``tmp`` (no server exceptions re-raised: the pages
    are what the tests check)."""
    app = build_app(ArenaConfig(sessions_dir=tmp / "sessions", checkpoints_dir=tmp / "checkpoints", **config))
    return TestClient(app, raise_server_exceptions=False)


def same_arena(other: TestClient) -> TestClient:
    """Another browser (its own cookie jar) on the same arena as ``other``."""
    return TestClient(other.app, raise_server_exceptions=False)


def csrf(c: TestClient) -> str:
    return CSRF.search(c.get("/").text).group(1)


def start(c: TestClient, opponent: str = "baseline:greedy", **fields: str) -> str:
    """Start a battle; returns the match page's path."""
    r = c.post("/start", data={"csrf": csrf(c), "opponent": opponent, **fields}, follow_redirects=False)
    assert r.status_code == 303, r.text[:2000]
    return r.headers["location"]


def move(c: TestClient, path: str, html: str, action_id: str, rationale: str = "") -> Any:
    return c.post(path + "/move", data={"csrf": CSRF.search(html).group(1), "decision": DECISION.search(html).group(1),
                                        "action_id": action_id, "rationale": rationale}, follow_redirects=False)


def play_out(c: TestClient, path: str, pick: int = -1, each: Any = None) -> tuple[str, int]:
    """Play the battle at ``path`` to its end with the on-card buttons (``pick``: which one);
    ``each(html)`` sees every page of player 1's decisions. Returns the end page and the moves."""
    for n in range(2000):
        html = c.get(path).text
        if 'id="play"' not in html:
            return html, n
        if each is not None:
            each(html)
        r = move(c, path, html, ON_CARD.findall(html)[pick], rationale=f"move {n}")
        assert r.status_code == 303, r.text[:2000]
    raise AssertionError("battle not over after 2000 moves")


def trace_files(sessions: Path, group: str) -> dict[str, list[dict[str, Any]]]:
    """The records of the one battle of ``group``: {"meta": [...], "turns": [...], "actions": [...]}."""
    (v5,) = list((sessions / group / "battles").glob("*/v5"))
    return {name: [json.loads(line) for line in (v5 / f"{name}.jsonl").read_text().splitlines() if line]
            for name in ("meta", "turns", "actions")}


def mcp_trace(sessions: Path, group: str = "mcp-human", opponent: str = "baseline:greedy") -> dict[str, list]:
    """A battle played by a human through the MCP server (in process), finished: its trace."""
    async def play() -> None:
        async with Client(build_server(sessions, sessions.parent / "datasets", sessions.parent / "checkpoints")) as cl:
            checked = Checked(cl)
            started = await checked.ok("start_battle", {"p1_actor_type": "human", "opponent": opponent,
                                                        "group": group, "codename": "alice-l2"})
            await play_to_the_end(checked, started["match_id"])
            await checked.ok("finish_battle", {"match_id": started["match_id"]})

    with ThreadPoolExecutor(1) as pool:  # its own thread: Playwright's sync API holds this one's event loop
        pool.submit(anyio.run, play).result()
    return trace_files(sessions, group)
