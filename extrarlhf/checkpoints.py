"""The on-disk checkpoint registry (DESIGN section 7): named ONNX models with a verified kind.

Layout under the root (default ``checkpoints/``)::

    index.json                     {"schema_version": 1, "checkpoints": {name: entry}}
    index.json.lock                flock for read-modify-write of the index
    <name>.<sha256[:12]>.onnx      the registered copy of the model

An entry records the kind, the IO signature, the ``weights_hash`` (adapters.weights_hash),
the file's size and sha256, where it came from and when it was registered. The model copy
is written (atomically) before the index points at it and carries its content hash in its
file name, so a crash never leaves an index entry describing a file it does not name.

A registered name is a valid actor spec: ``registry.policy(name, seed)`` builds a
:class:`adapters.ModelPolicy` that checks the recorded weights hash when it loads and, on a
mismatch (or a missing file), plays its fallback baseline with a warning instead of failing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import onnx

from adapters import KindMismatch, ModelPolicy
from adapters.decision import AdapterError
from adapters.onnx_models import MODEL_KINDS, canonical_kind, check_kind, detect_kind, new_session, signature, \
    weights_hash

from .errors import InvalidArgument, NotFound, RLHFError, UnsupportedSchema
from .fileio import atomic_write_bytes, atomic_write_json, locked
from .sessions import check_name
from .trace import utc_now

CHECKPOINTS_SCHEMA_VERSION = 1
DEFAULT_ROOT = "checkpoints"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_ENTRY_FIELDS = {"name": str, "kind": str, "file": str, "signature": dict, "weights_hash": str, "size_bytes": int,
                 "sha256": str, "registered_at": str, "source_path": str}


class KindMismatchError(RLHFError):
    """An explicit kind does not fit the model's signature (or no kind fits it)."""

    code = "kind_mismatch"


class CheckpointExists(RLHFError):
    code = "already_exists"


class CorruptIndex(RLHFError):
    code = "corrupt_index"


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


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class CheckpointRegistry:
    """Named checkpoints under ``root``. Reads need no lock (the index is replaced atomically);
    registration holds the index lock, so concurrent registrations never lose an entry."""

    def __init__(self, root: str | os.PathLike[str] = DEFAULT_ROOT) -> None:
        self.root = Path(root)
        self.index_path = self.root / "index.json"

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
    def register(self, name: str, path: str | os.PathLike[str], kind: str | None = None, *,
                 overwrite: bool = False) -> Checkpoint:
        """Copy the model at ``path`` into the registry as ``name``.

        ``kind`` (``legacy_onnx``, ``action_onnx``/``v4``, ``v5``) is checked against the
        model's signature and a mismatch refused (expected vs found); None detects it."""
        check_name(name, "checkpoint")
        src = Path(path)
        if not src.is_file():
            raise NotFound(f"model file {src} does not exist")
        data = src.read_bytes()
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
        sha = _sha256(data)
        entry = {"name": name, "kind": kind, "file": self._file_name(name, sha), "signature": sig,
                 "weights_hash": weights_hash(model), "size_bytes": len(data), "sha256": sha,
                 "registered_at": utc_now(), "source_path": str(src.absolute())}
        self.root.mkdir(parents=True, exist_ok=True)
        with locked(self.index_path):
            entries = self._read()
            old = entries.get(name)
            if old is not None and not overwrite:
                raise CheckpointExists(f"checkpoint {name!r} already exists (kind {old['kind']}, weights_hash "
                                       f"{old['weights_hash'][:12]}...); pass overwrite=True to replace it")
            atomic_write_bytes(self.root / entry["file"], data)
            entries[name] = entry
            atomic_write_json(self.index_path, {"schema_version": CHECKPOINTS_SCHEMA_VERSION,
                                                "checkpoints": dict(sorted(entries.items()))})
            if old is not None and old["file"] != entry["file"]:
                (self.root / old["file"]).unlink(missing_ok=True)
        return self._to_checkpoint(entry)

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
        """The entry plus a check of the stored file: ``file_present`` and ``file_intact``
        (its sha256 still matches the registration)."""
        cp = self.get(name)
        info = cp.as_dict()
        try:
            info["file_present"], info["file_intact"] = True, _sha256(cp.path.read_bytes()) == cp.sha256
        except FileNotFoundError:
            info["file_present"], info["file_intact"] = False, False
        return info

    def policy(self, name: str, seed: int = 0, *, fallback: str = "greedy", sample: bool = False) -> ModelPolicy:
        """A policy playing checkpoint ``name``; it verifies the recorded weights hash when it
        loads and degrades (fallback baseline + warning on every decision) on a mismatch."""
        cp = self.get(name)
        return ModelPolicy(cp.path, cp.kind, expected_weights_hash=cp.weights_hash, seed=seed, fallback=fallback,
                           sample=sample, spec=cp.name)
