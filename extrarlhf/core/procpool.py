"""A pool of worker processes (``python -m extrarlhf.core.procpool_worker``) running one task
function over chunks of items: materialize, the production export and ``check``'s trace hashes.

Kept apart from procpool_worker.py so a worker process imports only the wire protocol, not
threads, futures or subprocess handling.
"""

from __future__ import annotations

import importlib
import itertools
import os
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Iterator

from .errors import InvalidArgument
from .procpool_worker import receive, send

__all__ = ["WorkerPool", "map_chunks", "auto_workers"]

PARALLEL_MIN_BATTLES = 64  # below this, worker start-up costs more than it saves


_F_SETPIPE_SZ = 1031  # Linux fcntl: resize a pipe's buffer


def _widen(pipe: Any) -> None:
    """Give a result pipe a 1 MiB buffer where Linux allows it (a chunk's result is a few MB:
    16 times fewer wake-ups than with the default 64 kiB); elsewhere, keep the default."""
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), _F_SETPIPE_SZ, 1 << 20)
    except (ImportError, OSError):
        pass


class WorkerPool:
    """``n`` worker processes; :meth:`map` yields one result per chunk, in chunk order.

    Each worker has a reader thread that takes its result as soon as it is written (pipe reads
    release the GIL) and hands it the next chunk at once, so a worker neither waits on the
    caller nor starves while the caller is busy; ``depth`` chunks per worker are queued at
    most, which bounds what is left for a worker to finish once the chunks run out. With
    ``local``, the calling process works too: whenever the next result in order is not back
    yet, it processes the next chunk itself instead of waiting (on two cores, one worker plus
    the caller use both without a third process competing for them). Results wait in memory
    for at most ``ahead`` chunks past the one the caller is to yield next.
    """

    def __init__(self, n: int, task: str, depth: int = 2, ahead: int = 8) -> None:
        self.task, self.depth, self.ahead = task, depth, max(ahead, n * depth + 1)
        self.procs: list[subprocess.Popen] = []
        self.readers: list[threading.Thread] = []
        # one process per core already: BLAS thread pools would only cost start-up time
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        try:
            for _ in range(n):
                proc = subprocess.Popen([sys.executable, "-m", "extrarlhf.core.procpool_worker", task],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
                self.procs.append(proc)
                _widen(proc.stdout)
        except BaseException:
            self.close(kill=True)
            raise

    def map(self, chunks: Iterator[list], local: Callable[[list], Any] | None = None) -> Iterator[tuple[list, Any]]:
        """The pool's one map: its reader threads serve this call until the workers exit."""
        if self.readers:
            raise RuntimeError("a WorkerPool maps once; start another pool")
        lock = threading.Lock()
        taken: dict[int, tuple[list, Future]] = {}  # handed out, not yet yielded, by sequence number
        sent: list[deque[Future]] = [deque() for _ in self.procs]  # per worker, its results to come
        alive = [True] * len(self.procs)
        state = {"next": 0, "count": 0, "exhausted": False}

        def take() -> tuple[list, Future] | None:
            """Under ``lock``: the next chunk and its future, or None when there are no more
            chunks or the caller is ``ahead`` chunks behind."""
            if state["exhausted"] or state["count"] - state["next"] >= self.ahead:
                return None
            try:  # the caller's iterator may fail (a database read): its error is raised in order
                chunk = next(chunks, None)
            except Exception as exc:  # noqa: BLE001 - handed to the caller by map
                state["error"] = exc
                chunk = None
            if chunk is None:
                state["exhausted"] = True
                return None
            entry = taken[state["count"]] = (chunk, Future())
            state["count"] += 1
            return entry

        def died(worker: int) -> None:
            """Under ``lock``: fail what the worker still owed."""
            alive[worker] = False
            error = RuntimeError(f"worker process {self.procs[worker].pid} ({self.task}) died "
                                 f"(exit code {self.procs[worker].poll()})")
            while sent[worker]:
                sent[worker].popleft().set_exception(error)

        def feed() -> None:
            """Under ``lock``: top every live worker's queue up to ``depth`` chunks."""
            for worker, queue in enumerate(sent):
                while alive[worker] and len(queue) < self.depth:
                    entry = take()
                    if entry is None:
                        return
                    queue.append(entry[1])
                    try:
                        send(self.procs[worker].stdin, entry[0])
                    except (OSError, ValueError):
                        died(worker)

        def read(worker: int) -> None:
            proc = self.procs[worker]
            while True:
                try:
                    result = receive(proc.stdout)
                except Exception:  # noqa: BLE001 - EOF, a broken pipe, a garbled result: the worker is lost
                    proc.kill()
                    with lock:
                        died(worker)
                    return
                with lock:
                    future = sent[worker].popleft()
                    feed()
                future.set_result(result)

        with lock:
            feed()
        for worker, proc in enumerate(self.procs):
            reader = threading.Thread(target=read, args=(worker,), daemon=True, name=f"worker-{proc.pid}")
            reader.start()
            self.readers.append(reader)
        while True:
            with lock:
                index = state["next"]
                head = taken.get(index)
                mine = take() if local is not None and (head is None or not head[1].done()) else None
                if head is None and mine is None:
                    if state["exhausted"]:
                        if "error" in state:
                            raise state["error"]
                        return
                    raise RuntimeError(f"every worker process ({self.task}) died")  # nothing left to hand chunks to
            if mine is not None:
                mine[1].set_result(local(mine[0]))
                continue
            result = head[1].result()
            with lock:
                del taken[index]
                state["next"] = index + 1
                feed()  # the caller caught up: queues held back by ``ahead`` refill
            yield head[0], result

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


def map_chunks(items: Iterator[Any], workers: int, chunk_size: int, task: str) -> Iterator[tuple[list, Any]]:
    """(chunk of items, ``task(chunk)``) in item order, on ``workers`` processes counting this
    one (``task`` is ``"module:function"``). Chunks have ``chunk_size`` items whatever the
    number of workers, so what the caller writes does not depend on it."""
    module, _, name = task.partition(":")
    local = getattr(importlib.import_module(module), name)
    chunks = iter(lambda: list(itertools.islice(items, chunk_size)), [])
    if workers == 1:
        for chunk in chunks:
            yield chunk, local(chunk)
        return
    with WorkerPool(workers - 1, task) as pool:  # this process is the last worker
        yield from pool.map(chunks, local=local)


def auto_workers(workers: int | None, battles: int) -> int:
    """The number of worker processes (this one included) for ``battles`` battles, or the
    checked number asked for."""
    if workers is None:
        workers = min(4, os.cpu_count() or 1) if battles >= PARALLEL_MIN_BATTLES else 1
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 64:
        raise InvalidArgument(f"workers must be an integer in 1..64, got {workers!r}")
    return workers
