"""What one arena server allows and where it writes: :class:`ArenaConfig` and :func:`check_bind`.

The server binds to the loopback interface by default. Any other host exposes it to a
network, so it is refused unless an access token is given (``--token`` or
``RLHF_ARENA_TOKEN``); with a token, every request must carry it once (``?token=...``, then
the signed session cookie). The cookie secret comes from ``RLHF_ARENA_SECRET`` or is drawn
per server start (cookies then do not survive a restart, which is what a local arena wants).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from extrarlhf.core.errors import InvalidArgument

TOKEN_ENV = "RLHF_ARENA_TOKEN"
SECRET_ENV = "RLHF_ARENA_SECRET"
PSEUDONYM_KEY_ENV = "RLHF_ARENA_PSEUDONYM_KEY"
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = ("localhost",)


@dataclass(frozen=True)
class ArenaConfig:
    sessions_dir: Path = Path("sessions")
    checkpoints_dir: Path = Path("checkpoints")
    preferences_dir: Path = Path("preferences")  # the preference pools judged at /judge
    token: str | None = None  # required on every request when set
    secret: str = field(default_factory=lambda: os.environ.get(SECRET_ENV) or secrets.token_urlsafe(32))
    # the key of the players' pseudonyms: stable across restarts only when RLHF_ARENA_PSEUDONYM_KEY is set
    pseudonym_key: bytes = field(default_factory=lambda: (os.environ.get(PSEUDONYM_KEY_ENV) or "").encode()
                                 or secrets.token_bytes(32))
    max_body_bytes: int = 16 * 1024  # a move form is well under 5 KiB (a rationale is at most 4,000 chars)
    max_live_per_session: int = 3  # live (unfinished) matches one browser may hold
    max_live: int = 64  # live matches of the whole server
    max_kept_per_session: int = 20  # finished matches a browser keeps (their end and replay pages)
    worker_threads: int = 4  # matches' moves computed at once (the rest wait)

    def __post_init__(self) -> None:
        if self.token is not None and len(self.token) < MIN_TOKEN_CHARS:
            raise InvalidArgument(f"the arena access token must be at least {MIN_TOKEN_CHARS} characters (draw one "
                                  f"with: python -c 'import secrets; print(secrets.token_urlsafe(24))')")


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback ``host`` without an access token."""
    if not is_loopback(host) and not token:
        raise InvalidArgument(f"--host {host} exposes the arena beyond this machine: give an access token too "
                              f"(--token or {TOKEN_ENV}); every request must then carry it")
