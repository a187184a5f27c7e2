"""The arena in public (issue 49, DESIGN 17.1): idle battles expire as abandoned, starts are
rate-limited per client address, caps hold under concurrent starts, stalled headers and bodies
time out on the real server, the token needs entropy and rotating it revokes admission, judges
are admitted by invite (the cookie holds a pseudonym), GET never writes, a short judge key is
refused, and free text is announced and can be switched off."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import httpx
import pytest
import uvicorn
from starlette.testclient import TestClient

from extrarlhf.core.errors import InvalidArgument
from extrarlhf.preferences.judges import issue_invite, judge_key, judge_pseudonym
from tests.servers import free_port
from tests.web.arena_helpers import CSRF, DECISION, client, csrf, same_arena, start
from web.app import build_app
from web.config import ArenaConfig
from web.security import header_timeout_protocol

ACTION = re.compile(r'name="action_id" value="(\d+)"')
TOKEN = "Wq3vJ8kZr2XbN5mTy7LcP4dHs9GfA6eK1uRo0iV_-Qz"


def _catalog(sessions: Path) -> list[dict]:
    return [json.loads(line) for path in sessions.glob("*/catalog.jsonl") for line in path.read_text().splitlines()]


def test_idle_battles_expire_as_abandoned_and_starts_are_rate_limited(tmp_path: Path):
    c = client(tmp_path, max_live=1, starts_per_window=2, start_window_s=60, idle_timeout_s=600)
    arena = c.app.state.arena
    now = [1000.0]
    arena.clock = lambda: now[0]
    first = start(c, "baseline:random")
    other = same_arena(c)  # a client that dropped its cookie: the server cap holds it off...
    refused = other.post("/start", data={"csrf": csrf(other), "opponent": "baseline:random"})
    assert refused.status_code == 429 and "the arena is full" in refused.text
    now[0] += 601  # ...until the first battle has been idle past the timeout
    second = start(other, "baseline:random")
    assert c.get(first).status_code == 200 and 'id="play"' not in c.get(first).text  # over, not playable
    (expired,) = [e for e in _catalog(tmp_path / "sessions") if e["status"] == "abandoned"]
    (meta,) = (tmp_path / "sessions").glob(f"*/battles/{expired['battle_id']}/v5/meta.jsonl")
    assert "expired: idle for more than 600 s" in meta.read_text()
    # the rate: 2 starts per minute per client address (every TestClient is "testclient"), cookies or not
    assert other.post(second + "/abandon", data={"csrf": csrf(other)}).status_code == 200
    third = same_arena(c)
    assert third.post(start(third, "baseline:random") + "/abandon", data={"csrf": csrf(third)}).status_code == 200
    fourth = same_arena(c)
    limited = fourth.post("/start", data={"csrf": csrf(fourth), "opponent": "baseline:random"})
    assert limited.status_code == 429 and "2 per 60 s" in limited.text
    now[0] += 61
    start(fourth, "baseline:random")


def test_a_move_keeps_a_battle_alive(tmp_path: Path):
    c = client(tmp_path, idle_timeout_s=600)
    arena = c.app.state.arena
    now = [0.0]
    arena.clock = lambda: now[0]
    path = start(c, "baseline:random")
    now[0] += 500
    html = c.get(path).text  # shown: touched
    now[0] += 500
    assert arena.sweep() == []
    r = c.post(path + "/move", data={"csrf": CSRF.search(html).group(1), "decision": DECISION.search(html).group(1),
                                     "action_id": ACTION.findall(html)[-1]})
    assert r.status_code == 200 and "Traceback" not in r.text


@contextlib.contextmanager
def _served(config: ArenaConfig) -> Iterator[int]:
    """The arena on uvicorn in this process (the real server's protocol); yields its port."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(config), host="127.0.0.1", port=port, log_level="error",
                                           http=header_timeout_protocol(config.header_timeout_s), lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(600):
        if server.started:
            break
        threading.Event().wait(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_concurrent_starts_never_pass_the_caps(tmp_path: Path):
    config = ArenaConfig(sessions_dir=tmp_path / "s", checkpoints_dir=tmp_path / "c", max_live_per_session=3,
                         max_live=5, starts_per_window=100)
    with _served(config) as port:
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=url, timeout=60) as one:
            token = CSRF.search(one.get("/").text).group(1)
            with ThreadPoolExecutor(12) as pool:
                codes = list(pool.map(lambda _: one.post("/start", data={"csrf": token, "opponent": "baseline:random"}
                                                         ).status_code, range(12)))
            assert sorted(codes) == [303] * 3 + [429] * 9
        browsers = [httpx.Client(base_url=url, timeout=60) for _ in range(8)]
        tokens = [CSRF.search(b.get("/").text).group(1) for b in browsers]
        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(lambda bt: bt[0].post("/start", data={"csrf": bt[1], "opponent": "baseline:random"}
                                                        ).status_code, zip(browsers, tokens)))
        for b in browsers:
            b.close()
        assert sorted(codes) == [303] * 2 + [429] * 6


@pytest.fixture
def real_server(tmp_path: Path) -> Iterator[int]:
    with _served(ArenaConfig(sessions_dir=tmp_path / "s", checkpoints_dir=tmp_path / "c", body_timeout_s=0.5,
                             header_timeout_s=0.5)) as port:
        yield port


