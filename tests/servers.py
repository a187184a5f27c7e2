"""Helpers of the tests that start a server process (the arena, ``dagster dev``, the webserver
of a deployment): a free local port, and waiting until an HTTP endpoint answers while the
processes that serve it are alive. No dagster import: the web tests use it too."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, procs: Sequence[subprocess.Popen], what: str, log: Callable[[], str],
              timeout: float, every: float = 0.5) -> None:
    """Returns once GET ``url`` answers 200. Fails the test with ``what`` and ``log()`` (e.g. the
    tail of the server's log) as soon as one of ``procs`` has exited, or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        exited = [p for p in procs if p.poll() is not None]
        if exited or time.monotonic() > deadline:
            reason = (f"{' '.join(map(str, exited[0].args[:3]))} exited with {exited[0].returncode}" if exited
                      else f"no answer from {url} within {timeout:g} s")
            pytest.fail(f"{what} did not come up ({reason})\n{log()}")
        time.sleep(every)
