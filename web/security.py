"""Request guards of the arena, as ASGI middleware and helpers.

- :class:`BodyLimit` reads a request body up front and answers 413 (a page) past
  ``max_bytes``, whether the client announced its length or streamed it; the app then reads
  the body from memory.
- :class:`TokenGate` (only when the server has an access token): a request whose session
  cookie is not yet admitted must carry ``?token=...``; a right token admits the session and
  redirects to the same URL without it (the token never stays in the address bar or the
  history); anything else is 403.
- :func:`csrf_token` / :func:`check_csrf`: one random token per session, put in every form
  and checked on every POST (constant-time compare).
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any, Callable
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ErrorPage = Callable[[int, str, str], Response]  # (status, title, message) -> the HTML page


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, page: ErrorPage) -> None:
        self.app, self.max_bytes, self.page = app, max_bytes, page

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
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class TokenGate:
    def __init__(self, app: ASGIApp, token: str, page: ErrorPage) -> None:
        self.app, self.token, self.page = app, token, page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session = scope["session"]
        if session.get("admitted"):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        given = request.query_params.get("token")
        if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            session["admitted"] = True
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
