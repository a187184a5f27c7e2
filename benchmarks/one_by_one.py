"""Battles started one by one (the MCP server, the arena, the terminal) in a group that grows;
prints one JSON object.

    .venv/bin/python -m benchmarks.one_by_one [--sizes 1000,10000] [--battles 20] [--dir DIR]

The group is grown to each size with battles started and abandoned at once (an ``llm`` player
1 against ``baseline:random``: a folder and two catalog lines each, like any one-by-one battle).
At each size, CPU per battle (``time.process_time``, this process only):

- ``before_ms``: a battle as it was started and finished before runtime/settled.py: the whole
  ``reconcile`` for its index, and its summary folded from the whole catalog after it
  (``write_summary`` without a live index), on the same group;
- ``now_ms``: ``start_match`` and ``abandon`` on a store that has started a battle in the group
  before (the MCP server's and the arena's case: one store for the process);
- ``first_ms``: the first battle of a fresh store (the whole reconcile, and the first summary,
  which folds the catalog once).

The ratio is ``before_ms / now_ms``. ``--dir`` keeps the group (grown further by a later run).
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

from extrarlhf.runtime import settled
from extrarlhf.runtime.match import start_match
from extrarlhf.runtime.sessions import SessionStore

GROUP = "one-by-one"
next_index = settled.next_index


def _battle(store: SessionStore) -> None:
    start_match(store, GROUP, "llm", "baseline:random").abandon("benchmark")


def _per_battle(run, n: int) -> float:
    cpu = time.process_time()
    for _ in range(n):
        run()
    return 1000 * (time.process_time() - cpu) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="battles in the group at each measurement")
    parser.add_argument("--battles", type=int, default=20, help="battles timed at each size")
    parser.add_argument("--dir", default=None, help="sessions dir to keep (default: a temp dir)")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    with tempfile.TemporaryDirectory(prefix="bench-one-") as tmp:
        root = Path(args.dir or tmp)
        grower = SessionStore(root)
        rows = []
        for size in sizes:
            have = len(grower.battle_folders(GROUP)) if (root / GROUP).is_dir() else 0
            cpu = time.process_time()
            for _ in range(max(0, size - have)):
                _battle(grower)
            grow_ms = 1000 * (time.process_time() - cpu) / max(1, size - have)
            fresh = SessionStore(root)
            first = _per_battle(lambda: _battle(fresh), 1)  # noqa: B023 - called at once
            now = _per_battle(lambda: _battle(fresh), args.battles)  # noqa: B023
            old = SessionStore(root)
            old.followed_index = lambda group: None  # type: ignore[method-assign]  # the summary folded whole
            settled.next_index = lambda store, group: store.reconcile(group)["next_index"]  # the whole reconcile
            try:
                before_ms = _per_battle(lambda: _battle(old), max(3, args.battles // 4))  # noqa: B023
            finally:
                settled.next_index = next_index
            battles = len(grower.battle_folders(GROUP))
            rows.append({"battles": battles, "before_ms": round(before_ms, 2), "now_ms": round(now, 2),
                         "first_ms": round(first, 2), "ratio": round(before_ms / now, 1),
                         "growing_ms_per_battle": round(grow_ms, 2),
                         "catalog_bytes": (root / GROUP / "catalog.jsonl").stat().st_size})
            print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"benchmark": "one_by_one", "machine": platform.machine(), "python": platform.python_version(),
                      "sizes": rows}))


if __name__ == "__main__":
    main()
