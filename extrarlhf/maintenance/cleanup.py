"""Garbage collection of what dead processes left in the sessions, datasets and checkpoints
dirs (``extrarlhf gc``; :func:`collect_garbage`).

Writers never leave a half-written file *visible*, but a process killed mid-write leaves its
scratch behind. What is collected, and when it is left alone:

* dataset publications (``<datasets>/<name>/.tmp-*``, ``.old-*``, ``.trash-*``): recovered as
  the next publication would (datasets/publish.py ``recover``: ``.tmp-``/``.trash-`` deleted,
  ``.old-`` restored over the uncommitted new version), under the dataset's lock taken
  *without waiting*: a dataset being published right now is left alone entirely.
* other temp folders (``.tmp-<what>-<pid>-<hex>``, ``.trash-...``; e.g. a battle being
  written in ``<sessions>/<group>/battles/``): deleted when their pid is not running.
* atomic-write temp files (``.<file>.<pid>-<random>.tmp``, fileio.atomic_write_bytes):
  deleted when their pid is not running; older ones, which carry no pid, when nothing has
  touched them for ``stale_after_s`` seconds (an hour by default).
* lock files (``*.lock`` of fileio.locked): deleted when nobody holds them (their flock is
  taken without waiting, and deleted while held: see fileio.remove_unused_lock).

Anything whose owner is alive (or whose lock is held) is left and reported with the reason.
Each root is walked a few levels deep only (published versions and battle folders are not
entered); symlinks are never followed, so nothing outside the three dirs is touched.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

from ..core.errors import RLHFError, resource_error
from ..core.fileio import remove_unused_lock, temp_file_owner
from ..core.procs import pid_alive
from ..datasets.paths import POINTERS_DIR, VERSION_DIR
from ..datasets.publish import PUBLISH_LOCK, leftovers, sweep_dataset

__all__ = ["collect_garbage", "add_parser"]

STALE_AFTER_S = 3600.0
MAX_DEPTH = 3  # folders examined: <root>, <root>/<x>, <root>/<x>/<y> (e.g. <sessions>/<group>/battles)
_TEMP_DIR_PREFIXES = (".tmp-", ".trash-")
_PUBLICATION_PREFIXES = (".tmp-", ".old-", ".trash-")


def _dir_owner(name: str) -> int | None:
    """The pid of a ``.tmp-<what>-<pid>-<hex>`` / ``.trash-...`` folder name, else None."""
    parts = name.rsplit("-", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2] and all(c in "0123456789abcdef" for c in parts[2]):
        return int(parts[1])
    return None


class _Report:
    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run
        self.removed: list[dict[str, Any]] = []
        self.left: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []

    def add(self, root: str, path: Path | str, kind: str, action: str, reason: str, pid: int | None = None,
            code: str | None = None) -> None:
        item = {"root": root, "path": str(path), "kind": kind, "pid": pid, "reason": reason}
        if action == "left":
            self.left.append(item)
        elif action == "failed":
            self.errors.append({**item, "code": code or "os_error"})
        else:
            self.removed.append({**item, "action": action})

    def failed(self, root: str, path: Path, kind: str, exc: OSError, pid: int | None = None) -> None:
        error = resource_error(exc, path.parent, f"removing {path.name}")
        self.add(root, path, kind, "failed", str(error or exc), pid, error.code if error else "os_error")

    def as_dict(self, roots: dict[str, str | None]) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "roots": roots, "removed": self.removed, "left": self.left,
                "errors": self.errors,
                "counts": {"removed": len(self.removed), "left": len(self.left), "errors": len(self.errors)}}


def _walk(root: Path, root_kind: str) -> Iterator[tuple[Path, list[os.DirEntry], int]]:
    """(folder, its entries, depth) for the folders worth looking into, top down: ``MAX_DEPTH``
    levels (so a battle's trace folder, ``<sessions>/<group>/battles/<id>``, is never entered),
    no hidden folder (leftovers are handled whole), no published dataset version."""
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        yield folder, entries, depth
        if depth + 1 >= MAX_DEPTH:
            continue
        for entry in reversed(entries):
            if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
                continue
            if root_kind == "datasets" and depth == 1 and VERSION_DIR.fullmatch(entry.name):
                continue  # a published version: manifest and Parquet files only
            stack.append((Path(entry.path), depth + 1))


def _collect_dataset_folder(folder: Path, report: _Report) -> None:
    """Publication leftovers and the publish lock of one dataset folder, under its lock."""
    lock = folder / (PUBLISH_LOCK + ".lock")
    had_lock = lock.exists()
    if not had_lock and not any(p.name.startswith(_PUBLICATION_PREFIXES) for p in folder.iterdir()):
        return
    try:  # in a dry run, a lock file this creates is removed again: nothing changes
        entries = sweep_dataset(folder, dry_run=report.dry_run, remove_lock=not report.dry_run or not had_lock)
    except (OSError, RLHFError) as exc:
        error = resource_error(exc, folder, f"locking {lock.name}") if isinstance(exc, OSError) else exc
        report.add("datasets", lock, "lock", "failed", str(error or exc), None, getattr(error, "code", "os_error"))
        return
    if entries is None:  # a live publication holds the lock: it recovers its folder itself
        for item in leftovers(folder):
            report.add("datasets", folder / item["folder"], f"publication_{item['kind']}", "left",
                       "a publication of this dataset is running (its lock is held)", item["pid"])
        report.add("datasets", lock, "lock", "left", "held by a running publication")
        return
    for e in entries:
        kind = f"publication_{e['kind']}"
        if e["action"] == "left":
            report.add("datasets", e["path"], kind, "left", f"its publisher (pid {e['pid']}) is alive", e["pid"])
        elif e["action"] == "failed":
            report.add("datasets", e["path"], kind, "failed", e["message"], e["pid"], e.get("code"))
        else:
            reason = (f"an overwrite of v{e['version']} by pid {e['pid']} did not complete: the previous version "
                      f"was put back" if e["action"] == "restored" else f"left by a dead publisher (pid {e['pid']})")
            report.add("datasets", e["path"], kind, e["action"], reason, e["pid"])
    if had_lock:
        report.add("datasets", lock, "lock", "deleted", "unused lock (nobody holds it)")


def _collect_entry(root_kind: str, folder: Path, entry: os.DirEntry, report: _Report, now: float,
                   stale_after_s: float) -> None:
    path = Path(entry.path)
    name = entry.name
    if entry.is_symlink():
        return
    if entry.is_dir():
        if not name.startswith(_TEMP_DIR_PREFIXES + (".old-",)):
            return
        pid = _dir_owner(name)
        kind = "temp_dir" if name.startswith(".tmp-") else "trash_dir" if name.startswith(".trash-") else "old_dir"
        if pid is None:
            report.add(root_kind, path, kind, "left", "no owner pid in its name: not ours to judge")
        elif kind == "old_dir":
            report.add(root_kind, path, kind, "left", "a backup outside a dataset folder: restore or delete it by hand",
                       pid)
        elif pid_alive(pid):
            report.add(root_kind, path, kind, "left", f"its writer (pid {pid}) is alive", pid)
        else:
            try:
                if not report.dry_run:
                    shutil.rmtree(path)
                report.add(root_kind, path, kind, "deleted", f"left by a dead writer (pid {pid})", pid)
            except OSError as exc:
                report.failed(root_kind, path, kind, exc, pid)
        return
    if not entry.is_file(follow_symlinks=False):
        return
    if name.endswith(".lock"):
        try:
            if remove_unused_lock(path, dry_run=report.dry_run):
                report.add(root_kind, path, "lock", "deleted", "unused lock (nobody holds it)")
            else:
                report.add(root_kind, path, "lock", "left", "held by a running process")
        except OSError as exc:
            report.failed(root_kind, path, "lock", exc)
        except RLHFError as exc:  # translated by fileio.writing (read_only, ...)
            report.add(root_kind, path, "lock", "failed", str(exc), None, exc.code)
        return
    owner = temp_file_owner(name) if name.startswith(".") else None
    if owner is None:
        return
    pid = owner[1]
    if pid is not None:
        if pid_alive(pid):
            report.add(root_kind, path, "temp_file", "left", f"its writer (pid {pid}) is alive", pid)
            return
        reason = f"left by a dead writer (pid {pid})"
    else:
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except FileNotFoundError:
            return
        if age < stale_after_s:
            report.add(root_kind, path, "temp_file", "left",
                       f"no owner pid recorded and modified {age:.0f} s ago (under {stale_after_s:.0f} s)")
            return
        reason = f"no owner pid recorded; untouched for {age / 3600:.1f} h"
    try:
        if not report.dry_run:
            os.unlink(path)
        report.add(root_kind, path, "temp_file", "deleted", reason, pid)
    except FileNotFoundError:
        pass
    except OSError as exc:
        report.failed(root_kind, path, "temp_file", exc, pid)


def _collect_root(root_kind: str, root: Path, report: _Report, stale_after_s: float) -> None:
    now = time.time()
    for folder, entries, depth in _walk(root, root_kind):
        if root_kind == "datasets" and depth == 1 and folder.name != POINTERS_DIR:
            try:
                _collect_dataset_folder(folder, report)
            except OSError as exc:
                report.failed(root_kind, folder, "dataset_folder", exc)
            skip = {PUBLISH_LOCK + ".lock"}
            entries = [e for e in entries if e.name not in skip and not e.name.startswith(_PUBLICATION_PREFIXES)]
        for entry in entries:
            _collect_entry(root_kind, folder, entry, report, now, stale_after_s)


def collect_garbage(sessions_dir: str | os.PathLike[str] | None = "sessions",
                    datasets_dir: str | os.PathLike[str] | None = "datasets",
                    checkpoints_dir: str | os.PathLike[str] | None = "checkpoints", dry_run: bool = False, *,
                    stale_after_s: float = STALE_AFTER_S) -> dict[str, Any]:
    """Remove what dead processes left under the three dirs (see the module docstring); a dir
    given as None, or missing, is skipped. Returns ``removed`` (each with ``path``, ``kind``,
    ``action`` deleted/restored, ``reason`` and ``pid``), ``left`` (with why), ``errors``
    (what could not be removed, with a code such as ``read_only``), ``counts`` and the
    ``roots`` walked. ``dry_run`` reports the same without changing anything."""
    if not isinstance(dry_run, bool):
        raise TypeError("dry_run must be a bool")
    report = _Report(dry_run)
    roots: dict[str, str | None] = {}
    for kind, root in (("sessions", sessions_dir), ("datasets", datasets_dir), ("checkpoints", checkpoints_dir)):
        if root is None:
            roots[kind] = None
            continue
        real = Path(os.path.realpath(root))
        roots[kind] = str(real) if real.is_dir() else None
        if real.is_dir():
            _collect_root(kind, real, report, stale_after_s)
    return report.as_dict(roots)


# ---------------------------------------------------------------------------------- CLI
def _cmd_gc(args: argparse.Namespace) -> int:
    result = collect_garbage(args.sessions_dir, args.datasets_dir, args.checkpoints_dir, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return 1 if result["errors"] else 0
    would = "would " if args.dry_run else ""
    for item in result["removed"]:
        verb = "restore" if item["action"] == "restored" else "remove"
        print(f"{would}{verb if would else verb + 'd'}: {item['path']} ({item['reason']})")
    for item in result["left"]:
        print(f"left: {item['path']} ({item['reason']})")
    for item in result["errors"]:
        print(f"error [{item['code']}]: {item['path']}: {item['reason']}")
    counts = result["counts"]
    walked = ", ".join(f"{k} {v}" for k, v in result["roots"].items() if v) or "nothing (no dir exists)"
    print(f"{'dry run: ' if args.dry_run else ''}{counts['removed']} {'would be ' if args.dry_run else ''}removed, "
          f"{counts['left']} left, {counts['errors']} errors; walked {walked}")
    return 1 if result["errors"] else 0


def add_parser(sub: Any) -> None:
    """Add the ``gc`` command to the CLI's subparsers."""
    p = sub.add_parser("gc", help="remove temp folders, unfinished publications and unused locks left by dead "
                                  "processes (reports each, and what it left)")
    p.add_argument("--sessions-dir", default="sessions", help="root of the session groups (default: sessions)")
    p.add_argument("--datasets-dir", default="datasets", help="root of the datasets (default: datasets)")
    p.add_argument("--checkpoints-dir", default="checkpoints",
                   help="checkpoint registry (default: checkpoints)")
    p.add_argument("--dry-run", action="store_true", help="only report what would be removed")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cmd_gc)
