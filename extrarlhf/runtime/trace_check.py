"""The worker task of ``check``'s trace hashes (``extrarlhf.runtime.trace_check:check_traces``,
run by :mod:`extrarlhf.core.procpool`): kept apart from diagnosis.py, which names it without
importing the session store."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from .diagnosis import check_trace
from .sessions import SessionStore


def check_traces(tasks: list[tuple]) -> list[list[dict[str, Any]]]:
    """The problems of each task's trace (:func:`diagnosis.check_trace`), in task order."""
    stores: dict[str, SessionStore] = {}
    folders: dict[tuple[str, str], Callable[[str], Path]] = {}  # each group's folders resolved once a task
    out = []
    for _first, root, group, battle_id, entry, catalog, number, folder in tasks:
        store = stores.get(root) or stores.setdefault(root, SessionStore(root))
        battle_dir = folders.get((root, group)) or folders.setdefault((root, group), store.battle_dirs(group))
        problems: list[dict[str, Any]] = []
        check_trace(store, group, battle_id, entry, Path(catalog), number, Path(folder), problems, battle_dir)
        out.append(problems)
    return out
