"""The on-disk checkpoint registry (DESIGN section 7): named ONNX models with a verified kind.

Layout under the root (default ``checkpoints/``)::

    index.json                     {"schema_version": 1, "checkpoints": {name: entry}}
    index.json.lock                flock for read-modify-write of the index
    <name>.<sha256[:12]>.onnx      the registered copy of the model

An entry records the kind, the IO signature, the ``weights_hash`` (adapters.weights_hash),
the file's size and sha256, where it came from and when it was registered. The model copy
is written (atomically) before the index points at it and carries its content hash in its
file name, so a crash never leaves an index entry describing a file it does not name.

Registration limits: a model file larger than the size cap (default 256 MiB; the
constructor's ``max_model_bytes`` or the ``RLHF_MAX_MODEL_BYTES`` environment variable) is
refused (``model_too_large``) from ``os.stat``, before any byte is read. The file is copied
into the registry in chunks, hashing as it goes (never read whole to hash it), and every
check (ONNX parse, kind, onnxruntime load) runs on that private copy, so the registered
bytes are exactly the bytes checked.

Protection: the promoted checkpoint and every checkpoint a rollback could restore are never
overwritten (``checkpoint_protected``, naming the pointer or history that protects it); the
check is :meth:`CheckpointRegistry.check_replaceable`, held under the promotion lock while an
overwrite is written (``extrarlhf.checkpoints.promoted.promotion_guard``). While a promotion record is
damaged (``corrupt_record``: a history line, ``promoted.json``) nobody can tell which
checkpoints a rollback could restore, so no overwrite is allowed until it is fixed (the refusal
names the damaged record).

A registered name is a valid actor spec: ``registry.policy(name, seed)`` builds a
:class:`adapters.ModelPolicy` that checks the recorded weights hash when it loads and, on a
mismatch (or a missing file), plays its fallback baseline with a warning instead of failing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import stat
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from adapters import KindMismatch, ModelPolicy
from adapters.decision import AdapterError
from adapters.model_files import (
    DEFAULT_MAX_MODEL_BYTES,
    MAX_MODEL_BYTES_ENV,
    ModelFileError,
    max_model_bytes,
    open_model_file,
    read_model_file,
    sha256_model_file,
)
from adapters.model_files import size_text as _size_text
from adapters.onnx_contracts import MODEL_KINDS, canonical_kind, check_kind, detect_kind, signature, weights_hash
from adapters.onnx_models import new_session

from ..core.clock import utc_now
from ..core.errors import InvalidArgument, NotFound, RLHFError, UnsupportedSchema
from ..core.fileio import _current_umask, atomic_write_json, fsync_dir, locked, writing
from ..core.names import check_name

CHECKPOINTS_SCHEMA_VERSION = 1
DEFAULT_ROOT = "checkpoints"
_HEX64 = re.compile(r"[0-9a-f]{64}")
HASH_CHUNK = 1024 * 1024
_ENTRY_FIELDS = {"name": str, "kind": str, "file": str, "signature": dict, "weights_hash": str, "size_bytes": int,
                 "sha256": str, "registered_at": str, "source_path": str}


class KindMismatchError(RLHFError):
    """An explicit kind does not fit the model's signature (or no kind fits it)."""

    code = "kind_mismatch"


class CheckpointExists(RLHFError):
    code = "already_exists"


class CorruptIndex(RLHFError):
    code = "corrupt_index"


class ModelTooLarge(RLHFError):
    """A model file above the registry's size cap (checked before reading it)."""

    code = "model_too_large"


class ProtectedCheckpoint(RLHFError):
    """An overwrite of the promoted checkpoint or of one a rollback could restore."""

    code = "checkpoint_protected"


