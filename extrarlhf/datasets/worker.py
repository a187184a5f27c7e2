"""A materialization worker process: ``python -m extrarlhf.datasets.worker``.

Reads length-prefixed pickled task lists on stdin and answers each with the pickled result of
:func:`extrarlhf.datasets.tables.read_chunk` (outcomes and Arrow record batches) on stdout, in order, until stdin closes (which
also happens when the parent dies). Started by :class:`WorkerPool`; a plain subprocess rather
than multiprocessing, so no ``__main__`` guard is needed in the caller's script and the
parent (which holds pyarrow's threads) is never forked.
"""

from __future__ import annotations

import pickle
import struct
import subprocess
import sys
from collections import deque
from typing import Any, BinaryIO, Iterator

_HEADER = struct.Struct("<Q")


def send(stream: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def receive(stream: BinaryIO) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    size = _HEADER.unpack(header)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


class WorkerPool:
    """``n`` worker processes; :meth:`map` yields results in task order with a bounded number
    of tasks in flight (``window`` per worker)."""

    def __init__(self, n: int, window: int = 3) -> None:
        self.window = window
        self.procs: list[subprocess.Popen] = []
        try:
            for _ in range(n):
                self.procs.append(subprocess.Popen([sys.executable, "-m", "extrarlhf.datasets.worker"],
                                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE))
        except BaseException:
            self.close(kill=True)
            raise

    def map(self, chunks: Iterator[list]) -> Iterator[tuple[list, Any]]:
        n = len(self.procs)
        inflight: deque = deque()
        sent = 0

        def submit() -> bool:
            nonlocal sent
            chunk = next(chunks, None)
            if chunk is None:
                return False
            send(self.procs[sent % n].stdin, chunk)
            inflight.append((sent % n, chunk))
            sent += 1
            return True

        for _ in range(n * self.window):
            if not submit():
                break
        while inflight:
            worker, chunk = inflight.popleft()
            try:
                result = receive(self.procs[worker].stdout)
            except EOFError:
                raise RuntimeError(f"dataset worker process {self.procs[worker].pid} died "
                                   f"(exit code {self.procs[worker].poll()})") from None
            submit()
            yield chunk, result

    def close(self, kill: bool = False) -> None:
        for proc in self.procs:
            try:
                if kill:
                    proc.kill()
                elif proc.stdin:
                    proc.stdin.close()
            except OSError:
                pass
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


def main() -> int:
    import gc

    from .tables import read_chunk

    # This process only parses traces into short-lived, acyclic records: the cyclic collector
    # would only rescan them (about a fifth of the parsing time). Refcounting frees everything.
    gc.disable()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            tasks = receive(stdin)
        except EOFError:
            return 0
        send(stdout, read_chunk(tasks))


if __name__ == "__main__":
    sys.exit(main())
