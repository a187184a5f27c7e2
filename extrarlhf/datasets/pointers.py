"""Promoted pointers (``<datasets>/pointers/<pointer>.json``) and reference resolution.

A pointer names one published version and records the sha256 of its ``manifest.json``
when it was promoted; a version overwritten afterwards no longer matches, and resolving the
pointer then fails (``stale_pointer``) instead of silently serving other data. A pointer is
replaced atomically (temp file, fsync, rename) under a lock, so readers see the old or the
new pointer, never a mix.

A pointer document missing a field, with a field of the wrong type or a ``dataset_id`` that
is not ``NAME/vN`` is a :class:`~extrarlhf.core.errors.CorruptRecord` (``corrupt_record``) naming the file and the
field; re-pointing it (``promote_dataset``) replaces it.

Publication with a pointer (``promote=`` of materialize, splits and exports) is ordered so
that an error return means nothing was published: :class:`PointerStep` checks the pointer's
place (confined to the datasets dir, a folder this process can create files in) before
anything is built, and writes the pointer as the last step of the publication, before its
commit point (``publish_version(before_commit=...)``): a pointer write that fails takes the
version back (a new one is removed, an overwritten one restored).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..core.clock import utc_now
from ..core.errors import InvalidArgument, RLHFError, corrupt_record
from ..core.fileio import atomic_write_json, locked, read_json_document, writing
from .paths import DatasetRef, DatasetsDir, check_pointer_name, parse_ref

POINTER_SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
_HEX64 = re.compile(r"[0-9a-f]{64}")

__all__ = ["POINTER_SCHEMA_VERSION", "Resolved", "read_pointer", "write_pointer", "resolve", "manifest_sha256",
           "list_pointers", "check_pointer_target", "PointerStep"]


def manifest_sha256(version_dir: Path) -> str:
    return hashlib.sha256((version_dir / MANIFEST).read_bytes()).hexdigest()


def _pointer_problem(doc: dict[str, Any]) -> tuple[str, str] | None:
    """(field, why) for the first thing wrong with a pointer document, or None."""
    dataset_id = doc.get("dataset_id")
    if not isinstance(dataset_id, str):
        return "dataset_id", f"is missing or not a text (got {dataset_id!r}); it names the version, NAME/vN"
    try:
        ref = parse_ref(dataset_id)
    except RLHFError as exc:
        return "dataset_id", f"{dataset_id!r} is not a dataset version ({exc})"
    if ref.pointer or ref.version is None:
        return "dataset_id", f"{dataset_id!r} is not a dataset version NAME/vN"
    sha = doc.get("manifest_sha256")
    if not isinstance(sha, str) or not _HEX64.fullmatch(sha):
        return "manifest_sha256", f"is missing or not a sha256 hex digest (got {sha!r})"
    if "name" in doc and doc["name"] != ref.name:
        return "name", f"is {doc['name']!r} but dataset_id names {ref.name!r}"
    if "version" in doc and (isinstance(doc["version"], bool) or doc["version"] != ref.version):
        return "version", f"is {doc['version']!r} but dataset_id names version {ref.version}"
    for key in ("pointer", "promoted_at"):
        if key in doc and not isinstance(doc[key], str):
            return key, f"must be a text (got {doc[key]!r})"
    if doc.get("previous") is not None and not isinstance(doc["previous"], str):
        return "previous", f"must be null or a dataset id (got {doc['previous']!r})"
    return None


def read_pointer(dirs: DatasetsDir, pointer: str) -> dict[str, Any]:
    """The pointer document; a missing one is ``not_found``, one with a missing or malformed
    field ``corrupt_record`` (naming the file and the field)."""
    path = dirs.pointer_path(pointer)
    doc = read_json_document(path, POINTER_SCHEMA_VERSION, what="pointer ",
                             missing=f"pointer {pointer!r} does not exist (promote a dataset to it first)")
    problem = _pointer_problem(doc)
    if problem is not None:
        raise corrupt_record(problem[1], path=path, field=problem[0],
                            hint=f"point it at a version again (promote_dataset NAME/vN {pointer}) or remove it")
    return doc


def list_pointers(dirs: DatasetsDir) -> list[dict[str, Any]]:
    folder = Path(dirs.real_root()) / "pointers"
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        name = path.name[:-len(".json")]
        try:
            out.append(read_pointer(dirs, name))
        except RLHFError as exc:
            out.append({"pointer": name, "error": {"code": exc.code, "message": str(exc),
                                                   "details": getattr(exc, "details", None)}})
    return out


def write_pointer(dirs: DatasetsDir, pointer: str, name: str, version: int, sha256: str) -> dict[str, Any]:
    """Point ``pointer`` at ``name/v<version>`` atomically; returns the new pointer document
    (with ``previous``: the dataset_id it named before, or null)."""
    path = dirs.pointer_path(pointer, create_root=True)
    path.parent.mkdir(exist_ok=True)
    path = dirs.pointer_path(pointer)  # re-check now that the folder exists
    with locked(path):
        previous = None
        if path.exists():
            try:
                previous = read_pointer(dirs, pointer).get("dataset_id")
            except RLHFError:
                previous = None
        doc = {"schema_version": POINTER_SCHEMA_VERSION, "pointer": pointer, "dataset_id": f"{name}/v{version}",
               "name": name, "version": version, "manifest_sha256": sha256, "promoted_at": utc_now(),
               "previous": previous}
        atomic_write_json(path, doc)
    return doc


def check_pointer_target(dirs: DatasetsDir, pointer: str) -> Path:
    """Check, before anything is published, that ``pointer`` can be written: its path is
    confined to the datasets dir (``path_outside_datasets_dir`` for a pointers folder or a
    pointer file linked outside), an existing pointer is a file, and this process can create
    files in the pointers folder (its lock file is created and taken: ``read_only``,
    ``permission_denied``, ``disk_full`` naming the folder). Creates the pointers folder;
    returns the pointer's path."""
    check_pointer_name(pointer)
    path = dirs.pointer_path(pointer, create_root=True)
    with writing(path.parent, f"creating the pointers folder for pointer {pointer!r}"):
        path.parent.mkdir(exist_ok=True)
    path = dirs.pointer_path(pointer)  # re-check now that the folder exists
    if path.exists() and not path.is_file():
        raise InvalidArgument(f"pointer {pointer!r}: {path} exists and is not a file; move it aside")
    with writing(path.parent, f"checking that pointer {pointer!r} can be written"), locked(path):
        pass
    return path


