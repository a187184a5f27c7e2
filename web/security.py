"""Request guards of the arena, as ASGI middleware and helpers.

- :class:`BodyLimit` reads a request body up front and answers 413 (a page) past
  ``max_bytes``, whether the client announced its length or streamed it; the app then reads
  the body from memory; a body that does not arrive within ``timeout_s`` is 408.
- :class:`HeaderTimeoutH11` (the server's protocol, serve.py): a connection whose request
  headers do not arrive within ``header_timeout_s`` is closed.
- :class:`TokenGate` (only when the server has an access token): a request whose session
  cookie is not admitted under the token in force (:func:`admission`, a keyed hash of it) must
  carry ``?token=...``; a right token admits the session and
  redirects to the same URL without it (the token never stays in the address bar or the
  history); anything else is 403.
- :func:`csrf_token` / :func:`check_csrf`: one random token per session, put in every form
  and checked on every POST (constant-time compare).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any, Callable
from urllib.parse import parse_qsl, urlencode

import anyio
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ErrorPage = Callable[[int, str, str], Response]  # (status, title, message) -> the HTML page


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, page: ErrorPage, timeout_s: float = 15.0) -> None:
        self.app, self.max_bytes, self.page, self.timeout_s = app, max_bytes, page, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = self.page(413, "Request too large", f"A request to the arena carries at most {self.max_bytes:,} "
                                                      f"bytes; nothing was played.")
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await too_big(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.timeout_s) as deadline:  # a stalled upload holds nothing for long
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_bytes:
                    await too_big(scope, receive, send)
                    return
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        if deadline.cancelled_caught:
            await self.page(408, "Request timed out", f"The request's body did not arrive within "
                                                      f"{self.timeout_s:g} s; nothing was played.")(scope, receive, send)
            return
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def admission(secret: str, token: str) -> str:
    """What an admitted session keeps: a keyed hash of the token in force (never the token), so a
    new token revokes every browser admitted with the old one."""
    return hmac.new(secret.encode(), b"arena-admission\0" + token.encode(), hashlib.sha256).hexdigest()[:32]


class TokenGate:
    def __init__(self, app: ASGIApp, token: str, page: ErrorPage, secret: str) -> None:
        self.app, self.token, self.page = app, token, page
        self.admitted = admission(secret, token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session = scope["session"]
        held = session.get("admitted")
        if isinstance(held, str) and hmac.compare_digest(held.encode(), self.admitted.encode()):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        given = request.query_params.get("token")
        if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            session["admitted"] = self.admitted
            rest = urlencode([(k, v) for k, v in parse_qsl(request.url.query) if k != "token"])
            await RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), status_code=303)(scope, receive,
                                                                                                      send)
            return
        await self.page(403, "Access token needed", "This arena is shared on a network and needs its access token: "
                                                    "open the link you were given (it ends in ?token=...)."
                        )(scope, receive, send)


def csrf_token(session: dict[str, Any]) -> str:
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(24)
    return session["csrf"]


def check_csrf(session: dict[str, Any], sent: Any) -> bool:
    expected = session.get("csrf")
    return isinstance(sent, str) and expected is not None and hmac.compare_digest(sent.encode(), expected.encode())


def header_timeout_protocol(timeout_s: float) -> type:
    """uvicorn's h11 protocol, closing a connection whose request headers take longer than
    ``timeout_s`` (from the connection or the previous response); uvicorn has no such setting."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutH11(H11Protocol):
        _header_timer: Any = None

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(timeout_s, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE:
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutH11
