"""Confinement of every dataset path to one datasets dir, and the names inside it.

Follows the MCP filesystem reference server: a requested path is taken relative to the
datasets dir, then its *real* path (symlinks resolved) must lie inside the *real* datasets
dir, compared with a separator boundary (``/data/ds2`` is not inside ``/data/ds``). For a
path that does not exist yet (a file or folder about to be created), the real path of its
nearest existing ancestor is checked instead, so a symlinked parent pointing out is caught
too. Absolute paths and ``..`` components are refused outright, before anything is
resolved. The datasets dir itself may be a symlink: it is the configured root. Links that
stay inside are followed. The checks run before each use; the datasets dir is trusted local
storage, so a link swapped in by another local process between a check and its use is not
defended against (requests that name a path outside are what is stopped).

Layout (see docs/data-format.md, "Datasets")::

    <datasets>/<name>/v<N>/                 a published version (manifest.json + Parquet files)
    <datasets>/<name>/.tmp-v<N>-<pid>-<hex>/ a version being built (never read it)
    <datasets>/<name>/.old-v<N>-<pid>-<hex>/ the previous content of v<N> during an overwrite
    <datasets>/<name>/.trash-v<N>-<pid>-<hex>/ an overwritten version being deleted
    <datasets>/<name>/.publish.lock         serializes publications of one name
    <datasets>/pointers/<pointer>.json      promoted pointers

A dataset *reference* is ``NAME`` (its latest version), ``NAME/vN`` (one version, the
``dataset_id``) or ``@POINTER`` (what a promoted pointer names).
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

from ..core.errors import InvalidArgument, NotFound, PathOutsideDatasetsDir
from ..core.names import check_name

DEFAULT_DATASETS_DIR = "datasets"
POINTERS_DIR = "pointers"
RESERVED_NAMES = frozenset({POINTERS_DIR})
VERSION_DIR = re.compile(r"v([1-9][0-9]{0,8})")

__all__ = ["DEFAULT_DATASETS_DIR", "POINTERS_DIR", "DatasetsDir", "DatasetRef", "check_dataset_name",
           "check_pointer_name", "check_positive_int", "parse_ref", "within"]


def within(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or inside it (both absolute and normalized)."""
    root = root.rstrip(os.sep) or os.sep
    return path == root or path.startswith(root if root.endswith(os.sep) else root + os.sep)


def check_dataset_name(value: Any) -> str:
    name = check_name(value, "dataset")
    if name in RESERVED_NAMES:
        raise InvalidArgument(f"dataset name {name!r} is reserved (the datasets dir keeps its pointers there); "
                              f"choose another name")
    return name


def check_pointer_name(value: Any) -> str:
    return check_name(value, "pointer")


def check_positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{what} must be a positive integer, got {value!r}")
    return value


def _check_relative(value: Any, what: str = "dataset path") -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value or "\x00" in value:
        raise InvalidArgument(f"{what} must be a non-empty text without NUL, got {value!r}")
    if os.path.isabs(value):
        raise PathOutsideDatasetsDir(
            f"{what} {value!r} is absolute; dataset paths are relative to the datasets dir (and confined to it)")
    if ".." in PurePosixPath(value).parts or ".." in Path(value).parts:
        raise PathOutsideDatasetsDir(f"{what} {value!r} contains '..'; dataset paths are confined to the "
                                     f"datasets dir and may not climb out of it")
    return value


class DatasetRef:
    """A parsed dataset reference: ``name`` with an optional ``version``, or a ``pointer``."""

    __slots__ = ("name", "version", "pointer")

    def __init__(self, name: str | None = None, version: int | None = None, pointer: str | None = None) -> None:
        self.name, self.version, self.pointer = name, version, pointer

    def __repr__(self) -> str:
        return f"@{self.pointer}" if self.pointer else (f"{self.name}/v{self.version}" if self.version else
                                                        str(self.name))


def parse_ref(ref: Any) -> DatasetRef:
    """``NAME``, ``NAME/vN`` or ``@POINTER``; confinement errors come before name errors."""
    if isinstance(ref, str) and ref.startswith("@"):
        return DatasetRef(pointer=check_pointer_name(ref[1:]))
    text = _check_relative(ref, "dataset reference")
    parts = PurePosixPath(text).parts
    if len(parts) == 1:
        return DatasetRef(check_dataset_name(parts[0]))
    if len(parts) == 2:
        match = VERSION_DIR.fullmatch(parts[1])
        if match:
            return DatasetRef(check_dataset_name(parts[0]), int(match.group(1)))
    raise InvalidArgument(f"dataset reference {text!r} is not understood: use NAME (latest version), NAME/vN "
                          f"(one version, e.g. greedy/v2) or @POINTER")