class PointerStep:
    """The pointer step of a publication (``promote=``): built before the publication, which
    checks the pointer's place (:func:`check_pointer_target`), and passed to
    ``publish_version(before_commit=step)``, which calls it once the version is in place and
    takes the version back if it raises. ``doc`` is the pointer document written (None until
    then, and when ``when`` said no)."""

    def __init__(self, dirs: DatasetsDir, pointer: str, name: str,
                 when: Callable[[dict[str, Any]], bool] | None = None) -> None:
        self.dirs, self.pointer, self.name, self.when = dirs, pointer, name, when
        self.doc: dict[str, Any] | None = None
        check_pointer_target(dirs, pointer)

    def __call__(self, path: Path, result: dict[str, Any], version: int) -> None:
        if self.when is not None and not self.when(result):
            return
        self.doc = write_pointer(self.dirs, self.pointer, self.name, version, manifest_sha256(path))


@dataclass
class Resolved:
    """A dataset reference resolved to one published version."""

    name: str
    version: int
    path: Path
    pointer: dict[str, Any] | None = None
    stale: bool = False

    @property
    def dataset_id(self) -> str:
        return f"{self.name}/v{self.version}"


def resolve(dirs: DatasetsDir, ref: Any, *, allow_stale: bool = False) -> Resolved:
    """Resolve ``NAME``, ``NAME/vN`` or ``@POINTER`` to a published version, confined."""
    parsed = parse_ref(ref) if not isinstance(ref, DatasetRef) else ref
    doc = None
    if parsed.pointer:
        doc = read_pointer(dirs, parsed.pointer)
        parsed = parse_ref(doc["dataset_id"])
    name, version = dirs.locate(parsed)
    path = dirs.version_dir(name, version)
    stale = bool(doc) and manifest_sha256(path) != doc.get("manifest_sha256")
    if stale and not allow_stale:
        raise RLHFError(f"pointer {doc['pointer']!r} is stale: {name}/v{version} was overwritten after it was "
                        f"promoted (its manifest no longer matches); validate the version and promote it again",
                        "stale_pointer")
    return Resolved(name, version, path, doc, stale)
