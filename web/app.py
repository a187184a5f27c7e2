"""The arena's web app: :func:`build_app` over an :class:`~web.arena.Arena`.

Each handler parses the request, calls the arena (in a worker thread, under an
:mod:`adapters.work` scope capped at ``MAX_ROLLOUTS_PER_CALL`` like an MCP play call) and renders
a page. Moves are plain HTML forms (POST, then a redirect to the match page), so the page works
with a mouse, with the keyboard alone and without JavaScript. Every refusal and every error is
an HTML page with what happened and where to go (404, 405, 413, 403 for a missing CSRF or
access token, 400/409 for a bad spec, an illegal move, a finished battle, 429 for too many
battles, 500 without the traceback, which goes to the server's log).

``/judge`` is the judging page of the preference data (extrarlhf.preferences.pool): a person
picks a pool, is shown one task at a time (player's board, moves A and B) and answers A, B, tie
or skip with an optional reason. A judge is whom the operator's invite link names
(``preferences invite``: verified with the judges' key) or else their own browser session; the
cookie and the data hold only the keyed pseudonym (kind ``human``), never a name, and no name
typed anywhere claims an arena judge. GET never writes: a task is served by a POST (starting,
answering, "Show me a task"), and a GET shows the judge's pending one. A judge session unused
for ``idle_timeout_s`` forgets its invite. ``/leaderboard/{pool}`` shows the Bradley-Terry
ratings of a pool's ``A vs B`` specs from the kept judgments (extrarlhf.preferences.leaderboard).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from pathlib import Path
from urllib.parse import quote
from typing import Any, Callable

import anyio
import anyio.to_thread
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import engine
from adapters import work
from extrarlhf.core.echo import safe_text
from extrarlhf.core.errors import RLHFError
from extrarlhf.core.work_caps import MAX_ROLLOUTS_PER_CALL
from extrarlhf.policies.champion import CHAMPION_NAME
from extrarlhf.preferences import pool as prefs
from extrarlhf.preferences.judges import VerifiedJudge, arena_judge, redeem_invite
from extrarlhf.preferences.leaderboard import preference_leaderboard, ranks_specs

from .arena import Arena, ArenaError
from .config import ArenaConfig
from .security import BodyLimit, TokenGate, check_csrf, csrf_token
from .views import replay_steps, table

log = logging.getLogger("web")
HERE = Path(__file__).parent
COOKIE = "arena_session"
STATUS_OF = {"unknown_match": 404, "foreign_match": 404, "match_finished": 409, "not_your_turn": 409,
             "stale_page": 409, "group_conflict": 409, "group_busy": 409, "too_many_matches": 429,
             "too_many_starts": 429, "illegal_action": 400, "invalid_argument": 400, "unknown_spec": 400, "not_found": 404,
             "already_judged": 409}
TITLE_OF = {"unknown_match": "Unknown match", "foreign_match": "Unknown match", "match_finished": "This battle is over",
            "not_your_turn": "Not your turn", "stale_page": "This page was out of date",
            "group_conflict": "Group holds other battles", "too_many_matches": "Too many battles",
            "too_many_starts": "Too many battles started",
            "illegal_action": "Illegal move", "unknown_spec": "Unknown opponent", "invalid_argument": "Bad request",
            "not_found": "Not found", "already_judged": "Already judged"}


def _environment() -> Environment:
    return Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
                       trim_blocks=True, lstrip_blocks=True)


def build_app(config: ArenaConfig | None = None) -> Starlette:
    """The ASGI app of one arena server (its own matches, sessions and worker threads)."""
    config = config or ArenaConfig()
    arena = Arena(config)
    env = _environment()
    limiter = anyio.CapacityLimiter(config.worker_threads)

    def render(request: Request | None, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        session = request.session if request is not None else {}
        html = env.get_template(name).render(csrf=csrf_token(session) if request is not None else "",
                                             free_text=config.record_free_text, **context)
        return HTMLResponse(html, status_code=status)

    def page(status: int, title: str, message: str, back: str | None = None,
             request: Request | None = None) -> HTMLResponse:
        return render(request, "error.html", status, status_code=status, title=title, message=message,
                      back=back or "/")

    async def call(fn: Callable[..., Any], *args: Any) -> Any:
        def body() -> Any:
            with work.scope(lambda: False, MAX_ROLLOUTS_PER_CALL):
                return fn(*args)
        return await anyio.to_thread.run_sync(body, limiter=limiter)

    def sid(request: Request) -> str:
        session = request.session
        if "sid" not in session:
            session["sid"] = secrets.token_urlsafe(18)
        return session["sid"]

    async def form(request: Request) -> dict[str, Any]:
        data = await request.form(max_files=0, max_fields=16)
        fields = {key: value for key, value in data.items() if isinstance(value, str)}
        if not check_csrf(request.session, fields.get("csrf")):
            raise ArenaError("the form did not carry this browser session's security token (CSRF): it was sent "
                             "from another page or an expired session; nothing was done. Reload the page and try "
                             "again", "csrf", 403)
        return fields

    # ------------------------------------------------------------------ pages
    async def lobby(request: Request) -> Response:
        opponents = await call(arena.opponents)
        champion = await call(arena.champion)
        chosen = CHAMPION_NAME if champion and CHAMPION_NAME in opponents else "baseline:greedy"
        return render(request, "lobby.html", opponents=opponents, champion=champion, preselected=chosen,
                      matches=arena.matches(sid(request)))

    async def start(request: Request) -> Response:
        fields = await form(request)
        spec = fields.get("custom_spec", "").strip() or fields.get("opponent", "")
        client = request.client.host if request.client else "?"
        played = await call(arena.start, sid(request), spec, fields.get("name"), fields.get("group"), client)
        return RedirectResponse(f"/match/{played.match_id}", status_code=303)

    async def show(request: Request) -> Response:
        played, live = await call(arena.state, sid(request), request.path_params["match_id"])
        if live is None:
            final = table(played.final_view) if played.final_view else None
            return render(request, "end.html", played=played, final=final)
        return render(request, "match.html", played=played, t=table(live["view"], live["legal"]),
                      decision=live["decision"], paused=live["paused"])

    async def move(request: Request) -> Response:
        fields = await form(request)
        match_id = request.path_params["match_id"]
        await call(arena.move, sid(request), match_id, fields.get("action_id"), fields.get("decision"),
                   fields.get("rationale"))
        return RedirectResponse(f"/match/{match_id}", status_code=303)

    async def resume(request: Request) -> Response:
        await form(request)
        match_id = request.path_params["match_id"]
        await call(arena.resume, sid(request), match_id)
        return RedirectResponse(f"/match/{match_id}", status_code=303)

    async def abandon(request: Request) -> Response:
        await form(request)
        match_id = request.path_params["match_id"]
        await call(arena.abandon, sid(request), match_id)
        return RedirectResponse(f"/match/{match_id}", status_code=303)

    async def replay(request: Request) -> Response:
        played = arena.get(sid(request), request.path_params["match_id"])
        if played.live:
            raise ArenaError("the replay opens once the battle is over (it shows both hands)", "match_finished", 409)
        steps = await call(replay_steps, arena.registry.store, played.group, played.battle_id)
        try:
            step = int(request.query_params.get("step", "0"))
        except ValueError:
            step = 0
        step = min(max(step, 0), len(steps) - 1)
        return render(request, "replay.html", played=played, steps=steps, step=step, s=steps[step])

    # ------------------------------------------------------------------ judging (preference data)
    def judge_of(request: Request) -> VerifiedJudge:
        """This browser's judge: the pseudonym its invite admitted (until the judge session is idle
        for ``idle_timeout_s``), else one of its own browser session. Never a typed name."""
        session, now = request.session, time.time()
        invited = session.get("judge")
        if isinstance(invited, str) and now - float(session.get("judge_seen", 0)) <= config.idle_timeout_s:
            session["judge_seen"] = now
            return VerifiedJudge(invited)
        session.pop("judge", None)
        session.pop("judge_seen", None)
        return arena_judge(config.preferences_dir, f"browser-{sid(request)}")

    def pool_path(pool: str) -> str:
        return f"/judge/{quote(pool, safe='')}"

    async def judging(request: Request) -> Response:
        pools = await call(prefs.list_pools, config.preferences_dir)
        judge_of(request)  # an idle judge session is forgotten here too
        ranked = [p["pool"] for p in pools if any(ranks_specs(s) for s in p["sources"])]
        return render(request, "judge_lobby.html", pools=pools, ranked=ranked,
                      invited=bool(request.session.get("judge")))

    async def judge_invite(request: Request) -> Response:
        judge = await call(redeem_invite, config.preferences_dir, request.path_params["invite"])
        request.session["judge"], request.session["judge_seen"] = judge.pseudonym, time.time()
        return RedirectResponse("/judge", status_code=303)

    async def serve_task(request: Request, pool: str) -> None:
        judge = judge_of(request)
        await call(lambda: prefs.next_task(pool, judge, "human", preferences_dir=config.preferences_dir))

    async def judge_start(request: Request) -> Response:
        fields = await form(request)
        if (fields.get("name") or "").strip():
            raise ArenaError("a judge is not named by typing a name: open the invite link the operator gave you "
                             "(python -m extrarlhf preferences invite NAME), or judge as this browser", "invalid_argument",
                             400)
        pool = fields.get("pool", "")
        await serve_task(request, pool)
        return RedirectResponse(pool_path(pool), status_code=303)

    async def judge_task(request: Request) -> Response:
        pool = request.path_params["pool"]
        judge = judge_of(request)
        got = await call(lambda: prefs.next_task(pool, judge, "human", preferences_dir=config.preferences_dir,
                                                 serve=False))
        return render(request, "judge.html", pool=pool, got=got, task=got["task"])

    async def judge_next(request: Request) -> Response:
        await form(request)
        pool = request.path_params["pool"]
        await serve_task(request, pool)
        return RedirectResponse(pool_path(pool), status_code=303)

    async def judge_answer(request: Request) -> Response:
        fields = await form(request)
        pool = request.path_params["pool"]
        judge = judge_of(request)
        reason = (fields.get("reason") or "").strip() or None if config.record_free_text else None
        await call(lambda: prefs.submit_preference(pool, fields.get("task_id", ""), judge, "human",
                                                   fields.get("choice", ""), reason,
                                                   preferences_dir=config.preferences_dir))
        await serve_task(request, pool)
        return RedirectResponse(pool_path(pool), status_code=303)

    async def leaderboard(request: Request) -> Response:
        pool = request.path_params["pool"]
        board = await call(lambda: preference_leaderboard(pool, preferences_dir=config.preferences_dir))
        return render(request, "leaderboard.html", pool=pool, board=board)

    # ------------------------------------------------------------------ errors
    async def business_error(request: Request, exc: Exception) -> Response:
        code = getattr(exc, "code", "invalid_argument") if isinstance(exc, RLHFError) else "illegal_action"
        status = getattr(exc, "status", None) or STATUS_OF.get(code, 400)
        match_id = request.path_params.get("match_id")
        back = f"/match/{match_id}" if match_id and code not in ("unknown_match", "foreign_match") else "/"
        title = TITLE_OF.get(code, "Security check failed" if code == "csrf" else "Request refused")
        return page(status, title, safe_text(str(exc)), back, request)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return page(404, "Page not found", f"There is no page at {safe_text(request.url.path)[:200]}.", "/")
        if exc.status_code == 405:
            return page(405, "Method not allowed", f"{request.method} is not how this page is used; go back and use "
                                                  f"its buttons.", "/")
        return page(exc.status_code, "Request refused", safe_text(str(exc.detail)), "/")

    async def server_error(request: Request, exc: Exception) -> Response:
        log.error("arena request %s %s failed: %s", request.method, request.url.path, type(exc).__name__,
                  exc_info=exc)
        return page(500, "Something went wrong", "The arena could not handle this request (the error is in the "
                                                 "server's log). Your battles are unaffected: go back and go on.", "/")

    def bare_page(status: int, title: str, message: str) -> Response:
        return page(status, title, message)

    middleware = [Middleware(BodyLimit, max_bytes=config.max_body_bytes, page=bare_page,
                             timeout_s=config.body_timeout_s),
                  # the cookie is re-signed on every response: max_age is how long an unused session lives
                  Middleware(SessionMiddleware, secret_key=config.secret, session_cookie=COOKIE, same_site="lax",
                             https_only=False, max_age=int(config.session_max_age_s))]
    if config.token:
        middleware.append(Middleware(TokenGate, token=config.token, page=bare_page, secret=config.secret))
    routes = [
        Route("/", lobby, methods=["GET"]),
        Route("/start", start, methods=["POST"]),
        Route("/match/{match_id}", show, methods=["GET"]),
        Route("/match/{match_id}/move", move, methods=["POST"]),
        Route("/match/{match_id}/continue", resume, methods=["POST"]),
        Route("/match/{match_id}/abandon", abandon, methods=["POST"]),
        Route("/match/{match_id}/replay", replay, methods=["GET"]),
        Route("/judge", judging, methods=["GET"]),
        Route("/judge", judge_start, methods=["POST"]),
        Route("/judge/invite/{invite}", judge_invite, methods=["GET"]),
        Route("/judge/{pool}", judge_task, methods=["GET"]),
        Route("/judge/{pool}/next", judge_next, methods=["POST"]),
        Route("/judge/{pool}/answer", judge_answer, methods=["POST"]),
        Route("/leaderboard/{pool}", leaderboard, methods=["GET"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        """Expire idle battles every so often (a start sweeps too) while the server runs."""
        async def sweeper() -> None:
            while True:
                await anyio.sleep(min(60.0, max(1.0, config.idle_timeout_s / 4)))
                try:
                    await call(arena.sweep)
                except Exception:  # noqa: BLE001 - logged, the sweeper goes on
                    log.exception("arena sweep failed")

        async with anyio.create_task_group() as tg:
            tg.start_soon(sweeper)
            yield
            tg.cancel_scope.cancel()

    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                    exception_handlers={RLHFError: business_error, engine.EngineError: business_error,
                                        HTTPException: http_error, Exception: server_error})
    app.state.arena = arena
    return app
