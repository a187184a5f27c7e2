"""``python -m extrarlhf arena``: the arena on uvicorn (``make play``).

:func:`serve` checks the bind (loopback, or a token to expose it) before anything listens,
prints the address to open (with the token once when there is one) and serves until Ctrl-C.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import uvicorn

from .app import build_app
from .config import TOKEN_ENV, ArenaConfig, check_bind

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, sessions_dir: str | os.PathLike[str] = "sessions",
          checkpoints_dir: str | os.PathLike[str] = "checkpoints", token: str | None = None,
          preferences_dir: str | os.PathLike[str] = "preferences") -> int:
    """Serve the arena until interrupted; returns the exit status."""
    token = token or os.environ.get(TOKEN_ENV) or None
    check_bind(host, token)
    config = ArenaConfig(sessions_dir=Path(sessions_dir), checkpoints_dir=Path(checkpoints_dir), token=token,
                         preferences_dir=Path(preferences_dir))
    app = build_app(config)
    shown = f"[{host}]" if ":" in host else host
    where = f"http://{shown}:{port}/" + ("?token=<the token>" if token else "")
    print(f"ExtraRLHF arena on {where} (sessions in {Path(sessions_dir).resolve()}); Ctrl-C stops it",
          file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, server_header=False)
    return 0
