"""The real MCP server with every tool body replaced by an echo of the arguments it received.

``python -m tests.mcp_server.echo_server --sessions-dir DIR`` serves it over stdio: the same
``build_server`` (guards, argument validation, envelopes), the same transport and SDK; only
the bodies differ. Each call answers ``{"tool", "received": {name: {"type", "value"}}}`` with
the Python type and value the body was called with, which is exactly what the real body would
have handed to the core. :func:`install_echo` does the same to an in-process server.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from mcp_server.envelope import success


def _received(accepted: tuple[str, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    return {name: {"type": type(value).__name__, "value": value} for name, value in kwargs.items()
            if name in accepted}


def install_echo(server: Any) -> Any:
    """Replace every tool body of ``server`` (an ExtraRLHFServer) by an echo; returns it."""
    for name, accepted in server.accepted.items():
        tool = server._tool_manager.get_tool(name)
        if tool.is_async:
            async def body(*, _name: str = name, _accepted: tuple[str, ...] = accepted, **kwargs: Any) -> Any:
                return success({"tool": _name, "received": _received(_accepted, kwargs)})
        else:
            def body(*, _name: str = name, _accepted: tuple[str, ...] = accepted, **kwargs: Any) -> Any:
                return success({"tool": _name, "received": _received(_accepted, kwargs)})
        tool.fn = body
    return server


def main(argv: list[str] | None = None) -> int:
    from mcp_server.__main__ import parse_args
    from mcp_server.server import build_server

    args = parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level, force=True)
    server = install_echo(build_server(args.sessions_dir, args.datasets_dir, args.checkpoints_dir))
    server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
