"""No request holds the MCP server: ping latency, memory, cancel and end-of-input under long calls.

    .venv/bin/python -m benchmarks.mcp_bounded [--long-calls 40] [--seconds 10] [--drain-seconds 5]

Spawns ``python -m mcp_server`` and, on its stdio (a line-based JSON-RPC client, so the figures
are the server's own), sends ``--long-calls`` ``run_series(n_battles=1,000,000)`` and as many
``start_battle`` of two ``search:baseline:greedy?sims=4096`` players at once, then for
``--seconds`` calls the ``ping`` tool every 100 ms. Prints one JSON object:

* ``admission``: how many long calls were refused ``busy`` at once, how many ran or waited;
* ``ping_ms``: the ping tool's round trip while they run (target: max under 1,000 ms);
* ``rss_mb``: the server's peak resident memory while they run;
* ``cancel_to_idle_s``: from ``notifications/cancelled`` for every long call to a server
  using under 10% of a core;
* ``eof``: with new long calls running, from closing stdin to the server's exit, and how many
  of the requests sent were answered (target: all, within drain + grace).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HEAVY = "search:baseline:greedy?sims=4096"


class RawClient:
    """JSON-RPC lines to a server's stdin; replies collected by a reader thread with their time."""

    def __init__(self, command: list[str]) -> None:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"), "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.replies: dict[int, tuple[float, dict[str, Any]]] = {}
        self.sent: dict[int, float] = {}
        self._next = 0
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            if "id" in message:
                with self._arrived:
                    self.replies[message["id"]] = (time.monotonic(), message)
                    self._arrived.notify_all()

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        with self._lock:
            self._next += 1
            request_id = self._next
        self.sent[request_id] = time.monotonic()
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})})
        return request_id

    def call(self, name: str, arguments: dict[str, Any]) -> int:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def wait(self, request_id: int, timeout: float = 60.0) -> tuple[float, dict[str, Any]]:
        with self._arrived:
            if not self._arrived.wait_for(lambda: request_id in self.replies, timeout):
                raise TimeoutError(f"no reply to request {request_id} in {timeout} s")
            return self.replies[request_id]

    def cancel(self, request_id: int) -> None:
        self.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": request_id, "reason": "benchmark"}})


def _proc(pid: int) -> tuple[float, float]:
    """(CPU seconds, resident MB) of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:")) / 1024
    return cpu, rss


def _error_code(reply: dict[str, Any]) -> str | None:
    envelope = (reply.get("result") or {}).get("structuredContent") or {}
    return None if envelope.get("ok", True) else envelope["error"]["code"]


def measure(long_calls: int, seconds: float, drain_seconds: float) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="mcp-bounded-"))
    client = RawClient([sys.executable, "-m", "mcp_server", "--sessions-dir", str(workdir / "sessions"),
                        "--drain-seconds", str(drain_seconds)])
    pid = client.proc.pid
    client.wait(client.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                              "clientInfo": {"name": "mcp-bounded", "version": "0"}}))
    client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    long_ids = []
    for i in range(long_calls):
        long_ids.append(client.call("run_series", {"group": f"g{i}", "n_battles": 1_000_000,
                                                   "p1_model": "baseline:greedy", "opponent": "baseline:greedy"}))
        long_ids.append(client.call("start_battle", {"p1_actor_type": "rl", "p1_model": HEAVY, "opponent": HEAVY}))
    time.sleep(1.0)
    refused = [i for i in long_ids if i in client.replies and _error_code(client.replies[i][1]) == "busy"]

    pings, peak_rss = [], 0.0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sent = time.monotonic()
        arrived, _ = client.wait(client.call("ping", {}), 30)
        pings.append(arrived - sent)
        peak_rss = max(peak_rss, _proc(pid)[1])
        time.sleep(0.1)

    cancelled_at = time.monotonic()
    for request_id in long_ids:
        if request_id not in client.replies:
            client.cancel(request_id)
    idle_after = None
    while time.monotonic() - cancelled_at < 60:
        before, _ = _proc(pid)
        time.sleep(0.2)
        if _proc(pid)[0] - before < 0.02:
            idle_after = time.monotonic() - cancelled_at - 0.2
            break

    eof_ids = [client.call("run_series", {"group": f"eof{i}", "n_battles": 1_000_000, "p1_model": "baseline:greedy",
                                          "opponent": "baseline:greedy"}) for i in range(4)]
    eof_ids += [client.call("ping", {}) for _ in range(50)]
    time.sleep(1.0)
    closed_at = time.monotonic()
    assert client.proc.stdin is not None
    client.proc.stdin.close()
    client.proc.wait(timeout=drain_seconds + 120)
    exited = time.monotonic() - closed_at
    time.sleep(0.2)  # the reader thread drains the last lines
    codes: dict[str, int] = {}
    for request_id in eof_ids:
        if request_id in client.replies:
            code = _error_code(client.replies[request_id][1]) or "ok"
            codes[code] = codes.get(code, 0) + 1
    ordered = sorted(pings)
    return {
        "benchmark": "mcp_bounded", "python": platform.python_version(), "cores": os.cpu_count(),
        "long_calls_sent": len(long_ids),
        "admission": {"refused_busy": len(refused), "ran_or_waited": len(long_ids) - len(refused)},
        "ping_ms": {"n": len(ordered), "median": round(statistics.median(ordered) * 1000, 1),
                    "p99": round(ordered[max(0, int(0.99 * len(ordered)) - 1)] * 1000, 1),
                    "max": round(ordered[-1] * 1000, 1), "target_max": 1000},
        "rss_mb": {"peak_while_running": round(peak_rss, 1)},
        "cancel_to_idle_s": None if idle_after is None else round(idle_after, 2),
        "eof": {"drain_seconds": drain_seconds, "exit_after_s": round(exited, 2), "requests": len(eof_ids),
                "answered": sum(codes.values()), "by_outcome": codes, "exit_code": client.proc.returncode},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mcp_bounded", description=__doc__.splitlines()[0])
    parser.add_argument("--long-calls", type=int, default=40, help="series and search battles sent at once, each")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long pings are timed while they run")
    parser.add_argument("--drain-seconds", type=float, default=5.0, help="the server's --drain-seconds")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.long_calls, args.seconds, args.drain_seconds), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