def _check_cap(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{where} must be a positive number of bytes, got {value!r}")
    return value


@dataclass(frozen=True)
class Checkpoint:
    name: str
    kind: str
    path: Path  # the registered copy
    weights_hash: str
    sha256: str
    size_bytes: int
    registered_at: str
    signature: dict[str, Any]
    source_path: str

    @property
    def spec(self) -> str:
        """The actor spec of this checkpoint: its name."""
        return self.name

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["path"] = str(self.path)
        return d


def _sha256_file(path: str | os.PathLike[str]) -> str:
    """sha256 of a model file, read in chunks (memory stays flat whatever its size) through
    adapters.model_files: never through a link, never a FIFO or device, never above the cap."""
    return sha256_model_file(path)


class CheckpointRegistry:
    """Named checkpoints under ``root``. Reads need no lock (the index is replaced atomically);
    registration holds the index lock, so concurrent registrations never lose an entry."""

    def __init__(self, root: str | os.PathLike[str] = DEFAULT_ROOT, *, max_model_bytes: int | None = None) -> None:
        self.root = Path(root)
        self.index_path = self.root / "index.json"
        self._max_model_bytes = None if max_model_bytes is None else _check_cap(max_model_bytes, "max_model_bytes")

    @property
    def max_model_bytes(self) -> int:
        """The registration size cap: the constructor's ``max_model_bytes``, else
        ``RLHF_MAX_MODEL_BYTES``, else 256 MiB."""
        if self._max_model_bytes is not None:
            return self._max_model_bytes
        try:
            return max_model_bytes()
        except AdapterError as exc:
            raise InvalidArgument(str(exc)) from None

    # ------------------------------------------------------------------ index
    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            text = self.index_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            doc = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CorruptIndex(f"{self.index_path} is not valid JSON ({exc}); restore it or move it aside and "
                               f"register the checkpoints again") from None
        if not isinstance(doc, dict):
            raise CorruptIndex(f"{self.index_path}: expected a JSON object")
        if doc.get("schema_version") != CHECKPOINTS_SCHEMA_VERSION:
            raise UnsupportedSchema(f"{self.index_path}: schema_version {doc.get('schema_version')!r} is not "
                                    f"supported (this version reads {CHECKPOINTS_SCHEMA_VERSION})")
        entries = doc.get("checkpoints")
        if not isinstance(entries, dict):
            raise CorruptIndex(f"{self.index_path}: 'checkpoints' must be an object of name -> entry")
        for name, entry in entries.items():
            self._check_entry(name, entry)
        return entries

    def _check_entry(self, name: str, entry: Any) -> None:
        def bad(why: str) -> CorruptIndex:
            return CorruptIndex(f"{self.index_path}: entry {name!r} {why}")

        if not isinstance(entry, dict):
            raise bad("is not an object")
        for field, typ in _ENTRY_FIELDS.items():
            if not isinstance(entry.get(field), typ) or isinstance(entry.get(field), bool):
                raise bad(f"has no valid {field!r} ({typ.__name__} expected)")
        if entry["name"] != name:
            raise bad(f"is named {entry['name']!r} inside")
        try:
            check_name(name, "checkpoint")
        except InvalidArgument as exc:
            raise bad(str(exc)) from None
        if entry["kind"] not in MODEL_KINDS:
            raise bad(f"has unknown kind {entry['kind']!r}")
        if not (_HEX64.fullmatch(entry["weights_hash"]) and _HEX64.fullmatch(entry["sha256"])):
            raise bad("has a malformed hash")
        if entry["file"] != self._file_name(name, entry["sha256"]):
            raise bad(f"points at {entry['file']!r}, not at its own model file")

    @staticmethod
    def _file_name(name: str, sha256: str) -> str:
        return f"{name}.{sha256[:12]}.onnx"

    def _to_checkpoint(self, entry: dict[str, Any]) -> Checkpoint:
        return Checkpoint(name=entry["name"], kind=entry["kind"], path=(self.root / entry["file"]).absolute(),
                          weights_hash=entry["weights_hash"], sha256=entry["sha256"], size_bytes=entry["size_bytes"],
                          registered_at=entry["registered_at"], signature=entry["signature"],
                          source_path=entry["source_path"])

    # ------------------------------------------------------------------ writing
    def check_replaceable(self, name: str) -> None:
        """Refuse (``checkpoint_protected``) when ``name`` may not be overwritten: it is the
        promoted checkpoint, a rollback could restore it, or an unfinished promotion names it.
        ``register`` runs the same check under the promotion lock; callers (``train_policy``)
        use this one to fail before doing any work."""
        from .promoted import promotion_guard  # promoted.py reads this registry too

        with promotion_guard(self.root) as protected:
            self._refuse_protected(name, protected)

    def check_writable(self, name: str, overwrite: bool) -> None:
        """Refuse before any work what registering ``name`` would: an existing name without
        ``overwrite`` (``already_exists``), or one that may not be replaced (:meth:`check_replaceable`)."""
        if name in self.specs():
            if not overwrite:
                raise RLHFError(f"checkpoint {name!r} already exists; choose another name or pass overwrite=true",
                                "already_exists")
            self.check_replaceable(name)

    def _refuse_protected(self, name: str, protected: dict[str, str]) -> None:
        if name in protected:
            if getattr(protected, "unknowable", False) and not dict.__contains__(protected, name):
                raise ProtectedCheckpoint(f"checkpoint {name!r} {protected[name]}; it is not overwritten until then")
            raise ProtectedCheckpoint(f"checkpoint {name!r} {protected[name]}; it is never overwritten: register or "
                                      f"train the new model under another name, benchmark it and promote it")

    def _copy_in(self, src: Path, size: int, cap: int) -> tuple[Path, str, int]:
        """Copy ``src`` into a temp file of the registry in chunks, hashing as it goes; the
        copy is refused if the file grew past ``cap`` since it was measured."""
        with writing(self.root, f"copying the model {src.name} into the checkpoint registry"):
            return self._copy_in_unchecked(src, size, cap)

    def _copy_in_unchecked(self, src: Path, size: int, cap: int) -> tuple[Path, str, int]:
        # named like fileio's temp files (.<target>.<pid>-<random>.tmp): `gc` can tell a dead writer's copy
        stem = re.sub(r"[^A-Za-z0-9_-]", "_", src.stem)[:40]
        fd, tmp_name = tempfile.mkstemp(prefix=f".register-{stem}.{os.getpid()}-", suffix=".tmp", dir=self.root)
        tmp = Path(tmp_name)
        digest, copied = hashlib.sha256(), 0
        grew = ModelTooLarge(f"model file {src} grew past the registration cap of {_size_text(cap)} while it was "
                             f"copied (it measured {_size_text(size)})")
        try:
            os.fchmod(fd, 0o666 & ~_current_umask())
            try:  # the user's own path: a link is followed, but it must lead to a regular file (not a FIFO, a device)
                with open_model_file(src, follow_symlinks=True, max_bytes=cap) as (fh, _):
                    for chunk in iter(lambda: fh.read(HASH_CHUNK), b""):
                        copied += len(chunk)
                        if copied > cap:
                            raise grew
                        digest.update(chunk)
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(fd, view):]
            except ModelFileError as exc:
                if exc.code == "model_too_large":  # above the cap by the time it was opened
                    raise grew from None
                raise
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        return tmp, digest.hexdigest(), copied

    def register(self, name: str, path: str | os.PathLike[str], kind: str | None = None, *,
                 overwrite: bool = False) -> Checkpoint:
        """Copy the model at ``path`` into the registry as ``name``.

        ``kind`` (``legacy_onnx``, ``action_onnx``/``v4``, ``v5``) is checked against the
        model's signature and a mismatch refused (expected vs found); None detects it. A file
        above :attr:`max_model_bytes` is refused (``model_too_large``) before it is read;
        ``overwrite=True`` never replaces a protected checkpoint (``checkpoint_protected``)."""
        check_name(name, "checkpoint")
        if not isinstance(overwrite, bool):
            raise InvalidArgument(f"overwrite must be true or false, got {overwrite!r}")
        src = Path(path)
        try:
            st = os.stat(src)
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound(f"model file {src} does not exist") from None
        if not stat.S_ISREG(st.st_mode):
            raise NotFound(f"model file {src} is not a regular file")
        cap = self.max_model_bytes
        if st.st_size > cap:
            source = ("max_model_bytes" if self._max_model_bytes is not None else
                      MAX_MODEL_BYTES_ENV if os.environ.get(MAX_MODEL_BYTES_ENV, "").strip() else "the default")
            raise ModelTooLarge(f"model file {src} is {_size_text(st.st_size)}, above the registration cap of "
                                f"{_size_text(cap)} (set by {source}); to register it, raise the cap with "
                                f"{MAX_MODEL_BYTES_ENV}=<bytes> in the environment of the process that registers "
                                f"(or CheckpointRegistry(max_model_bytes=...))")
        with writing(self.root, "creating the checkpoints directory"):
            self.root.mkdir(parents=True, exist_ok=True)
        tmp, sha, size = self._copy_in(src, st.st_size, cap)
        try:
            data = read_model_file(tmp, max_bytes=cap)  # our private copy, read once for every check
            import onnx  # here, not at module level: the MCP server starts without it (issue 27)

            try:
                model = onnx.load_from_string(data)
            except Exception as exc:  # noqa: BLE001 - protobuf raises several types for garbage
                raise InvalidArgument(f"{src} is not a readable ONNX model ({type(exc).__name__}: {exc})") from None
            if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
                raise InvalidArgument(f"{src} keeps its weights in external data files; re-save it as one file "
                                      f"(onnx.save(model, path, save_as_external_data=False))")
            sig = signature(model)
            if kind is None:
                try:
                    kind = detect_kind(sig)
                except KindMismatch as exc:
                    raise KindMismatchError(str(exc)) from None
            else:
                try:
                    if not isinstance(kind, str):
                        raise AdapterError(f"kind must be a string, got {kind!r}")
                    kind = canonical_kind(kind)
                except AdapterError as exc:
                    raise InvalidArgument(f"cannot register {name!r}: {exc}") from None
                try:
                    check_kind(kind, sig)
                except KindMismatch as exc:
                    raise KindMismatchError(f"refusing to register {name!r} as {kind}: {exc}") from None
            try:
                new_session(data)
            except Exception as exc:  # noqa: BLE001 - onnxruntime's own exception types
                raise InvalidArgument(f"onnxruntime cannot load {src}: {type(exc).__name__}: {exc}") from None
            entry = {"name": name, "kind": kind, "file": self._file_name(name, sha), "signature": sig,
                     "weights_hash": weights_hash(model), "size_bytes": size, "sha256": sha,
                     "registered_at": utc_now(), "source_path": str(src.absolute())}
            del model, data
            with locked(self.index_path), contextlib.ExitStack() as stack:
                entries = self._read()
                old = entries.get(name)
                if old is not None and not overwrite:
                    raise CheckpointExists(f"checkpoint {name!r} already exists (kind {old['kind']}, weights_hash "
                                           f"{old['weights_hash'][:12]}...); pass overwrite=True to replace it")
                if old is not None:  # held until the index names the new file: no promotion in between
                    from .promoted import promotion_guard  # promoted.py reads this registry too

                    self._refuse_protected(name, stack.enter_context(promotion_guard(self.root)))
                with writing(self.root, f"registering checkpoint {name!r}"):
                    os.replace(tmp, self.root / entry["file"])
                    fsync_dir(self.root)
                entries[name] = entry
                atomic_write_json(self.index_path, {"schema_version": CHECKPOINTS_SCHEMA_VERSION,
                                                    "checkpoints": dict(sorted(entries.items()))})
                if old is not None and old["file"] != entry["file"]:
                    (self.root / old["file"]).unlink(missing_ok=True)
        finally:
            tmp.unlink(missing_ok=True)
        return self._to_checkpoint(entry)

    def register_written(self, name: str, write: Callable[[Path], None], kind: str, *, label: str,
                         overwrite: bool = False) -> Checkpoint:
        """Register a model a trainer writes: ``write(tmp)`` saves it to a temp file in the
        registry's directory, named like fileio's temp files (``.<label>-<name>.onnx.<pid>-<random>.tmp``,
        so ``gc`` can tell a dead trainer's export), which :meth:`register` copies in; the temp
        file is removed whatever happens."""
        with writing(self.root, "creating the checkpoints directory"):
            self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{label}-{name}.onnx.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        try:
            write(tmp)
            return self.register(name, tmp, kind, overwrite=overwrite)
        finally:
            tmp.unlink(missing_ok=True)

    # ------------------------------------------------------------------ reading
    def specs(self) -> list[str]:
        """The registered names, sorted: each is a valid opponent / p1_model spec."""
        return sorted(self._read())

    def list(self) -> list[dict[str, Any]]:
        """Every checkpoint as a JSON-ready dict (see :meth:`inspect`), sorted by name."""
        return [self._to_checkpoint(e).as_dict() for _, e in sorted(self._read().items())]

    def get(self, name: str) -> Checkpoint:
        entries = self._read()
        if not isinstance(name, str) or name not in entries:
            known = ", ".join(sorted(entries)) or f"none (no checkpoints registered in {self.root})"
            raise NotFound(f"unknown checkpoint {name!r}; registered: {known}")
        return self._to_checkpoint(entries[name])

    def inspect(self, name: str) -> dict[str, Any]:
        """The entry plus a check of the stored file: ``file_present``, ``file_intact`` (its
        sha256 still matches the registration) and ``file_problem`` (why it is not intact when
        it cannot even be read: a link, a FIFO, a device, a file above the size cap; else None)."""
        cp = self.get(name)
        info = cp.as_dict()
        info["file_problem"] = None
        try:
            info["file_present"], info["file_intact"] = True, _sha256_file(cp.path) == cp.sha256
        except ModelFileError as exc:
            info["file_present"], info["file_intact"] = exc.code != "not_found", False
            if exc.code != "not_found":
                info["file_problem"] = str(exc)
        return info

    def policy(self, name: str, seed: int = 0, *, fallback: str = "greedy", sample: bool = False) -> ModelPolicy:
        """A policy playing checkpoint ``name``; it verifies the recorded weights hash when it
        loads and degrades (fallback baseline + warning on every decision) on a mismatch."""
        cp = self.get(name)
        return ModelPolicy(cp.path, cp.kind, expected_weights_hash=cp.weights_hash, seed=seed, fallback=fallback,
                           sample=sample, spec=cp.name)