class DatasetsDir:
    """The datasets dir and the confined paths inside it."""

    def __init__(self, root: str | os.PathLike[str] = DEFAULT_DATASETS_DIR) -> None:
        if isinstance(root, DatasetsDir):
            root = root.root
        self.root = Path(root)

    def real_root(self, *, create: bool = False) -> str:
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
        real = os.path.realpath(self.root)
        if os.path.exists(real) and not os.path.isdir(real):
            raise InvalidArgument(f"datasets dir {self.root} is not a directory")
        return real

    def resolve(self, relative: Any, *, create_root: bool = False) -> Path:
        """The real path of ``relative`` inside the datasets dir, or PathOutsideDatasetsDir.

        Existing paths are resolved with every symlink followed; for a path that does not
        exist yet, the nearest existing ancestor is resolved and checked, then the missing
        components are appended (they cannot be symlinks: they do not exist).
        """
        rel = _check_relative(relative)
        root = self.real_root(create=create_root)
        path = os.path.normpath(os.path.join(root, rel))
        missing: list[str] = []
        while not os.path.lexists(path) and path != root:
            path, tail = os.path.split(path)
            missing.append(tail)
        real = os.path.realpath(path)
        if not within(real, root):
            raise PathOutsideDatasetsDir(
                f"dataset path {rel!r} resolves outside the datasets dir {root} (through a symlink); "
                f"datasets are confined to that dir: remove the link or copy the data inside")
        return Path(real).joinpath(*reversed(missing))

    # ------------------------------------------------------------------ named places
    def dataset_dir(self, name: str, *, create_root: bool = False) -> Path:
        return self.resolve(check_dataset_name(name), create_root=create_root)

    def version_dir(self, name: str, version: int) -> Path:
        return self.resolve(f"{check_dataset_name(name)}/v{int(version)}")

    def pointers_dir(self, *, create_root: bool = False) -> Path:
        return self.resolve(POINTERS_DIR, create_root=create_root)

    def pointer_path(self, pointer: str, *, create_root: bool = False) -> Path:
        return self.resolve(f"{POINTERS_DIR}/{check_pointer_name(pointer)}.json", create_root=create_root)

    def versions(self, name: str) -> list[int]:
        """Published versions of a dataset (folders ``v<N>`` holding a manifest), ascending."""
        folder = self.dataset_dir(name)
        if not folder.is_dir():
            return []
        out = []
        for child in folder.iterdir():
            match = VERSION_DIR.fullmatch(child.name)
            if match and (child / "manifest.json").is_file():
                out.append(int(match.group(1)))
        return sorted(out)

    def names(self) -> list[str]:
        """Dataset names present (folders with a valid name), sorted; nothing is resolved here."""
        root = Path(self.real_root())
        if not root.is_dir():
            return []
        out = []
        for child in root.iterdir():
            if child.name in RESERVED_NAMES or child.name.startswith("."):
                continue
            try:
                check_dataset_name(child.name)
            except InvalidArgument:
                continue
            if child.is_dir():
                out.append(child.name)
        return sorted(out)

    def locate(self, ref: Any) -> tuple[str, int]:
        """(name, version) of a reference; NAME means its latest version. Pointers are
        resolved by :func:`extrarlhf.datasets.publish.read_pointer`, not here."""
        parsed = parse_ref(ref) if not isinstance(ref, DatasetRef) else ref
        if parsed.pointer:
            raise InvalidArgument("a pointer reference must be resolved through its pointer file")
        name = parsed.name
        folder = self.dataset_dir(name)  # confinement of the name itself (symlinked dataset folder)
        if parsed.version is not None:
            path = self.version_dir(name, parsed.version)
            if not (path / "manifest.json").is_file():
                known = ", ".join(f"v{v}" for v in self.versions(name)) or "none"
                raise NotFound(f"dataset {name}/v{parsed.version} does not exist (versions of {name!r}: {known})")
            return name, parsed.version
        versions = self.versions(name) if folder.is_dir() else []
        if not versions:
            known = ", ".join(self.names()) or "none yet"
            raise NotFound(f"dataset {name!r} has no published version under {self.root} (datasets: {known})")
        self.version_dir(name, versions[-1])
        return name, versions[-1]