def _read_all(sock: socket.socket) -> bytes:
    sock.settimeout(20)  # generous: the server must end it long before
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_stalled_headers_and_bodies_time_out_on_the_real_server(real_server: int):
    body = socket.create_connection(("127.0.0.1", real_server))
    body.sendall(b"POST /start HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                 b"Content-Length: 1000\r\n\r\nabc")
    headers = socket.create_connection(("127.0.0.1", real_server))
    headers.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
    with body, headers:
        answered = _read_all(body)
        assert answered.startswith(b"HTTP/1.1 408") and b"did not arrive within 0.5 s" in answered
        assert _read_all(headers) == b""  # closed without a response
    with socket.create_connection(("127.0.0.1", real_server)) as ok:  # a whole request is still served
        ok.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert _read_all(ok).startswith(b"HTTP/1.1 200")


def test_the_token_needs_entropy_and_a_new_token_revokes_admission(tmp_path: Path):
    for weak in (" " * 16, "\t" * 16, "a" * 16, "ab" * 20):
        with pytest.raises(InvalidArgument, match="not a random secret"):
            ArenaConfig(token=weak)
    secret = "a-cookie-secret-kept-across-restarts"
    before = client(tmp_path, token=TOKEN, secret=secret)
    assert before.get(f"/?token={TOKEN}").status_code == 200
    assert TOKEN not in base64.b64decode(before.cookies["arena_session"].split(".")[0] + "==").decode()
    after = client(tmp_path, token=TOKEN[::-1], secret=secret)  # restarted with a new token, same secret
    after.cookies = before.cookies
    assert after.get("/").status_code == 403
    again = client(tmp_path, token=TOKEN, secret=secret)  # the same token: the cookie still admits
    again.cookies = before.cookies
    assert again.get("/").status_code == 200


@pytest.fixture
def pool(tmp_path: Path) -> Path:
    from extrarlhf.datasets import materialize_v5_dataset
    from extrarlhf.preferences import create_preference_pool
    from extrarlhf.runtime.series import run_series

    run_series(tmp_path / "sessions", "g", 2, p1_model="search:baseline:greedy?sims=2", opponent="baseline:greedy",
               seed=4)
    materialize_v5_dataset("g", "g", sessions_dir=tmp_path / "sessions", datasets_dir=tmp_path / "datasets")
    create_preference_pool("p", "g", n_tasks=3, datasets_dir=tmp_path / "datasets",
                           preferences_dir=tmp_path / "preferences")
    return tmp_path


def test_a_judge_is_admitted_by_invite_and_nobody_claims_one_by_typing(pool: Path):
    prefs = pool / "preferences"
    a = client(pool, preferences_dir=prefs)
    a.get("/judge/invite/" + issue_invite(prefs, "Alice Realname"))
    lobby = a.get("/judge").text
    a.post("/judge", data={"csrf": CSRF.search(lobby).group(1), "pool": "p"})
    cookie = base64.b64decode(a.cookies["arena_session"].split(".")[0] + "==")
    assert b"Alice" not in cookie and b"judge-" in cookie  # the pseudonym only
    b = same_arena(a)
    typed = b.post("/judge", data={"csrf": csrf(b), "pool": "p", "name": "Alice Realname"})
    assert typed.status_code == 400 and "invite link" in typed.text
    real = issue_invite(prefs, "Alice Realname")
    forged = b.get("/judge/invite/" + real[:-1] + ("1" if real.endswith("0") else "0"))  # always altered
    assert forged.status_code == 400 and "not valid" in forged.text and "Alice" not in forged.text
    html = a.get("/judge/p").text
    task = re_task(html)
    b.post("/judge/p/next", data={"csrf": csrf(b)})
    stolen = b.post("/judge/p/answer", data={"csrf": csrf(b), "task_id": task, "choice": "A"})
    assert stolen.status_code == 400  # B is not A: A's pending task was never given to B
    own = a.post("/judge/p/answer", data={"csrf": CSRF.search(html).group(1), "task_id": task, "choice": "B"},
                 follow_redirects=False)
    assert own.status_code == 303
    # over MCP (or the CLI) the same name is another judge: arena judges live in their own keyed domain
    invited = issue_invite(prefs, "Alice Realname").split(".")[1]
    assert judge_pseudonym(prefs, "Alice Realname") != invited and judge_pseudonym(prefs, invited) != invited


def re_task(html: str) -> str:
    return re.search(r'name="task_id" value="([^"]+)"', html).group(1)


def test_get_never_writes_and_a_short_judge_key_is_refused(pool: Path, tmp_path: Path):
    prefs = pool / "preferences"
    for _ in range(30):
        fresh = client(pool, preferences_dir=prefs)  # a cookie-less visitor each time
        assert fresh.get("/judge/p").status_code == 200
    assert not (prefs / "p" / "served.jsonl").exists() or not (prefs / "p" / "served.jsonl").read_text()
    (tmp_path / "empty").mkdir()
    for bad in ("", "short-key"):
        (tmp_path / "empty" / ".judge_key").write_text(bad)
        with pytest.raises(InvalidArgument, match="fewer than 32"):
            judge_key(tmp_path / "empty")


def test_free_text_is_announced_and_can_be_switched_off(tmp_path: Path):
    on = client(tmp_path / "on")
    page = on.get(start(on, "baseline:random")).text
    assert "stored in the battle's trace exactly as typed" in page and 'name="rationale"' in page
    off = client(tmp_path / "off", record_free_text=False)
    path = start(off, "baseline:random", group="quiet")
    html = off.get(path).text
    assert 'name="rationale"' not in html and "exactly as typed" not in html
    r = off.post(path + "/move", data={"csrf": CSRF.search(html).group(1), "decision": DECISION.search(html).group(1),
                                       "action_id": ACTION.findall(html)[-1],
                                       "rationale": "Alice Realname +1 555 0100 alice@example.com"})
    assert r.status_code == 200
    off.post(path + "/abandon", data={"csrf": csrf(off)})
    for written in (tmp_path / "off" / "sessions").rglob("*.jsonl"):
        assert b"Alice" not in written.read_bytes()
