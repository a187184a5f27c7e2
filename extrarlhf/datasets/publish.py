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
4. A pointer, if asked, is promoted last by atomic replace (see pointers.py), *before* the
   commit point of an overwrite (``before_commit``): a pointer that cannot be written takes
   the version back (a new version is removed, an overwritten one restored), so an error
   return means nothing was published.
5. After the commit point, still under the lock, the dataset card ``<name>/README.md``
   (card.py: Hugging Face YAML metadata, features, splits, provenance of every version) is
   rewritten atomically. It is derived data outside every version, so no manifest lists it;
   a card that cannot be written never undoes the publication: the result's ``card`` says
   why (``error``) and ``datasets card NAME`` rewrites it.

A publisher killed at any step leaves no visible half version: a ``.tmp-`` folder (ignored by
readers, deleted by the next publication), or an ``.old-`` folder that the next publication
(or :func:`recover`) restores, or a ``.trash-`` folder that it deletes. Each publication also
sweeps the *other* dataset folders whose lock it can take at once (nobody publishing there):
their dead publishers' leftovers are recovered and their unused ``.publish.lock`` removed
(``extrarlhf gc`` does the same for the whole datasets, sessions and checkpoints dirs).

Resources: a full, read-only or forbidden filesystem stops a publication with ``disk_full``,
``read_only`` or ``permission_denied`` naming the dataset folder (fileio.writing); the temp
folder is deleted and every Parquet writer of the failed build is released first, so no
descriptor to a deleted file survives the error.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path
from typing import Any, Callable

from ..core.errors import DatasetExists, InvalidArgument, RLHFError, ValidationFailed, resource_error
from ..core.fileio import LockBusy, fsync_dir, locked, writing
from ..core.procs import pid_alive
from .card import write_dataset_card
from .paths import VERSION_DIR, DatasetsDir, check_dataset_name, check_positive_int
from .tables import abort_writers_under

__all__ = ["publish_version", "recover", "recover_entries", "sweep_dataset", "fsync_tree", "leftovers",
           "PUBLISH_LOCK"]

PUBLISH_LOCK = ".publish"  # locked(<name>/.publish) holds <name>/.publish.lock

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


def recover_entries(folder: Path, *, dry_run: bool = False) -> list[dict[str, Any]]:
    """Undo what dead publishers left in one dataset folder (call under its lock).

    ``.tmp-`` (an unfinished build) is deleted; ``.old-`` (an overwrite that did not commit)
    is restored to its version, replacing the uncommitted new one; ``.trash-`` (a committed
    overwrite whose old copy was being deleted) is deleted. Folders of live owners are left
    alone (and listed with ``action: "left"``). Returns one entry per leftover: ``path``,
    ``kind`` (tmp/old/trash), ``version``, ``pid``, ``action`` (deleted/restored/left) and
    ``message``. ``dry_run`` only says what would be done.
    """
    done = []
    for item in leftovers(folder):
        path = folder / item["folder"]
        entry = {"path": str(path), "kind": item["kind"], "version": item["version"], "pid": item["pid"]}
        if item["owner_alive"]:
            done.append({**entry, "action": "left", "message": f"left {item['folder']}: its publisher (pid "
                                                               f"{item['pid']}) is alive"})
            continue
        try:
            if item["kind"] == "old":
                target = folder / f"v{item['version']}"
                if not dry_run:
                    if target.exists():
                        aside = folder / f".trash-v{item['version']}-{os.getpid()}-{secrets.token_hex(4)}"
                        os.rename(target, aside)
                        shutil.rmtree(aside, ignore_errors=True)
                    os.rename(path, target)
                    fsync_dir(folder)
                done.append({**entry, "action": "restored",
                             "message": f"restored v{item['version']} from an overwrite that did not complete"})
            else:
                if not dry_run:
                    shutil.rmtree(path)
                done.append({**entry, "action": "deleted",
                             "message": f"removed {item['folder']} left by a dead publisher (pid {item['pid']})"})
        except OSError as exc:  # reported, never fatal: the next publication or gc tries again
            error = resource_error(exc, folder, f"cleaning up {item['folder']}")
            done.append({**entry, "action": "failed",
                         "message": f"could not clean up {item['folder']}: {error or exc}",
                         "code": error.code if error else "os_error"})
    return done


def recover(folder: Path) -> list[str]:
    """:func:`recover_entries` as one line per thing done (call under the folder's lock)."""
    return [e["message"] for e in recover_entries(folder) if e["action"] in ("deleted", "restored")]


def sweep_dataset(folder: Path, *, dry_run: bool = False,
                  remove_lock: bool | None = None) -> list[dict[str, Any]] | None:
    """Recover one dataset folder if nobody is publishing there: its lock is taken without
    waiting (None when it is held: a live publication, which recovers on its own), its dead
    publishers' leftovers are recovered (:func:`recover_entries`), and its lock file is
    removed on release when ``remove_lock`` (default: unless ``dry_run``)."""
    if remove_lock is None:
        remove_lock = not dry_run
    try:
        with locked(folder / PUBLISH_LOCK, wait=False, remove=remove_lock):
            return recover_entries(folder, dry_run=dry_run)
    except LockBusy:
        return None


