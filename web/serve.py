"""``python -m extrarlhf arena``: the arena on uvicorn (``make play``).

:func:`serve` checks the bind (loopback, or a token to expose it) before anything listens,
registers the shipped champion when the registry lacks it (extrarlhf.policies.champion), prints
the address to open (with the token once when there is one) and serves until Ctrl-C.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import uvicorn

from extrarlhf.core.errors import RLHFError
from extrarlhf.policies.champion import ensure_champion

from .app import build_app
from .config import PSEUDONYM_KEY_ENV, TOKEN_ENV, ArenaConfig, check_bind
from .security import header_timeout_protocol

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def _register_champion(checkpoints_dir: str | os.PathLike[str]) -> None:
    """The shipped champion is offered first in the lobby: register it in this registry when it
    is missing (``make setup`` does the same for ``checkpoints/``); a refusal is one line, not a
    reason not to serve."""
    try:
        report = ensure_champion(checkpoints_dir)
    except (RLHFError, OSError) as exc:
        print(f"warning: the shipped champion could not be registered in {checkpoints_dir}: {exc}", file=sys.stderr,
              flush=True)
        return
    if report["state"] != "present":
        print(f"champion: {report['message']}", file=sys.stderr, flush=True)


def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, sessions_dir: str | os.PathLike[str] = "sessions",
          checkpoints_dir: str | os.PathLike[str] = "checkpoints", token: str | None = None,
          preferences_dir: str | os.PathLike[str] = "preferences", idle_timeout_s: float | None = None,
          starts_per_minute: int | None = None, free_text: bool | None = None) -> int:
    """Serve the arena until interrupted; returns the exit status."""
    token = token or os.environ.get(TOKEN_ENV) or None
    check_bind(host, token)
    extra: dict = {}
    if idle_timeout_s is not None:
        extra["idle_timeout_s"] = idle_timeout_s
    if starts_per_minute is not None:
        extra.update(starts_per_window=starts_per_minute, start_window_s=60.0)
    if free_text is not None:
        extra["record_free_text"] = free_text
    config = ArenaConfig(sessions_dir=Path(sessions_dir), checkpoints_dir=Path(checkpoints_dir), token=token,
                         preferences_dir=Path(preferences_dir), **extra)
    _register_champion(checkpoints_dir)
    app = build_app(config)
    if not os.environ.get(PSEUDONYM_KEY_ENV):
        print(f"warning: {PSEUDONYM_KEY_ENV} is not set: the players' pseudonym key is drawn for this start only, "
              f"so a player's name gets a new pseudonym after every restart", file=sys.stderr, flush=True)
    shown = f"[{host}]" if ":" in host else host
    where = f"http://{shown}:{port}/" + ("?token=<the token>" if token else "")
    print(f"ExtraRLHF arena on {where} (sessions in {Path(sessions_dir).resolve()}); Ctrl-C stops it",
          file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, server_header=False,
                http=header_timeout_protocol(config.header_timeout_s))
    return 0
