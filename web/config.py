"""What one arena server allows and where it writes: :class:`ArenaConfig` and :func:`check_bind`.

The server binds to the loopback interface by default. Any other host exposes it to a
network, so it is refused unless an access token is given (``--token`` or
``RLHF_ARENA_TOKEN``); with a token, every request must carry it once (``?token=...``, then
the signed session cookie). The cookie secret comes from ``RLHF_ARENA_SECRET`` or is drawn
per server start (cookies then do not survive a restart, which is what a local arena wants).
The token must be a random secret (the production salt's entropy rule); admission is tied to
the token in force (the cookie keeps a keyed hash of it), so rotating the token revokes every
admitted browser. Live battles and judge sessions expire after ``idle_timeout_s``; a client
address starts at most ``starts_per_window`` battles per ``start_window_s``; request headers and
bodies time out.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from extrarlhf.core.errors import InvalidArgument
from extrarlhf.production.gate import salt_entropy_problem

TOKEN_ENV = "RLHF_ARENA_TOKEN"
SECRET_ENV = "RLHF_ARENA_SECRET"
PSEUDONYM_KEY_ENV = "RLHF_ARENA_PSEUDONYM_KEY"
FREE_TEXT_ENV = "RLHF_ARENA_FREE_TEXT"  # "0": rationales and reasons are not recorded
MIN_TOKEN_CHARS = 16
DRAW_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
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
    idle_timeout_s: float = 1800.0  # a live battle or a judge session untouched this long expires
    session_max_age_s: int = 12 * 3600  # a session cookie (admission, judge, battles) unused this long is void
    starts_per_window: int = 10  # battles one client address may start per start_window_s
    start_window_s: float = 60.0
    body_timeout_s: float = 15.0  # a request body must arrive within this (408 after)
    header_timeout_s: float = 10.0  # a request's headers must arrive within this (connection closed after)
    record_free_text: bool = field(default_factory=lambda: os.environ.get(FREE_TEXT_ENV, "1") != "0")

    def __post_init__(self) -> None:
        if self.token is not None:
            if not isinstance(self.token, str) or len(self.token) < MIN_TOKEN_CHARS:
                raise InvalidArgument(f"the arena access token must be at least {MIN_TOKEN_CHARS} characters (draw "
                                      f"one with: {DRAW_TOKEN})")
            weak = salt_entropy_problem(self.token.encode("utf-8"))
            if weak is not None:
                raise InvalidArgument(f"the arena access token is not a random secret: it {weak} (the production "
                                      f"salt's rule); draw one with: {DRAW_TOKEN}")
        for name in ("idle_timeout_s", "session_max_age_s", "starts_per_window", "start_window_s", "body_timeout_s",
                     "header_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise InvalidArgument(f"{name} must be a positive number, got {value!r}")


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