def _sweep_siblings(dirs: DatasetsDir, name: str) -> list[str]:
    """Best effort, at each publication: the other dataset folders with leftovers of dead
    publishers or an unused lock file are swept (see :func:`sweep_dataset`)."""
    done = []
    for other in dirs.names():
        if other == name:
            continue
        try:
            folder = dirs.dataset_dir(other)
            if not folder.is_dir():
                continue
            names = [p.name for p in folder.iterdir()]
            if not any(n == PUBLISH_LOCK + ".lock" or n.startswith(_PREFIXES) for n in names):
                continue
            entries = sweep_dataset(folder) or []
        except (OSError, RLHFError):
            continue  # someone else's folder: never fail this publication for it
        done += [f"{other}: {e['message']}" for e in entries if e["action"] in ("deleted", "restored")]
    return done


def publish_version(dirs: DatasetsDir, name: str, build: Callable[[Path, str, int], dict[str, Any]], *,
                    version: int | None = None, overwrite: bool = False,
                    validate: Callable[[Path], list[dict[str, Any]]] | None = None,
                    before_commit: Callable[[Path, dict[str, Any], int], None] | None = None) -> dict[str, Any]:
    """Build and publish ``<name>/v<N>``; returns ``build``'s result plus publication facts.

    ``build(tmp_dir, dataset_id, version)`` writes every file (``manifest.json`` last) into the
    temp folder. ``validate(folder)`` returns a list of failures; a non-empty list aborts the
    publication with ValidationFailed (nothing visible changes). ``before_commit(path, result,
    version)`` (the pointer step, pointers.PointerStep) runs once the version is in place at
    ``path``, before the commit point: if it raises, the version is taken back (a new one is
    removed, an overwritten one restored) and the error propagates, so an error return always
    means nothing was published.
    """
    name = check_dataset_name(name)
    if version is not None:
        check_positive_int(version, "version")
    if not isinstance(overwrite, bool):
        raise InvalidArgument(f"overwrite must be true or false, got {overwrite!r}")
    with writing(dirs.root, f"creating the dataset folder of {name!r}"):
        folder = dirs.dataset_dir(name, create_root=True)
        folder.mkdir(exist_ok=True)
    folder = dirs.dataset_dir(name)  # re-resolve: the folder may have been a (now existing) link target
    with writing(folder, f"publishing dataset {name!r}"), locked(folder / PUBLISH_LOCK):
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
            abort_writers_under(tmp)  # writers no error path closed: no descriptor to a deleted file
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if not replaced:
            os.rename(tmp, target)  # the commit point (without a pointer step); refuses if the target appeared
            fsync_dir(folder)
            if before_commit is not None:
                try:
                    before_commit(target, result, version)
                except BaseException:  # take the new version back: nothing was published
                    trash = folder / f".trash-{token}"
                    os.rename(target, trash)
                    fsync_dir(folder)
                    shutil.rmtree(trash, ignore_errors=True)
                    raise
        else:
            old = folder / f".old-{token}"
            os.rename(target, old)
            try:
                os.rename(tmp, target)
                fsync_dir(folder)
                if before_commit is not None:
                    before_commit(target, result, version)
            except BaseException:  # roll back: the old version goes back where it was
                if target.exists() and not tmp.exists():  # the new version is in place: take it out first
                    os.rename(target, folder / f".trash-{token}")
                if not target.exists():
                    os.rename(old, target)
                fsync_dir(folder)
                shutil.rmtree(tmp, ignore_errors=True)
                shutil.rmtree(folder / f".trash-{token}", ignore_errors=True)
                raise
            trash = folder / f".trash-{token}"
            os.rename(old, trash)  # the commit point of an overwrite
            fsync_dir(folder)
            shutil.rmtree(trash, ignore_errors=True)
        card = _write_card(dirs, name)
    recovered += _sweep_siblings(dirs, name)
    return {**result, "dataset_id": dataset_id, "name": name, "version": version, "path": str(target),
            "replaced": replaced, "recovered": recovered, "card": card}


def _write_card(dirs: DatasetsDir, name: str) -> dict[str, Any]:
    """Rewrite the dataset card after a commit: ``{"path", "error"}``; never raises (the
    version is published whatever happens to its card)."""
    try:
        return {"path": write_dataset_card(name, datasets_dir=dirs)["path"], "error": None}
    except (OSError, RLHFError) as exc:
        return {"path": None, "error": f"the dataset card {name}/README.md was not rewritten ({exc}); the version "
                                       f"is published: fix that, then run `python -m extrarlhf datasets card {name}`"}
