"""Bridge from a core progress callback (called in a worker thread) to MCP progress
notifications (sent on the event loop)."""

from __future__ import annotations

import logging
from typing import Callable

import anyio.from_thread
from mcp.server.mcpserver import Context

log = logging.getLogger("mcp_server")


def progress_bridge(ctx: Context, tool: str, unit: str) -> Callable[[int, int], None]:
    """A ``progress(done, total)`` callback for core code running in a worker thread.

    MCP progress must strictly increase, so repeated counts are dropped; a lost notification
    is logged once and never stops the work.
    """
    sent = {"done": 0, "failures": 0}

    def progress(done: int, total: int) -> None:
        if done <= sent["done"]:
            return
        sent["done"] = done
        try:
            anyio.from_thread.run(ctx.report_progress, done, total, f"{done}/{total} {unit}")
        except Exception as exc:  # noqa: BLE001
            if not sent["failures"]:
                log.warning("%s progress notification failed: %s", tool, exc)
            sent["failures"] += 1

    return progress
