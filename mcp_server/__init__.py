"""ExtraRLHF MCP stdio server (``python -m mcp_server``): a thin facade over ``extrarlhf``.

See DESIGN section 8 for the contract. Modules:

- app.py         the server class: argument guards, envelopes, the long-work pool, stdio
- server.py      ``build_server`` and the battle, campaign, session and model tools
- tools_datasets.py, tools_training.py, tools_production.py, tools_preferences.py  the other tool families (each
                 a ``register(server)``; none imports server.py)
- envelope.py    the one result shape;  guards.py  unknown and forbidden arguments
- cancel.py      the bounded long-work pool;  drain.py  the end of input;  limits.py  the flags
- transport.py, conformance.py  stdio on pipes, and answers to malformed JSON-RPC
- paging.py, progress.py  paged results, progress notifications
- resources.py   the resources (extrarlhf://rules, cards, data-format) and the prompts

The names below are imported lazily, so ``python -m mcp_server`` without the ``mcp`` extra gets
one line naming it (``__main__.py``), not a traceback.
"""

from __future__ import annotations

from extrarlhf.core.lazy import lazy_exports

_EXPORTS = {"ExtraRLHFServer": "app", "ServerConfig": "app", "ENVELOPE_SCHEMA": "envelope", "build_server": "server"}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)
