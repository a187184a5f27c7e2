"""ExtraRLHF MCP stdio server (``python -m mcp_server``): a thin facade over ``extrarlhf``.

See :mod:`mcp_server.server` for the tools and DESIGN section 8 for the contract.
"""

from .envelope import ENVELOPE_SCHEMA
from .server import ExtraRLHFServer, ServerConfig, build_server

__all__ = ["ENVELOPE_SCHEMA", "ExtraRLHFServer", "ServerConfig", "build_server"]
