"""Export trained weights as a ``v5`` ONNX model (onnx.helper), then prove it computes what
numpy computes.

Graph (inputs ``obs`` [N, OBS_DIM], ``action_features`` [N, A, ACTION_FEATURE_DIM],
``action_mask`` [N, A], N and A dynamic)::

    ho     = Reshape(MatMul(obs, W1o), [-1, 1, H])               # [N, 1, H], broadcast over A
    h1     = Relu(MatMul(action_features, W1a) + ho + b1)        # [N, A, H]
    h2     = Relu(MatMul(h1, W2) + b2)                           # [N, A, H2]
    logits = MatMul(h2, w3) + (action_mask - 1) * 1e9            # [N, A]; masked -> about -1e9
    value  = Tanh(MatMul(Relu(MatMul(obs, Wv) + bv), wv2) + bv2)  # [N, 1]

A legal position (mask 1) gets its raw score plus exactly 0, so its logit equals numpy's.
:func:`verify_export` runs the saved file in onnxruntime on real decisions (padded to the
batch's widest legal set) and compares logits on the legal positions and the value with
:func:`extrarlhf.training.bc.forward_padded`; any difference above the tolerance refuses the
export.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import engine
from adapters.model_files import read_model_file
from adapters.onnx_models import check_kind, new_session, signature, weights_hash

from ..core.errors import RLHFError
from .bc import PARAM_ORDER, Params, forward_padded
from .data import Decisions

OPSET = 17
IR_VERSION = 9
TOLERANCE = 1e-4
PRODUCER = "extrarlhf-training"


class ExportMismatch(RLHFError):
    """The exported graph does not reproduce the numpy forward pass."""

    code = "export_mismatch"


def build_model(params: Params, metadata: dict[str, str] | None = None) -> onnx.ModelProto:
    """The v5 ONNX model of ``params`` (checked with onnx.checker)."""
    hidden = int(params["W1o"].shape[1])
    inits = [numpy_helper.from_array(np.ascontiguousarray(params[name], dtype=np.float32), name)
             for name in PARAM_ORDER]
    inits += [numpy_helper.from_array(np.array([-1, 1, hidden], np.int64), "shape_n1h"),
              numpy_helper.from_array(np.array(1.0, np.float32), "one"),
              numpy_helper.from_array(np.array(1e9, np.float32), "big")]
    node = helper.make_node
    nodes = [
        node("MatMul", ["obs", "W1o"], ["ho"]),
        node("Reshape", ["ho", "shape_n1h"], ["ho3"]),
        node("MatMul", ["action_features", "W1a"], ["ha"]),
        node("Add", ["ha", "ho3"], ["z1a"]),
        node("Add", ["z1a", "b1"], ["z1"]),
        node("Relu", ["z1"], ["h1"]),
        node("MatMul", ["h1", "W2"], ["z2a"]),
        node("Add", ["z2a", "b2"], ["z2"]),
        node("Relu", ["z2"], ["h2"]),
        node("MatMul", ["h2", "w3"], ["raw"]),
        node("Sub", ["action_mask", "one"], ["mask_m1"]),
        node("Mul", ["mask_m1", "big"], ["penalty"]),
        node("Add", ["raw", "penalty"], ["logits"]),
        node("MatMul", ["obs", "Wv"], ["zva"]),
        node("Add", ["zva", "bv"], ["zv"]),
        node("Relu", ["zv"], ["hv"]),
        node("MatMul", ["hv", "wv2"], ["va"]),
        node("Add", ["va", "bv2"], ["vb"]),
        node("Tanh", ["vb"], ["value"]),
    ]
    vi = helper.make_tensor_value_info
    inputs = [vi("obs", TensorProto.FLOAT, ["N", engine.OBS_DIM]),
              vi("action_features", TensorProto.FLOAT, ["N", "A", engine.ACTION_FEATURE_DIM]),
              vi("action_mask", TensorProto.FLOAT, ["N", "A"])]
    outputs = [vi("logits", TensorProto.FLOAT, ["N", "A"]), vi("value", TensorProto.FLOAT, ["N", 1])]
    graph = helper.make_graph(nodes, "extrarlhf_bc_policy", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name=PRODUCER)
    model.ir_version = IR_VERSION
    for key, value in sorted((metadata or {}).items()):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(model)
    check_kind("v5", signature(model))
    return model


def padded_sample(data: Decisions, n: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first ``n`` decisions as v5 inputs, padded to their widest legal set."""
    n = min(n, len(data))
    counts = data.counts[:n]
    width = int(counts.max()) if n else 1
    feats = np.zeros((n, width, engine.ACTION_FEATURE_DIM), np.float32)
    mask = np.zeros((n, width), np.float32)
    for i in range(n):
        lo, hi = data.offsets[i], data.offsets[i + 1]
        feats[i, :hi - lo] = data.features[lo:hi]
        mask[i, :hi - lo] = 1.0
    return data.obs[:n].copy(), feats, mask


def verify_export(path: str | os.PathLike[str], params: Params, sample: Decisions,
                  tolerance: float = TOLERANCE, n: int = 64) -> dict[str, Any]:
    """Run the file in onnxruntime and compare with numpy; raises :class:`ExportMismatch`."""
    obs, feats, mask = padded_sample(sample, n)
    session = new_session(read_model_file(path))
    logits, value = session.run(["logits", "value"], {"obs": obs, "action_features": feats, "action_mask": mask})
    ref_logits, ref_value = forward_padded(params, obs, feats, mask)
    legal = mask > 0
    logit_diff = float(np.abs(logits[legal] - ref_logits[legal]).max()) if legal.any() else 0.0
    value_diff = float(np.abs(value - ref_value).max()) if value.size else 0.0
    masked_max = float(logits[~legal].max()) if (~legal).any() else None
    problems = []
    if logits.shape != ref_logits.shape or value.shape != ref_value.shape:
        problems.append(f"shapes {logits.shape}/{value.shape} differ from numpy's {ref_logits.shape}/"
                        f"{ref_value.shape}")
    if not np.isfinite(logits[legal]).all() or not np.isfinite(value).all():
        problems.append("non-finite outputs on legal positions")
    if logit_diff > tolerance or value_diff > tolerance:
        problems.append(f"max |onnx - numpy| is {logit_diff:.3g} on logits and {value_diff:.3g} on value "
                        f"(tolerance {tolerance})")
    if masked_max is not None and masked_max > -1e8:
        problems.append(f"a padded position kept logit {masked_max:.3g} (expected about -1e9)")
    if problems:
        raise ExportMismatch(f"exported model {path} does not reproduce the numpy forward pass: "
                             + "; ".join(problems))
    return {"decisions": int(obs.shape[0]), "max_width": int(mask.shape[1]), "max_abs_logit_diff": logit_diff,
            "max_abs_value_diff": value_diff, "tolerance": tolerance}


def export_onnx(params: Params, path: str | os.PathLike[str], sample: Decisions,
                metadata: dict[str, str] | None = None) -> dict[str, Any]:
    """Write the v5 model to ``path``, verify it, return ``{"path", "weights_hash", "verification"}``."""
    model = build_model(params, metadata)
    onnx.save(model, os.fspath(path))
    verification = verify_export(path, params, sample)
    return {"path": os.fspath(path), "weights_hash": weights_hash(model), "verification": verification}
