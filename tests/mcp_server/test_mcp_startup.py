"""Start-up (issue 27): ``python -m mcp_server``, spawned as the clients spawn it, answers
``initialize`` and ``tools/list`` without importing onnxruntime, onnx, pyarrow, asyncpg,
pandas or anything heavier; the tools that need them import them when called.

What the child imported is read from its own ``PYTHONPROFILEIMPORTTIME`` report on stderr
(one line per finished import, written as it happens), so the test is deterministic and not
timed; benchmarks/mcp_latency.py measures the time.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from tests import onnx_factory
from tests.mcp_helpers import Checked, stdio_params

# imported only when a tool needs them (the first five) or never by the server (the rest)
LAZY = ("onnxruntime", "onnx", "pyarrow", "asyncpg", "pandas")
NEVER = ("polars", "duckdb", "torch", "dagster")
_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")


@pytest.fixture
def anyio_backend():
    return "asyncio"


def imported(errlog: Path) -> set[str]:
    """The top-level packages the server process has imported so far."""
    return {m.group(1).split(".")[0] for line in errlog.read_text().splitlines() if (m := _IMPORTED.match(line))}


@pytest.mark.anyio
async def test_server_answers_tools_list_before_importing_heavy_modules_and_imports_them_when_a_tool_needs_them(
        tmp_path):
    datasets, checkpoints = tmp_path / "datasets", tmp_path / "checkpoints"
    (checkpoints / "incoming").mkdir(parents=True)
    model = onnx_factory.save(onnx_factory.v5_model(), checkpoints / "incoming" / "v5.onnx")
    params = stdio_params(tmp_path / "sessions", "--datasets-dir", str(datasets), "--checkpoints-dir",
                          str(checkpoints))
    params.env["PYTHONPROFILEIMPORTTIME"] = "1"
    errlog_path = tmp_path / "stderr.log"
    with errlog_path.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            listed = await client.list_tools()  # after initialize, as every client does
            assert "start_battle" in {tool.name for tool in listed.tools}
            at_start = imported(errlog_path)
            assert {"mcp", "mcp_server", "engine"} <= at_start  # the report is read, not empty
            assert sorted(at_start & {*LAZY, *NEVER}) == []

            c = Checked(client)
            entry = await c.ok("register_checkpoint", {"name": "startup-v5", "path": str(model)})
            assert entry["kind"] == "v5" and len(entry["weights_hash"]) == 64
            after_model = imported(errlog_path)
            assert {"onnx", "onnxruntime"} <= after_model  # read, checked and loaded when asked

            listing = await c.ok("list_datasets")
            assert listing["total"] == 0
            assert "pyarrow" in imported(errlog_path)
            assert sorted(imported(errlog_path) & set(NEVER)) == []
