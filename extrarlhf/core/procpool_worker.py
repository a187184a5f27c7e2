"""A worker process: ``python -m extrarlhf.core.procpool_worker module:function``.

Reads length-prefixed pickled task lists on stdin and answers each with the pickled result of
its task function (``module:function``, the first argument: e.g.
:func:`extrarlhf.datasets.battles.read_battles`, outcomes and table rows) on stdout, in
order, until stdin closes (which also happens when the parent dies). Started by
:class:`extrarlhf.core.procpool.WorkerPool`; a plain subprocess rather
than multiprocessing, so no ``__main__`` guard is needed in the caller's script and the
parent (which holds pyarrow's threads) is never forked.
"""

from __future__ import annotations

import pickle
import struct
import sys
from typing import Any, BinaryIO

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


def main() -> int:
    import gc
    import importlib
    import os

    from .procs import die_with

    die_with(os.getppid())  # a parent killed mid-chunk: stop now, not after the chunk
    module, _, name = sys.argv[1].partition(":")
    task = getattr(importlib.import_module(module), name)

    # The tasks parse traces into short-lived, acyclic records: the cyclic collector would only
    # rescan them (about a fifth of the parsing time). Refcounting frees everything.
    gc.disable()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            tasks = receive(stdin)
        except EOFError:
            return 0
        send(stdout, task(tasks))


if __name__ == "__main__":
    sys.exit(main())
