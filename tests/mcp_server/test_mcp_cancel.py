"""A cancelled MCP request stops its work (issue 13, item 1): the client cancels a running
run_series over stdio; the series stops at a chunk boundary, its codename lease is released,
the group is left resumable, and the server keeps answering."""

from __future__ import annotations

import time

import anyio
import pytest
from mcp import Client

from ..mcp_helpers import Checked, stdio_params


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _catalog_lines(path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.anyio
async def test_cancelling_run_series_stops_it_and_releases_the_lease(tmp_path):
    sessions = tmp_path / "sessions"
    catalog = sessions / "long" / "catalog.jsonl"
    async with Client(stdio_params(sessions)) as client:
        c = Checked(client)
        seen = anyio.Event()

        async def on_progress(done, total, message):
            if done >= 32:
                seen.set()

        async with anyio.create_task_group() as group:
            async def call() -> None:
                await client.call_tool("run_series", {"group": "long", "n_battles": 3000, "p1_model": "baseline:random",
                                                      "opponent": "baseline:random", "max_workers": 2,
                                                      "codename": "Canceller"}, progress_callback=on_progress)
                raise AssertionError("the series ran to its end although it was cancelled")

            group.start_soon(call)
            with anyio.fail_after(120):
                await seen.wait()
            group.cancel_scope.cancel()  # the client sends notifications/cancelled

        deadline = time.monotonic() + 20
        while (await c.ok("list_codenames"))["leases"] and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        assert (await c.ok("list_codenames"))["leases"] == []
        lines = _catalog_lines(catalog)
        await anyio.sleep(1.0)
        assert _catalog_lines(catalog) == lines, "the series went on after the cancellation"
        assert lines < 2 * 3000  # a started and a final line per battle: far from all 3000 battles
        resumed = await c.ok("run_series", {"group": "long", "n_battles": 80, "p1_model": "baseline:random",
                                            "opponent": "baseline:random", "max_workers": 2})
        assert resumed["cancelled"] is False
        assert resumed["summary"]["by_status"]["finished"] >= 80
