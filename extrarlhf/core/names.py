"""The names of groups, datasets, pointers, checkpoints and battles: one path component each."""

from __future__ import annotations

import re
from typing import Any

from .errors import InvalidArgument

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

# Names the project's own bookkeeping files take beside groups, datasets and checkpoints: a
# group, dataset, pointer or checkpoint may never be called like them.
RESERVED_NAMES = frozenset({"agents_index.json", "index.json", "promoted.json", "promoted_history.jsonl",
                            "promoted.intent.json", "manifest.json", "summary.json", "catalog.jsonl", "benchmarks"})
RESERVED_SUFFIXES = (".lock", ".tmp")


def check_name(value: Any, what: str = "group") -> str:
    """Group, dataset, checkpoint and battle names are one path component: letters, digits,
    ``._-``, no ``..``, and never one of the project's own file names (``RESERVED_NAMES``,
    ``*.lock``, ``*.tmp``)."""
    if not isinstance(value, str) or not _NAME.fullmatch(value) or ".." in value:
        raise InvalidArgument(
            f"{what} name {value!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', starting with "
            f"a letter or digit, without '/', '..' or NUL")
    if value.lower() in RESERVED_NAMES or value.lower().endswith(RESERVED_SUFFIXES):
        raise InvalidArgument(f"{what} name {value!r} is reserved for ExtraRLHF's own files (index, pointer, lock "
                              f"and temp files); choose another name")
    return value


def is_name(value: str) -> bool:
    try:
        check_name(value)
    except InvalidArgument:
        return False
    return True
