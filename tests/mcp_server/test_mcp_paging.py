"""Paging of every list/inspect tool: with a 1,000-battle session group (plus many small
groups, dataset versions, checkpoints, live matches, codename leases and a long promotion
history), the largest DEFAULT result of each tool stays under a budget well below what a
client accepts (~25,000 tokens), and paging through with cursors returns every item exactly
once. Cursors are bound to their call and refused elsewhere."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from mcp import Client

from extrarlhf import datasets
from extrarlhf.checkpoints.registry import CheckpointRegistry
from extrarlhf.policies import promotion
from extrarlhf.runtime import codenames
from extrarlhf.runtime.series import run_series
from extrarlhf.runtime.sessions import SessionStore
from mcp_server import build_server, paging
from mcp_server.paging import MAX_LIMIT
from tests import onnx_factory
from tests.mcp_helpers import Checked, stdio_params

BUDGET_CHARS = 60_000  # ~15,000 tokens: well under the ~25,000-token limit of a client such as Claude Code
BIG = "big"
N_BIG = 1000
N_SMALL = 150
N_MULTI = 60
N_TINY_VERSIONS = 60
N_CHECKPOINTS = 120
N_CODENAMES = 150
N_BIG_LEASES = 30
N_MATCHES = 130
N_HISTORY = 1000


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("paging")
    sessions, data, checkpoints = root / "sessions", root / "datasets", root / "checkpoints"
    result = run_series(sessions, BIG, N_BIG, p1_model="baseline:random", opponent="baseline:random", seed=0,
                        max_workers=2, checkpoints_dir=checkpoints)
    assert result["summary"]["by_status"]["finished"] == N_BIG
    small = [f"small-{i:03d}" for i in range(N_SMALL)]
    for i, group in enumerate(small):
        run_series(sessions, group, 1, p1_model="baseline:random", opponent="baseline:random", seed=i,
                   checkpoints_dir=checkpoints)
    datasets.materialize_v5_dataset([BIG, *small[:N_MULTI]], "multi", sessions_dir=sessions, datasets_dir=data)
    for i in range(N_TINY_VERSIONS):
        datasets.materialize_v5_dataset([small[i]], "tiny", sessions_dir=sessions, datasets_dir=data)
    datasets.promote_dataset("tiny/v3", "tiny-best", datasets_dir=data)
    datasets.promote_dataset("multi", "multi-best", datasets_dir=data)
    model = onnx_factory.save(onnx_factory.v5_model(), root / "v5.onnx")
    registry = CheckpointRegistry(checkpoints)
    for i in range(N_CHECKPOINTS):
        registry.register(f"ck-{i:03d}", model, None)
    for i in range(N_CODENAMES):
        codenames.claim(sessions, f"Worker{i:03d}", small[i % N_SMALL])
    for i in range(N_BIG_LEASES):
        codenames.claim(sessions, f"Big{i:02d}", BIG)
    return {"root": root, "sessions": sessions, "datasets": data, "checkpoints": checkpoints, "small": small}


@pytest.fixture(scope="module")
def server(world):
    return build_server(world["sessions"], world["datasets"], world["checkpoints"])


@pytest.fixture
def long_history(monkeypatch):
    """promotion_status with a long history (the MCP layer pages whatever the core returns)."""
    real = promotion.promotion_status
    events = [{"event": "promote" if i % 2 == 0 else "rollback", "sequence": i, "name": f"ck-{i % 7:03d}",
               "at": f"2026-11-{1 + i % 28:02d}T00:00:00Z",
               "pointer": {"name": f"ck-{i % 7:03d}", "weights_hash": f"{i:064x}", "benchmark": f"b{i:08d}"}}
              for i in range(N_HISTORY)]

    def fake(checkpoints_dir: Any = "checkpoints", **kw: Any) -> dict[str, Any]:
        return {**real(checkpoints_dir, **kw), "history": events}

    monkeypatch.setattr(promotion, "promotion_status", fake)
    return events


async def _start_matches(c: Checked, n: int) -> list[str]:
    ids = []
    for i in range(n):
        started = await c.ok("start_battle", {"p1_actor_type": "llm", "opponent": "baseline:random",
                                              "group": "live-matches", "seed": i})
        ids.append(started["match_id"])
    return ids


async def _text(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text[:500]
    return result.content[0].text, result.structured_content["result"]


async def _page_through(c: Checked, tool: str, arguments: dict[str, Any],
                        ids: Callable[[dict[str, Any]], list[Any]], limit: int | None) -> tuple[list[Any], int]:
    """Every id over every page; checks the paging fields of each page."""
    seen: list[Any] = []
    cursor = None
    pages = 0
    total = None
    while True:
        args = dict(arguments)
        if limit is not None:
            args["limit"] = limit
        if cursor is not None:
            args["cursor"] = cursor
        page = await c.ok(tool, args)
        pages += 1
        got = ids(page)
        assert page["returned"] == len(got) >= 1 or page["total"] == 0
        assert page["returned"] <= page["limit"] == (limit or page["limit"])
        assert total is None or page["total"] == total
        total = page["total"]
        seen += got
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert pages < 10_000
    assert len(seen) == total
    return seen, pages


def _dataset_rows(page: dict[str, Any]) -> list[tuple[str, int]]:
    return [(d["name"], v["version"]) for d in page["datasets"] for v in d["versions"]]


@pytest.mark.anyio
async def test_largest_default_results_stay_under_the_budget(server, world, long_history):
    async with Client(server) as client:
        c = Checked(client)
        await _start_matches(c, N_MATCHES)
        battle_id = SessionStore(world["sessions"]).read_catalog(BIG)[-1]["battle_id"]
        calls = [
            ("list_sessions", {}), ("inspect_session", {"group": BIG}), ("series_status", {"group": BIG}),
            ("replay_battle", {"group": BIG, "battle_id": battle_id}), ("list_matches", {}), ("list_codenames", {}),
            ("list_models", {}), ("list_datasets", {}), ("inspect_dataset", {"dataset": "multi"}),
            ("inspect_dataset", {"dataset": "tiny"}), ("validate_dataset", {"dataset": "multi"}),
            ("dataset_readiness", {"group": BIG}), ("dataset_readiness", {"dataset": "multi"}),
            ("promotion_status", {}), ("inspect_model", {"name": "ck-000"}),
        ]
        sizes = {}
        for tool, arguments in calls:
            text, result = await _text(client, tool, arguments)
            sizes[f"{tool} {arguments}"] = len(text)
            assert len(text) < BUDGET_CHARS, (tool, len(text))
            if "next_cursor" in result and arguments.get("dataset") != "tiny":  # more than one default page
                assert result["next_cursor"] is not None and result["total"] > result["returned"], tool
        # the biggest page a caller may ask for is bounded too: the page stops early by size
        text, result = await _text(client, "inspect_session", {"group": BIG, "limit": MAX_LIMIT})
        assert len(text) < BUDGET_CHARS and result["returned"] < MAX_LIMIT and result["next_cursor"]
        for tool in ("list_sessions", "list_models", "list_codenames", "list_matches", "list_datasets",
                     "promotion_status"):
            text, _ = await _text(client, tool, {"limit": MAX_LIMIT})
            assert len(text) < BUDGET_CHARS, (tool, len(text))
    print(json.dumps(sizes, indent=1))


@pytest.mark.anyio
@pytest.mark.parametrize("limit", [None, 7, MAX_LIMIT])
async def test_paging_returns_every_item_exactly_once(server, world, long_history, limit):
    store = SessionStore(world["sessions"])
    async with Client(server) as client:
        c = Checked(client)
        live = set((await _page_through(c, "list_matches", {}, lambda p: [m["match_id"] for m in p["matches"]],
                                        MAX_LIMIT))[0])  # a page stops at its size budget: page through
        if len(live) < N_MATCHES:
            live |= set(await _start_matches(c, N_MATCHES - len(live)))

        seen, _ = await _page_through(c, "list_sessions", {}, lambda p: [g["group"] for g in p["groups"]], limit)
        assert seen == store.list_groups() and len(seen) > N_SMALL

        seen, pages = await _page_through(c, "inspect_session", {"group": BIG},
                                          lambda p: [e["battle_id"] for e in p["catalog"]], limit)
        assert seen == [e["battle_id"] for e in store.read_catalog(BIG)] and len(seen) == N_BIG and pages > 2

        seen, _ = await _page_through(c, "list_matches", {}, lambda p: [m["match_id"] for m in p["matches"]], limit)
        assert sorted(seen) == seen and set(seen) == live and len(seen) == len(live) >= N_MATCHES

        seen, _ = await _page_through(c, "list_codenames", {}, lambda p: [x["codename"] for x in p["leases"]], limit)
        assert seen == [f"Big{i:02d}" for i in range(N_BIG_LEASES)] + [f"Worker{i:03d}" for i in range(N_CODENAMES)]

        seen, _ = await _page_through(c, "list_models", {}, lambda p: [x["name"] for x in p["checkpoints"]], limit)
        assert seen == [f"ck-{i:03d}" for i in range(N_CHECKPOINTS)]

        seen, _ = await _page_through(c, "list_datasets", {}, _dataset_rows, limit)
        listing = datasets.list_datasets(datasets_dir=world["datasets"])
        assert seen == [(d["name"], v["version"]) for d in listing["datasets"] for v in d["versions"]]
        assert len(seen) == N_TINY_VERSIONS + 1

        sources = datasets.inspect_dataset("multi", datasets_dir=world["datasets"])["manifest"]["sources"]["groups"]
        seen, _ = await _page_through(c, "inspect_dataset", {"dataset": "multi"},
                                      lambda p: [g["group"] for g in p["manifest"]["sources"]["groups"]], limit)
        assert seen == [g["group"] for g in sources] and len(seen) == N_MULTI + 1

        seen, _ = await _page_through(c, "promotion_status", {}, lambda p: [e["sequence"] for e in p["history"]], limit)
        assert seen == list(range(N_HISTORY))


@pytest.mark.anyio
async def test_pages_carry_their_context(server, world):
    async with Client(server) as client:
        c = Checked(client)
        # list_datasets: a dataset spanning pages says how many versions it has; pointers follow their dataset
        first = await c.ok("list_datasets", {"limit": 5})
        names = [d["name"] for d in first["datasets"]]
        assert names == ["multi", "tiny"] and first["total"] == N_TINY_VERSIONS + 1
        tiny = first["datasets"][1]
        assert tiny["versions_total"] == N_TINY_VERSIONS and len(tiny["versions"]) == 4
        assert {p["pointer"] for p in first["pointers"]} == {"multi-best", "tiny-best"}
        second = await c.ok("list_datasets", {"limit": 5, "cursor": first["next_cursor"]})
        assert [d["name"] for d in second["datasets"]] == ["tiny"]
        assert [v["version"] for v in second["datasets"][0]["versions"]] == [5, 6, 7, 8, 9]
        assert {p["pointer"] for p in second["pointers"]} == {"tiny-best"}
        # inspect_dataset: sources_current follows the page of source groups; versions are capped
        page = await c.ok("inspect_dataset", {"dataset": "multi", "limit": 3})
        groups = [g["group"] for g in page["manifest"]["sources"]["groups"]]
        assert groups == [BIG, "small-000", "small-001"]
        assert [s["group"] for s in page["sources_current"]] == groups
        assert all(s["state"] == "unchanged" for s in page["sources_current"])
        tiny = await c.ok("inspect_dataset", {"dataset": "tiny"})
        assert tiny["versions_total"] == N_TINY_VERSIONS and tiny["versions"][-1] == f"tiny/v{N_TINY_VERSIONS}"
        assert len(tiny["versions"]) < N_TINY_VERSIONS
        # list_models: specs are the baselines and the page's checkpoints
        models = await c.ok("list_models", {"limit": 3})
        assert models["specs"] == models["baselines"] + ["ck-000", "ck-001", "ck-002"]
        assert models["total"] == N_CHECKPOINTS and models["returned"] == 3
        # series_status shows the first leases of the group and counts them all
        status = await c.ok("series_status", {"group": BIG})
        assert status["leases_total"] == N_BIG_LEASES and [x["codename"] for x in status["leases"]] == \
            [f"Big{i:02d}" for i in range(20)]
        # inspect_session keeps catalog_total
        session = await c.ok("inspect_session", {"group": BIG})
        assert session["catalog_total"] == session["total"] == N_BIG and session["summary"]["battles"] == N_BIG


@pytest.mark.anyio
async def test_cursors_are_bound_to_their_call_and_never_echoed(server, world):
    async with Client(server) as client:
        c = Checked(client)
        sessions_cursor = (await c.ok("list_sessions", {"limit": 2}))["next_cursor"]
        big_cursor = (await c.ok("inspect_session", {"group": BIG, "limit": 2}))["next_cursor"]
        assert sessions_cursor and big_cursor
        err = await c.err("list_models", {"cursor": sessions_cursor}, "invalid_argument")
        assert sessions_cursor not in json.dumps(err) and "another call" in err["message"]
        err = await c.err("inspect_session", {"group": "small-000", "cursor": big_cursor}, "invalid_argument")
        assert big_cursor not in json.dumps(err)
        for bad in ("not-a-cursor", "c1" + "A" * 40, "c1eyJ0IjoibGlzdF9zZXNzaW9ucyJ9", ""):
            err = await c.err("list_sessions", {"cursor": bad}, "invalid_argument")
            assert (bad not in err["message"]) or not bad
        # a cursor of the right call with another key shape (a number where a group name belongs)
        forged = paging._encode("list_sessions", None, (5,))
        err = await c.err("list_sessions", {"cursor": forged}, "invalid_argument")
        assert "does not fit" in err["message"]
        for bad_limit in (0, MAX_LIMIT + 1, "10", 2.5, True):
            await c.err("list_sessions", {"limit": bad_limit}, "invalid_argument")


@pytest.mark.anyio
async def test_pages_neither_repeat_nor_skip_when_items_are_added_between_calls(tmp_path):
    sessions = tmp_path / "sessions"
    for name in ("g-10", "g-20", "g-30", "g-40", "g-50"):
        run_series(sessions, name, 1, p1_model="baseline:random", opponent="baseline:random",
                   checkpoints_dir=tmp_path / "checkpoints")
    server = build_server(sessions, tmp_path / "datasets", tmp_path / "checkpoints")
    async with Client(server) as client:
        c = Checked(client)
        first = await c.ok("list_sessions", {"limit": 2})
        assert [g["group"] for g in first["groups"]] == ["g-10", "g-20"]
        for name in ("g-05", "g-25"):  # one before the cursor, one after
            run_series(sessions, name, 1, p1_model="baseline:random", opponent="baseline:random",
                       checkpoints_dir=tmp_path / "checkpoints")
        rest = []
        cursor = first["next_cursor"]
        while cursor:
            page = await c.ok("list_sessions", {"limit": 2, "cursor": cursor})
            rest += [g["group"] for g in page["groups"]]
            cursor = page["next_cursor"]
        assert rest == ["g-25", "g-30", "g-40", "g-50"]


@pytest.mark.anyio
async def test_default_pages_over_the_real_stdio_server(world):
    async with Client(stdio_params(world["sessions"], "--datasets-dir", str(world["datasets"]),
                                   "--checkpoints-dir", str(world["checkpoints"]))) as client:
        for tool, arguments in (("inspect_session", {"group": BIG}), ("list_sessions", {}), ("list_models", {}),
                                ("inspect_dataset", {"dataset": "multi"})):
            text, result = await _text(client, tool, arguments)
            assert len(text) < BUDGET_CHARS and result["next_cursor"], tool


def test_benchmark_results_keep_a_bounded_list_of_pair_results():
    from mcp_server.tools_training import MAX_PAIR_RESULTS, bounded_report

    report = {"match": {"pairs": 5000, "pair_results": ["WL"] * 5000}, "report_path": "r.json",
              "baselines": [{"pairs": 20, "pair_results": ["WW"] * 20}]}
    out = bounded_report(report)
    assert len(out["match"]["pair_results"]) == MAX_PAIR_RESULTS and out["match"]["pair_results_total"] == 5000
    assert "report_path" in out["match"]["pair_results_truncated"]
    assert out["baselines"] == report["baselines"] and report["match"]["pair_results"] == ["WL"] * 5000
