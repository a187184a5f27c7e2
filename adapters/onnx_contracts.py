"""The IO contracts of ONNX policies per kind, a model's signature, kind detection and the
weights hash.

Kinds (DESIGN section 7), N = batch, A = candidate actions (the legal ones, padded):

* ``legacy_onnx``: ``obs`` [N, OBS_DIM] -> ``logits`` [N, 163] (one per action id);
* ``action_onnx`` (alias ``v4``): ``obs`` [N, OBS_DIM], ``action_features``
  [N, A, ACTION_FEATURE_DIM], ``action_mask`` [N, A] -> ``scores`` [N, A];
* ``v5``: the same inputs -> ``logits`` [N, A] and ``value`` [N, 1].

``weights_hash`` is a digest of a model's weights alone, by name (a re-save keeps it).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from engine import ACTION_FEATURE_DIM, ACTION_SPACE_SIZE, OBS_DIM

from .decision import AdapterError, KindMismatch
from .model_files import read_model_file

if TYPE_CHECKING:  # onnx is imported where a model is read (start-up cost)
    import onnx


MODEL_KINDS = ("legacy_onnx", "action_onnx", "v5")
KIND_ALIASES = {"v4": "action_onnx"}

# name -> (allowed element types, shape); str dims are dynamic, int dims fixed.
_OBS = {"obs": (("float",), ("N", OBS_DIM))}
_ACTION_INPUTS = {**_OBS, "action_features": (("float",), ("N", "A", ACTION_FEATURE_DIM)),
                  "action_mask": (("float", "bool"), ("N", "A"))}
CONTRACTS: dict[str, dict[str, dict[str, tuple[tuple[str, ...], tuple[str | int, ...]]]]] = {
    "legacy_onnx": {"inputs": _OBS, "outputs": {"logits": (("float",), ("N", ACTION_SPACE_SIZE))}},
    "action_onnx": {"inputs": _ACTION_INPUTS, "outputs": {"scores": (("float",), ("N", "A"))}},
    "v5": {"inputs": _ACTION_INPUTS, "outputs": {"logits": (("float",), ("N", "A")), "value": (("float",), ("N", 1))}},
}
OUTPUT_NAMES = {kind: tuple(c["outputs"]) for kind, c in CONTRACTS.items()}
_MAX_MESSAGE = 400


def canonical_kind(kind: str) -> str:
    """``v4`` -> ``action_onnx``; refuses anything that is not an ONNX kind."""
    kind = KIND_ALIASES.get(kind, kind)
    if kind not in CONTRACTS:
        raise AdapterError(f"unknown model kind {kind!r}; ONNX kinds: {', '.join(MODEL_KINDS)} "
                           f"(alias {', '.join(f'{a}={k}' for a, k in KIND_ALIASES.items())})")
    return kind


def _as_model(model_or_path: onnx.ModelProto | bytes | str | os.PathLike[str]) -> onnx.ModelProto:
    import onnx

    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path
    if isinstance(model_or_path, (bytes, bytearray)):
        return onnx.load_from_string(bytes(model_or_path))
    return onnx.load_from_string(read_model_file(model_or_path))  # a regular file under the cap, or refused


def _graphs(graph: onnx.GraphProto) -> Iterable[onnx.GraphProto]:
    """The graph and every subgraph (If/Loop/Scan bodies)."""
    import onnx

    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _graphs(g)


def _weight_tensors(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """Initializers (dense and sparse, subgraphs included) plus the tensors of Constant nodes,
    which some exporters use for weights; keyed by a name that does not depend on node order."""
    import onnx
    from onnx import numpy_helper

    tensors: dict[str, onnx.TensorProto] = {}
    for graph in _graphs(model.graph):
        for t in graph.initializer:
            tensors[f"init:{t.name}"] = t
        for sp in graph.sparse_initializer:
            tensors[f"sparse_values:{sp.values.name}"] = sp.values
            tensors[f"sparse_indices:{sp.values.name}"] = sp.indices
            tensors[f"sparse_dims:{sp.values.name}"] = numpy_helper.from_array(np.asarray(sp.dims, dtype=np.int64))
        for node in graph.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
                for attr in node.attribute:
                    if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                        tensors[f"const:{node.output[0]}"] = attr.t
    return tensors


def weights_hash(model_or_path: onnx.ModelProto | bytes | str | os.PathLike[str]) -> str:
    """sha256 (hex) over the model's weights, sorted by name: name, dtype, dims, raw bytes.

    The bytes come from ``numpy_helper.to_array`` (little-endian), so the hash does not
    depend on how a tensor is stored (``raw_data`` or typed fields), on the order of nodes
    or initializers, on doc strings or on producer metadata: a re-save keeps it."""
    import onnx
    from onnx import numpy_helper

    model = _as_model(model_or_path)
    digest = hashlib.sha256(b"extrarlhf-weights-v1\0")
    for key, tensor in sorted(_weight_tensors(model).items()):
        arr = numpy_helper.to_array(tensor)
        if arr.dtype == object:  # string tensors
            data = b"".join(len(b).to_bytes(8, "little") + b for b in
                            (x if isinstance(x, bytes) else str(x).encode() for x in arr.ravel()))
        else:
            data = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header = json.dumps({"name": key, "dtype": onnx.TensorProto.DataType.Name(tensor.data_type),
                             "dims": [int(d) for d in tensor.dims]}, sort_keys=True).encode()
        for part in (header, data):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
    return digest.hexdigest()


def _type_and_shape(value_info: onnx.ValueInfoProto) -> tuple[str, list[int | str | None] | None]:
    import onnx

    t = value_info.type
    if t.HasField("tensor_type"):
        elem = onnx.TensorProto.DataType.Name(t.tensor_type.elem_type).lower()
        if not t.tensor_type.HasField("shape"):
            return elem, None
        dims: list[int | str | None] = []
        for d in t.tensor_type.shape.dim:
            dims.append(int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None))
        return elem, dims
    return t.WhichOneof("value") or "unknown", None


def signature(model_or_path: onnx.ModelProto | bytes | str | os.PathLike[str]) -> dict[str, list[dict[str, Any]]]:
    """The model's graph inputs (initializers excluded) and outputs: name, element type, shape.

    Shapes are lists whose entries are an int (fixed), a str (named dynamic dim) or None
    (unknown); a shape of None means the rank is unknown."""
    model = _as_model(model_or_path)  # from bytes: external data files are never loaded
    inits = {t.name for t in model.graph.initializer}

    def entry(v: onnx.ValueInfoProto) -> dict[str, Any]:
        elem, shape = _type_and_shape(v)
        return {"name": v.name, "type": elem, "shape": shape}

    return {"inputs": [entry(v) for v in model.graph.input if v.name not in inits],
            "outputs": [entry(v) for v in model.graph.output]}


def _fmt_shape(shape: Sequence[int | str | None] | None) -> str:
    return "[?]" if shape is None else "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def format_signature(sig: dict[str, list[dict[str, Any]]]) -> str:
    """``obs float[N, 476] -> logits float[N, 163]``."""
    def side(entries: list[dict[str, Any]]) -> str:
        return ", ".join(f"{e['name']} {e['type']}{_fmt_shape(e['shape'])}" for e in entries) or "(none)"
    return f"{side(sig['inputs'])} -> {side(sig['outputs'])}"


def contract_signature(kind: str) -> dict[str, list[dict[str, Any]]]:
    """The expected signature of a kind, in the same form as :func:`signature`."""
    contract = CONTRACTS[canonical_kind(kind)]
    return {side: [{"name": name, "type": "|".join(types), "shape": list(shape)}
                   for name, (types, shape) in contract[side].items()] for side in ("inputs", "outputs")}


def _problems(kind: str, sig: dict[str, list[dict[str, Any]]]) -> list[str]:
    problems: list[str] = []
    for side in ("inputs", "outputs"):
        expected = CONTRACTS[kind][side]
        found = {e["name"]: e for e in sig[side]}
        word = side[:-1]
        for name in expected:
            if name not in found:
                problems.append(f"missing {word} {name!r}")
        for name in found:
            if name not in expected:
                problems.append(f"unexpected {word} {name!r}")
        for name, (types, shape) in expected.items():
            if name not in found:
                continue
            got = found[name]
            if got["type"] not in types:
                problems.append(f"{word} {name!r} has element type {got['type']}, expected {'|'.join(types)}")
            got_shape = got["shape"]
            if got_shape is None:
                continue  # unknown rank: onnxruntime and the output checks decide at run time
            if len(got_shape) != len(shape):
                problems.append(f"{word} {name!r} has rank {len(got_shape)} {_fmt_shape(got_shape)}, "
                                f"expected {_fmt_shape(shape)}")
                continue
            for axis, (want, have) in enumerate(zip(shape, got_shape)):
                if isinstance(want, str) and isinstance(have, int):
                    problems.append(f"{word} {name!r} axis {axis} ({want}) must be dynamic, found fixed {have}")
                elif isinstance(want, int) and isinstance(have, int) and want != have:
                    problems.append(f"{word} {name!r} axis {axis} is {have}, expected {want}")
    return problems


def check_kind(kind: str, sig: dict[str, list[dict[str, Any]]]) -> None:
    """Raise :class:`KindMismatch` (expected vs found) unless ``sig`` fits ``kind``'s contract."""
    kind = canonical_kind(kind)
    problems = _problems(kind, sig)
    if problems:
        expected = contract_signature(kind)
        raise KindMismatch(f"model does not fit kind {kind!r}: expected {format_signature(expected)}; "
                           f"found {format_signature(sig)} ({'; '.join(problems)})",
                           expected=expected, found=sig)


def detect_kind(sig: dict[str, list[dict[str, Any]]]) -> str:
    """The one kind whose contract ``sig`` fits; :class:`KindMismatch` listing every kind otherwise."""
    fits = [kind for kind in MODEL_KINDS if not _problems(kind, sig)]
    if len(fits) == 1:
        return fits[0]
    expected = {kind: contract_signature(kind) for kind in MODEL_KINDS}
    why = "; ".join(f"{kind}: {', '.join(_problems(kind, sig))}" for kind in MODEL_KINDS)
    raise KindMismatch(f"cannot detect the model kind: found {format_signature(sig)}, which fits none of "
                       + ", ".join(f"{k} ({format_signature(s)})" for k, s in expected.items())
                       + f" [{why}]", expected=expected, found=sig)
