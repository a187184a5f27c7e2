"""What a list or inspect call costs an agent by default (issue 27, DESIGN 8.1): on a populated
store (a 45-battle series, two dozen small groups, a dataset with versions, checkpoints, codename
leases and live matches, all made by the real code) every list result stays under 8,000
characters and inspect_session's default (manifest, summary, a short page of catalog rows) under
4,000; the per-battle sha256s come with full=true only. Before: inspect_session's default page
was 25,001 characters on the 45-battle group, list_sessions 9,587 with 24 groups."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from extrarlhf import datasets
from extrarlhf.checkpoints.registry import CheckpointRegistry
from extrarlhf.runtime import codenames
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore
from mcp_server import build_server
from tests import onnx_factory
from tests.mcp_helpers import Checked

LIST_BUDGET = 8_000  # characters of a list tool's default result
INSPECT_BUDGET = 4_000  # characters of inspect_session's default result
BIG, N_BIG, N_SMALL, N_CHECKPOINTS, N_LEASES, N_MATCHES = "big", 45, 24, 20, 45, 60


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("sizes")
    sessions, data, checkpoints = root / "sessions", root / "datasets", root / "checkpoints"
    run_series(sessions, BIG, N_BIG, p1_model="baseline:greedy", opponent="baseline:random", seed=7,
               checkpoints_dir=checkpoints)
    small = [f"small-{i:02d}" for i in range(N_SMALL)]
    for i, group in enumerate(small):
        run_series(sessions, group, 1, p1_model="baseline:random", opponent="baseline:greedy", seed=i,
                   checkpoints_dir=checkpoints)
    for groups in (small[:2], small[2:5]):
        datasets.materialize_v5_dataset(groups, "camp", sessions_dir=sessions, datasets_dir=data)
    datasets.promote_dataset("camp", "camp-best", datasets_dir=data)
    registry = CheckpointRegistry(checkpoints)
    model = onnx_factory.save(onnx_factory.v5_model(), root / "v5.onnx")
    for i in range(N_CHECKPOINTS):
        registry.register(f"policy-{i:02d}", model, None)
    for i in range(N_LEASES):
        codenames.claim(sessions, f"Worker{i:02d}", small[i % N_SMALL])
    return {"sessions": sessions, "datasets": data, "checkpoints": checkpoints}


@pytest.mark.anyio
async def test_default_list_and_inspect_results_fit_their_budgets(store):
    server = build_server(store["sessions"], store["datasets"], store["checkpoints"])
    async with Client(server) as client:
        c = Checked(client)
        for seed in range(N_MATCHES):
            await c.ok("start_battle", {"p1_actor_type": "llm", "group": "live", "seed": seed})
        sizes = {}
        for tool, arguments in [("list_sessions", {}), ("list_matches", {}), ("list_codenames", {}),
                                ("list_models", {}), ("list_datasets", {}), ("promotion_status", {}),
                                ("series_status", {"group": BIG})]:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content[0].text[:300]
            sizes[tool] = len(result.content[0].text)
        assert max(sizes.values()) <= LIST_BUDGET, sizes
        for tool in ("list_sessions", "list_matches", "list_codenames", "list_models"):  # the store fills pages
            page = await c.ok(tool)
            assert page["next_cursor"] is not None and page["returned"] < page["total"], tool

        shown = await client.call_tool("inspect_session", {"group": BIG})
        assert len(shown.content[0].text) <= INSPECT_BUDGET, len(shown.content[0].text)
        page = shown.structured_content["result"]
        assert page["summary"]["battles"] == N_BIG and page["manifest"]["configuration"]["battle_tag"] == "rl-vs-bot"
        assert page["catalog"] and page["next_cursor"] and page["total"] == N_BIG
        assert "files" not in page["catalog"][0] and "seed" not in page["catalog"][0]
        assert set(page["catalog"][0]) >= {"index", "battle_id", "status", "winner", "turns", "decisions", "degraded"}
        full = await c.ok("inspect_session", {"group": BIG, "full": True, "limit": 2})
        stored = SessionStore(store["sessions"]).read_catalog(BIG)[:2]
        assert full["catalog"] == stored and len(full["catalog"][0]["files"]["actions.jsonl"]) == 64  # on request
        rest = await c.ok("inspect_session", {"group": BIG, "cursor": page["next_cursor"]})  # the cursor pages on
        assert rest["catalog"][0]["index"] == page["catalog"][-1]["index"] + 1
