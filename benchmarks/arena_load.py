"""The browser arena under many concurrent players (loopback, bounded); prints one JSON object.

    .venv/bin/python -m benchmarks.arena_load [--players N] [--moves N] [--opponent SPEC]

Serves the arena on uvicorn in this process (the real server's protocol and middleware, a temp
sessions dir) and runs ``--players`` browsers at once, each its own cookie jar (httpx) on its
own thread: start a battle, then per move POST the move form and GET the match page it
redirects to, up to ``--moves`` moves or the end (a new battle then). Reports requests/s over
the whole run and the latency per move (the POST and the GET: what a person waits for) as
p50/p99 ms. Everything is bounded: players x moves requests, a 60 s timeout each.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import uvicorn

from web.app import build_app
from web.config import ArenaConfig
from web.security import header_timeout_protocol

CSRF = re.compile(r'name="csrf" value="([^"]+)"')
DECISION = re.compile(r'name="decision" value="(\d+)"')
ACTION = re.compile(r'name="action_id" value="(\d+)"')


def _player(url: str, opponent: str, moves: int, latencies: list[float], counts: list[int]) -> None:
    with httpx.Client(base_url=url, timeout=60, follow_redirects=True) as c:
        page = c.get("/")
        counts.append(1)
        page = c.post("/start", data={"csrf": CSRF.search(page.text).group(1), "opponent": opponent})
        counts.append(2)
        for _ in range(moves):
            html = page.text
            if 'id="play"' not in html:  # over: a new battle
                page = c.post("/start", data={"csrf": CSRF.search(c.get("/").text).group(1), "opponent": opponent})
                counts.append(3)
                continue
            begun = time.perf_counter()
            page = c.post(str(page.url) + "/move", data={"csrf": CSRF.search(html).group(1),
                                                         "decision": DECISION.search(html).group(1),
                                                         "action_id": ACTION.findall(html)[0]})
            latencies.append(time.perf_counter() - begun)
            counts.append(2)
            if page.status_code != 200:
                raise RuntimeError(f"move answered {page.status_code}: {page.text[:300]}")


def run(players: int, moves: int, opponent: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        config = ArenaConfig(sessions_dir=Path(tmp) / "sessions", checkpoints_dir=Path(tmp) / "checkpoints",
                             max_live=max(64, players), starts_per_window=10 * players + 10)
        server = uvicorn.Server(uvicorn.Config(build_app(config), host="127.0.0.1", port=0, log_level="error",
                                               http=header_timeout_protocol(config.header_timeout_s)))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        latencies: list[float] = []
        counts: list[int] = []
        begun = time.perf_counter()
        try:
            with ThreadPoolExecutor(players) as pool:
                for f in [pool.submit(_player, f"http://127.0.0.1:{port}", opponent, moves, latencies, counts)
                          for _ in range(players)]:
                    f.result()
        finally:
            seconds = time.perf_counter() - begun
            server.should_exit = True
            thread.join(timeout=30)
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"benchmark": "arena_load", "players": players, "moves_per_player": moves, "opponent": opponent,
            "moves": len(ordered), "requests": sum(counts), "seconds": round(seconds, 2),
            "requests_per_s": round(sum(counts) / seconds, 1), "move_p50_ms": pct(0.50), "move_p99_ms": pct(0.99),
            "move_max_ms": round(1000 * ordered[-1], 1), "worker_threads": config.worker_threads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=32)
    parser.add_argument("--moves", type=int, default=30)
    parser.add_argument("--opponent", default="baseline:greedy")
    args = parser.parse_args()
    if not (1 <= args.players <= 256 and 1 <= args.moves <= 1000):
        parser.error("--players is 1 to 256 and --moves 1 to 1000")
    print(json.dumps(run(args.players, args.moves, args.opponent)))


if __name__ == "__main__":
    main()
