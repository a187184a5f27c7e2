"""An LLM judging over MCP (issue 30): the real server over stdio gives a task from a pool,
records the judgment as kind ``llm`` under a pseudonym, refuses a second answer and a task it
never gave, and lists what the judge itself judged (never another judge's answers); a gold task's reply is shaped like any other's and the
judge-quality tool reports the judge (issue 54)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from extrarlhf.datasets import materialize_v5_dataset
from extrarlhf.preferences import create_preference_pool
from extrarlhf.preferences.gold import read_gold
from extrarlhf.runtime.series import run_series
from tests.mcp_helpers import Checked, stdio_params


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_an_llm_judges_a_pool_over_stdio(tmp_path: Path) -> None:
    sessions, datasets, prefs = tmp_path / "sessions", tmp_path / "datasets", tmp_path / "preferences"
    run_series(sessions, "g", 10, p1_model="search:baseline:greedy?sims=2", opponent="baseline:greedy", seed=2)
    materialize_v5_dataset("g", "g", sessions_dir=sessions, datasets_dir=datasets)
    create_preference_pool("p", "g", n_tasks=3, datasets_dir=datasets, preferences_dir=prefs)
    made = create_preference_pool("gp", "g", n_tasks=16, gold_share=0.5, datasets_dir=datasets, preferences_dir=prefs)
    assert made["gold"] >= 4
    params = stdio_params(sessions, "--datasets-dir", str(datasets), "--preferences-dir", str(prefs))
    async with Client(params) as client:
        c = Checked(client)
        got = await c.ok("preference_task", {"pool": "p", "judge": "model-x"})
        task = got["task"]
        assert got["judge"].startswith("judge-") and "model-x" not in str(got)
        assert task["A"] != task["B"] and "your board" in task["board"]
        again = await c.ok("preference_task", {"pool": "p", "judge": "model-x"})
        assert again["resumed"] is True and again["task"]["task_id"] == task["task_id"]
        bad = await c.err("submit_preference", {"pool": "p", "task_id": "t-unknown", "judge": "model-x",
                                                "choice": "A"}, code="invalid_argument")
        assert "was not given to this judge" in bad["message"]
        done = await c.ok("submit_preference", {"pool": "p", "task_id": task["task_id"], "judge": "model-x",
                                                "choice": "B", "reason": "keeps the board"})
        assert done["recorded"] is True
        await c.err("submit_preference", {"pool": "p", "task_id": task["task_id"], "judge": "model-x",
                                          "choice": "A"}, code="already_judged")
        await c.err("submit_preference", {"pool": "p", "task_id": task["task_id"], "judge": "model-x",
                                          "choice": "C"})
        listed = await c.ok("list_preferences", {"pool": "p", "judge": "model-x"})
        assert listed["judgments"] == 1 and listed["totals"]["judge_kind"] == {"llm": 1}
        assert listed["items"][0]["reason"] == "keeps the board" and listed["items"][0]["choice"] == "B"
        assert listed["judge"] == done["judge"] and listed["yours"] == 1 and "model-x" not in json.dumps(listed)
        # another judge cannot read the answer to copy it (issue 54)
        seen = await c.ok("list_preferences", {"pool": "p", "judge": "model-z"})
        assert seen["judgments"] == 1 and seen["judges"] == 1
        assert seen["items"] == [] and seen["yours"] == 0 and seen["totals"] == {"choice": {}, "judge_kind": {}}
        assert "keeps the board" not in json.dumps(seen) and done["judge"] not in json.dumps(seen)
        await c.err("list_preferences", {"pool": "p"}, code="invalid_argument")  # the judge is required
        # a gold task's reply is shaped like any other's and says nothing of gold (issue 54)
        gold = read_gold(prefs / "gp")
        replies = []
        for _ in range(8):
            got = await c.ok("preference_task", {"pool": "gp", "judge": "model-y"})
            replies.append((got["task"]["task_id"] in gold, got))
            await c.ok("submit_preference", {"pool": "gp", "task_id": got["task"]["task_id"], "judge": "model-y",
                                             "choice": "A"})
        assert {g for g, _ in replies} == {True, False}
        assert len({(tuple(sorted(r)), tuple(sorted(r["task"]))) for _, r in replies}) == 1
        assert all("gold" not in json.dumps(r).lower() for _, r in replies)
        listed = await c.ok("list_preferences", {"pool": "gp", "judge": "model-y"})
        assert "gold" not in json.dumps(listed).lower() and "source" not in listed["totals"]
        judges = await c.ok("preference_judges", {"pool": "gp"})
        row = judges["judges"][0]
        assert row["judgments"] == 8 and row["gold_answered"] == 2 and row["kind"] == "llm"
        assert set(judges["krippendorff_alpha"]) == {"all", "kept"} and "model-y" not in json.dumps(judges)
        missing = await c.err("preference_task", {"pool": "nope", "judge": "model-x"}, code="not_found")
        assert "create it with create_preference_pool" in missing["message"]
    for path in (prefs / "p").iterdir():
        assert b"model-x" not in path.read_bytes()
