"""The pool of materialization worker processes (``python -m extrarlhf.datasets.worker``).

Kept apart from worker.py so a worker process imports only the wire protocol, not threads,
futures or subprocess handling.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Iterator

from .worker import receive, send

__all__ = ["WorkerPool"]


class WorkerPool:
    """``n`` worker processes; :meth:`map` yields results in task order with a bounded number
    of tasks in flight (``window`` per worker).

    One reader thread per worker drains its results as soon as they are written (pipe reads
    release the GIL), so a worker never waits on the caller. With ``local``, the calling
    process works too: whenever the oldest result is not back yet, it processes the next
    chunk itself instead of waiting (on two cores, one worker plus the caller use both
    without a third process competing for them)."""

    def __init__(self, n: int, window: int = 3) -> None:
        self.window = window
        self.procs: list[subprocess.Popen] = []
        self.waiting: list[deque[Future]] = []
        self.readers: list[threading.Thread] = []
        # one process per core already: BLAS thread pools would only cost start-up time
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        try:
            for _ in range(n):
                proc = subprocess.Popen([sys.executable, "-m", "extrarlhf.datasets.worker"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
                self.procs.append(proc)
                self.waiting.append(deque())
                reader = threading.Thread(target=self._read, args=(proc, self.waiting[-1]), daemon=True,
                                          name=f"dataset-worker-{proc.pid}")
                reader.start()
                self.readers.append(reader)
        except BaseException:
            self.close(kill=True)
            raise

    @staticmethod
    def _read(proc: subprocess.Popen, waiting: deque) -> None:
        while True:
            try:
                result = receive(proc.stdout)
            except (EOFError, OSError, ValueError):
                error = RuntimeError(f"dataset worker process {proc.pid} died (exit code {proc.poll()})")
                while waiting:
                    waiting.popleft().set_exception(error)
                return
            waiting.popleft().set_result(result)

    def map(self, chunks: Iterator[list], local: Callable[[list], Any] | None = None) -> Iterator[tuple[list, Any]]:
        n = len(self.procs)
        pending: deque[tuple[list, Future, int | None]] = deque()  # (chunk, its result, worker or None)
        in_flight = [0] * n
        exhausted = False

        def take() -> list | None:
            nonlocal exhausted
            chunk = None if exhausted else next(chunks, None)
            exhausted = chunk is None
            return chunk

        def submit() -> None:
            while sum(in_flight) < n * self.window:
                chunk = take()
                if chunk is None:
                    return
                worker = in_flight.index(min(in_flight))
                future: Future = Future()
                self.waiting[worker].append(future)  # before sending: the reader may answer at once
                send(self.procs[worker].stdin, chunk)
                in_flight[worker] += 1
                pending.append((chunk, future, worker))

        submit()
        while pending:
            chunk, future, worker = pending[0]
            if local is not None and not future.done() and len(pending) <= (n + 2) * self.window:
                mine = take()
                if mine is not None:
                    done: Future = Future()
                    done.set_result(local(mine))
                    pending.append((mine, done, None))
                    continue
            pending.popleft()
            result = future.result()
            if worker is not None:
                in_flight[worker] -= 1
                submit()
            yield chunk, result

    def close(self, kill: bool = False) -> None:
        for proc in self.procs:
            try:
                if kill:
                    proc.kill()
                elif proc.stdin:
                    proc.stdin.close()  # a worker exits at the end of its input
            except OSError:
                pass
        for reader in self.readers:  # each ends when its worker's output closes: no polling
            reader.join(timeout=30)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream:
                    try:
                        stream.close()
                    except OSError:
                        pass

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(kill=exc_type is not None)
