"""Crash-safe publication of dataset versions (DESIGN section 9, "Publication").

1. Under the dataset's lock (``<name>/.publish.lock``), leftovers of dead publishers are
   cleaned up (:func:`recover`) and the version is chosen: the next free ``v<N>``, or the
   one asked for. An existing target is refused unless ``overwrite=True``.
2. The version is built in ``<name>/.tmp-v<N>-<pid>-<hex>/`` (same filesystem), every file
   and the folder are fsynced, and the result is **validated there**, so a visible version
   has always passed validation.
3. New version: one ``rename`` to ``<name>/v<N>`` (the commit point). Overwrite: the old
   folder is renamed aside to ``.old-v<N>-...``, the new one renamed into place, then the
   old one is renamed to ``.trash-...`` (the commit point) and deleted. Any error before the
   commit puts the old version back (rollback); the old version stays complete on disk the
   whole time.
4. A pointer, if asked, is promoted last by atomic replace (see pointers.py).

A publisher killed at any step leaves no visible half version: a ``.tmp-`` folder (ignored by
readers, deleted by the next publication), or an ``.old-`` folder that the next publication
(or :func:`recover`) restores, or a ``.trash-`` folder that it deletes.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Callable

from ..errors import DatasetExists, InvalidArgument, ValidationFailed
from ..fileio import fsync_dir, locked
from ..procs import pid_alive
from .paths import VERSION_DIR, DatasetsDir, check_dataset_name, check_positive_int

__all__ = ["publish_version", "recover", "fsync_tree", "leftovers"]

_PREFIXES = (".tmp-", ".old-", ".trash-")


def fsync_tree(folder: Path) -> None:
    """fsync every file under ``folder`` and every folder, deepest first."""
    for dirpath, dirnames, filenames in os.walk(folder, topdown=False):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(dirpath)


def _owner(entry: Path) -> tuple[str, int, int | None] | None:
    """(kind, version, pid) of a ``.tmp-vN-<pid>-<hex>`` style folder, else None."""
    for prefix in _PREFIXES:
        if entry.name.startswith(prefix):
            parts = entry.name[len(prefix):].split("-")
            if len(parts) == 3 and VERSION_DIR.fullmatch(parts[0]) and parts[1].isdigit():
                return prefix.strip(".-"), int(parts[0][1:]), int(parts[1])
    return None


def leftovers(folder: Path) -> list[dict[str, Any]]:
    """Temp/backup folders in a dataset folder, with whether their owner is still alive."""
    out = []
    if folder.is_dir():
        for entry in sorted(folder.iterdir()):
            owner = _owner(entry)
            if owner:
                out.append({"folder": entry.name, "kind": owner[0], "version": owner[1], "pid": owner[2],
                            "owner_alive": bool(owner[2]) and pid_alive(owner[2])})
    return out


def recover(folder: Path) -> list[str]:
    """Undo what dead publishers left in one dataset folder (call under its lock).

    ``.tmp-`` (an unfinished build) is deleted; ``.old-`` (an overwrite that did not commit)
    is restored to its version, replacing the uncommitted new one; ``.trash-`` (a committed
    overwrite whose old copy was being deleted) is deleted. Folders of live owners are left
    alone. Returns what was done, one line each.
    """
    done = []
    for item in leftovers(folder):
        if item["owner_alive"]:
            continue
        path = folder / item["folder"]
        if item["kind"] == "old":
            target = folder / f"v{item['version']}"
            if target.exists():
                aside = folder / f".trash-v{item['version']}-{os.getpid()}-{secrets.token_hex(4)}"
                os.rename(target, aside)
                shutil.rmtree(aside, ignore_errors=True)
            os.rename(path, target)
            fsync_dir(folder)
            done.append(f"restored v{item['version']} from an overwrite that did not complete")
        else:
            shutil.rmtree(path, ignore_errors=True)
            done.append(f"removed {item['folder']} left by a dead publisher (pid {item['pid']})")
    return done


def publish_version(dirs: DatasetsDir, name: str, build: Callable[[Path, str, int], dict[str, Any]], *,
                    version: int | None = None, overwrite: bool = False,
                    validate: Callable[[Path], list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Build and publish ``<name>/v<N>``; returns ``build``'s result plus publication facts.

    ``build(tmp_dir, dataset_id, version)`` writes every file (``manifest.json`` last) into the
    temp folder. ``validate(folder)`` returns a list of failures; a non-empty list aborts the
    publication with ValidationFailed (nothing visible changes).
    """
    name = check_dataset_name(name)
    if version is not None:
        check_positive_int(version, "version")
    if not isinstance(overwrite, bool):
        raise InvalidArgument(f"overwrite must be true or false, got {overwrite!r}")
    folder = dirs.dataset_dir(name, create_root=True)
    folder.mkdir(exist_ok=True)
    folder = dirs.dataset_dir(name)  # re-resolve: the folder may have been a (now existing) link target
    with locked(folder / ".publish"):
        recovered = recover(folder)
        existing = dirs.versions(name)
        if version is None:
            version = max([0, *existing, *(o["version"] for o in leftovers(folder))]) + 1
        target = dirs.version_dir(name, version)
        replaced = target.exists() or os.path.lexists(target)
        if replaced and not overwrite:
            raise DatasetExists(f"dataset {name}/v{version} already exists; publish a new version (omit the "
                                f"version) or pass overwrite=true to replace it")
        dataset_id = f"{name}/v{version}"
        token = f"v{version}-{os.getpid()}-{secrets.token_hex(4)}"
        tmp = folder / f".tmp-{token}"
        os.mkdir(tmp)
        try:
            result = build(tmp, dataset_id, version)
            fsync_tree(tmp)
            failures = validate(tmp) if validate else []
            if failures:
                raise ValidationFailed(f"{dataset_id} failed validation before publication: "
                                       + "; ".join(f"[{f['code']}] {f['message']}" for f in failures[:5]),
                                       failures)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if not replaced:
            os.rename(tmp, target)  # the commit point; refuses if the target appeared meanwhile
            fsync_dir(folder)
        else:
            old = folder / f".old-{token}"
            os.rename(target, old)
            try:
                os.rename(tmp, target)
                fsync_dir(folder)
            except BaseException:  # roll back: the old version goes back where it was
                if not target.exists():
                    os.rename(old, target)
                fsync_dir(folder)
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            trash = folder / f".trash-{token}"
            os.rename(old, trash)  # the commit point of an overwrite
            fsync_dir(folder)
            shutil.rmtree(trash, ignore_errors=True)
    return {**result, "dataset_id": dataset_id, "name": name, "version": version, "path": str(target),
            "replaced": replaced, "recovered": recovered}
