"""A group's traces from one stored form to the other: ``sessions expand`` (plain ``.jsonl``
files to ``cat``, ``grep`` or ``split``) and ``sessions compact`` (``.jsonl.zst``, about 17x
smaller); ``sessions cat`` prints one trace file's plain bytes whatever its form.

Readers see the same bytes either way (trace_files.py): the catalog's sha256 digests are of
the plain bytes, so a conversion changes no catalog line, no check and no dataset. Each file
is converted by an atomic rename (trace_files.expand_battle / compact_battle); a battle that
is not a finished, intact trace (no final catalog line, a file that does not decompress) is
left as it is and reported, never half-converted. A series may run beside a conversion: the
battles it adds keep the form it writes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from ..core.errors import InvalidArgument, NotFound
from . import trace_files
from .records import BATTLE_ID, TRACE_FILES
from .sessions import SessionStore

__all__ = ["convert_group", "cat_trace_file"]


def _size(v5: Path) -> int:
    return sum(path.stat().st_size for path in trace_files.stored_files(v5).values())


def convert_group(sessions_dir: str | os.PathLike[str], group: str, *, compact: bool, battle: str | None = None,
                  progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Store every battle of ``group`` (or the one ``battle``) compact (``compact=True``) or
    plain; returns the counts: battles converted, already in that form, skipped with their
    reason, files rewritten, and the stored bytes before and after."""
    store = SessionStore(sessions_dir)
    store.read_manifest(group)  # a group that does not exist (or is damaged) is refused here
    store.confine_group(group)
    names = store.battle_folders(group)
    if battle is not None:
        if not BATTLE_ID.fullmatch(battle) or battle not in names:
            raise NotFound(f"battle {battle!r} is not in group {group!r}; `extrarlhf sessions show {group} --battles` "
                           f"lists its battles")
        names = [battle]
    final = {e["battle_id"] for e in store.iter_latest(group) if e.get("files")}  # streamed, ids only
    convert = trace_files.compact_battle if compact else trace_files.expand_battle
    out: dict[str, Any] = {"group": group, "form": "compact" if compact else "plain", "battles": len(names),
                           "converted": 0, "unchanged": 0, "files": 0, "bytes_before": 0, "bytes_after": 0,
                           "skipped": []}
    for done, name in enumerate(names, 1):
        v5 = store.battle_dir(group, name) / "v5"
        before = _size(v5)
        if name not in final:
            out["skipped"].append({"battle_id": name, "reason": "no final catalog line (unfinished, or the catalog "
                                                                "needs `extrarlhf check --repair`)"})
        else:
            try:
                for logical in TRACE_FILES:  # every file must read before any is rewritten
                    trace_files.read(v5, logical)
                files = convert(v5)
            except (trace_files.CompactFileError, FileNotFoundError) as exc:
                out["skipped"].append({"battle_id": name, "reason": f"not an intact trace: {exc}"})
            else:
                out["files"] += files
                out["converted" if files else "unchanged"] += 1
        out["bytes_before"] += before
        out["bytes_after"] += _size(v5)
        if progress:
            progress(done, len(names))
    return out


def cat_trace_file(path: str | os.PathLike[str]) -> bytes:
    """The plain bytes of a trace file given by either of its names (``.../v5/actions.jsonl``
    or ``.../v5/actions.jsonl.zst``)."""
    given = Path(path)
    name = given.name.removesuffix(trace_files.SUFFIX)
    if name not in TRACE_FILES:
        raise InvalidArgument(f"{given.name!r} is not a trace file; give a battle's v5/meta.jsonl, v5/turns.jsonl or "
                              f"v5/actions.jsonl (plain or .zst)")
    try:
        return trace_files.read(given.parent, name)
    except FileNotFoundError:
        raise NotFound(f"{given.parent / name} is stored in neither form (plain or .zst)") from None
    except trace_files.CompactFileError as exc:
        raise InvalidArgument(str(exc)) from None
