"""The dataset-plane MCP tools, in process: a real series -> materialize -> validate ->
readiness -> splits -> promote, with progress notifications, confinement and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from mcp_server import build_server
from tests.mcp_helpers import Checked


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_dataset_tools_end_to_end(tmp_path: Path) -> None:
    server = build_server(tmp_path / "sessions", tmp_path / "datasets", tmp_path / "checkpoints")
    progress: list[tuple[float, float | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total))

    async with Client(server) as client:
        c = Checked(client)
        await c.ok("run_series", {"group": "g1", "n_battles": 6, "p1_model": "baseline:greedy",
                                  "opponent": "baseline:random"})
        made = await c.ok("materialize_v5_dataset", {"groups": ["g1"], "name": "v5a"},
                          progress_callback=on_progress)
        assert made["dataset_id"].startswith("v5a")
        assert progress and progress[-1][0] == progress[-1][1], progress
        assert (await c.ok("validate_dataset", {"dataset": "v5a"}))["valid"] is True
        listed = await c.ok("list_datasets")
        assert "v5a" in str(listed)
        inspected = await c.ok("inspect_dataset", {"dataset": "v5a"})
        assert inspected["dataset_id"] == made["dataset_id"] and inspected["manifest"]["kind"] == made["kind"]
        readiness = await c.ok("dataset_readiness", {"group": "g1"})
        assert readiness["training_ready_scope"] == "v5_policy_only"
        assert readiness["metronome_ready"] is False and readiness["timestamp_ready"] is False
        assert readiness["training_ready_standard"] is False and readiness["standard_readiness_blockers"]
        refused = await c.err("split_v5_training_dataset", {"dataset": "v5a"})
        assert "need 20" in refused["message"]  # 6 battles: not ready under the default policy
        small = {"min_v5_battles": 1, "min_v5_decisions": 1, "min_nemesis_lite_battles": 1,
                 "min_nemesis_lite_decks": 1}
        split = await c.ok("split_v5_training_dataset", {"dataset": "v5a", "fractions": [0.5, 0.25, 0.25],
                                                         "policy": small})
        assert split["dataset_id"]
        lite = await c.ok("split_nemesis_training_dataset", {"dataset": "v5a", "view": "lite", "policy": small})
        assert lite["split"]["group_key"] == "battle" and lite["split"]["battles_straddling_splits"] == 0
        by_deck = await c.ok("split_nemesis_training_dataset", {"dataset": "v5a", "view": "lite", "policy": small,
                                                                "name": "v5a-by-deck", "group_by": "opponent_deck"})
        assert by_deck["split"]["group_key"] == "opponent deck"
        bad = await c.err("split_nemesis_training_dataset", {"dataset": "v5a", "group_by": "deck", "name": "v5a-bad"})
        assert bad["code"] == "invalid_argument" and "group_by" in bad["message"]
        standard = await c.err("split_nemesis_training_dataset", {"dataset": "v5a", "view": "standard"})
        assert "human" in standard["message"].lower()
        promoted = await c.ok("promote_dataset", {"dataset": "v5a", "pointer": "current"})
        assert promoted
        assert (await c.ok("validate_dataset", {"dataset": "@current"}))["valid"] is True
        # confinement and refusals: nothing is written outside the datasets dir
        await c.err("materialize_v5_dataset", {"groups": ["g1"], "name": "../escape"})
        await c.err("inspect_dataset", {"dataset": "/etc/passwd"})
        again = await c.err("materialize_v5_dataset", {"groups": ["g1"], "name": "v5a", "version": 1})
        assert again["code"] == "invalid_argument"  # unknown argument 'version' is refused by the guard
        await c.err("materialize_v5_dataset", {"groups": ["nope"], "name": "v5b"}, "not_found")
    assert not (tmp_path / "escape").exists()
    assert {p.name for p in tmp_path.iterdir()} <= {"checkpoints", "datasets", "sessions"}
