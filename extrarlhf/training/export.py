"""Export a trained model.ActionScorer as a ``v5`` ONNX model through ``torch.onnx``, then prove
it computes what torch computes.

The graph is torch's trace of :meth:`ActionScorer.forward` (the TorchScript exporter,
``dynamo=False``: it needs no onnxscript), opset 17, inputs ``obs`` [N, OBS_DIM],
``action_features`` [N, A, ACTION_FEATURE_DIM], ``action_mask`` [N, A], outputs ``logits``
[N, A] (masked positions about -1e9) and ``value`` [N, 1], N and A dynamic; checked with
onnx.checker and ``check_kind("v5", ...)``, the metadata props added. :func:`verify_export`
runs the saved file in onnxruntime on held-out decisions (padded to the batch's widest legal
set) and compares logits on the legal positions and the value with the torch forward; any
difference above the tolerance refuses the export (:class:`ExportMismatch`).

Imported only when a training runs (torch is the ``train`` extra).
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from typing import Any

import numpy as np
import onnx
import torch

import engine
from adapters.model_files import read_model_file
from adapters.onnx_contracts import check_kind, signature, weights_hash
from adapters.onnx_models import new_session

from ..checkpoints.registry import Checkpoint, CheckpointRegistry
from ..core.errors import RLHFError
from .data import Decisions
from .model import ActionScorer

OPSET = 17
TOLERANCE = 1e-4
PRODUCER = "extrarlhf-training"


class ExportMismatch(RLHFError):
    """The exported graph does not reproduce the torch forward pass."""

    code = "export_mismatch"


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


_OUTPUT_AXES = {"logits": {0: "N", 1: "A"}, "scores": {0: "N", 1: "A"}, "value": {0: "N"}}


def build_model(model: torch.nn.Module, metadata: dict[str, str] | None = None, *,
                outputs: tuple[str, ...] = ("logits", "value"), kind: str = "v5") -> onnx.ModelProto:
    """The ``kind`` ONNX model of ``model`` (on the CPU; checked with onnx.checker and
    check_kind): a v5 ActionScorer, or (``outputs=("scores",)``, ``kind="action_onnx"``) a
    module whose forward returns the scores only, such as the reward model's."""
    # exported in train mode (the network has no dropout or batch norm: the same graph), so that
    # torch's exporter dedups initializers by storage, not by value: two all-zero biases stay two
    # initializers named for their parameters (model.from_onnx reads them back)
    model = model.to("cpu").train()
    a = 3
    example = (torch.zeros(2, engine.OBS_DIM), torch.zeros(2, a, engine.ACTION_FEATURE_DIM), torch.ones(2, a))
    buffer = io.BytesIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore", DeprecationWarning)  # torch's notice about dynamo=False, here only
        warnings.simplefilter("ignore", FutureWarning)
        torch.onnx.export(model, example, buffer, input_names=["obs", "action_features", "action_mask"],
                          output_names=list(outputs), opset_version=OPSET, dynamo=False,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE,
                          dynamic_axes={"obs": {0: "N"}, "action_features": {0: "N", 1: "A"},
                                        "action_mask": {0: "N", 1: "A"}, **{o: _OUTPUT_AXES[o] for o in outputs}})
    model.eval()
    proto = onnx.load_from_string(buffer.getvalue())
    proto.producer_name = PRODUCER
    for key, value in sorted((metadata or {}).items()):
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(proto)
    check_kind(kind, signature(proto))
    return proto


def torch_forward(model: ActionScorer, obs: np.ndarray, feats: np.ndarray, mask: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The v5 contract computed by torch on the CPU (logits [N, A], value [N, 1])."""
    with torch.no_grad():
        logits, value = model.to("cpu").eval()(torch.from_numpy(obs), torch.from_numpy(feats),
                                                torch.from_numpy(mask))
    return logits.numpy(), value.numpy()


def verify_export(path: str | os.PathLike[str], model: ActionScorer, sample: Decisions,
                  tolerance: float = TOLERANCE, n: int = 64) -> dict[str, Any]:
    """Run the file in onnxruntime and compare with torch; raises :class:`ExportMismatch`."""
    obs, feats, mask = padded_sample(sample, n)
    session = new_session(read_model_file(path))
    logits, value = session.run(["logits", "value"], {"obs": obs, "action_features": feats, "action_mask": mask})
    ref_logits, ref_value = torch_forward(model, obs, feats, mask)
    problems = []
    if logits.shape != ref_logits.shape or value.shape != ref_value.shape:
        problems.append(f"shapes {logits.shape}/{value.shape} differ from torch's {ref_logits.shape}/"
                        f"{ref_value.shape}")
        raise ExportMismatch(f"exported model {path} does not reproduce the torch forward pass: "
                             + "; ".join(problems))
    legal = mask > 0
    logit_diff = float(np.abs(logits[legal] - ref_logits[legal]).max()) if legal.any() else 0.0
    value_diff = float(np.abs(value - ref_value).max()) if value.size else 0.0
    masked_max = float(logits[~legal].max()) if (~legal).any() else None
    if not np.isfinite(logits[legal]).all() or not np.isfinite(value).all():
        problems.append("non-finite outputs on legal positions")
    if logit_diff > tolerance or value_diff > tolerance:
        problems.append(f"max |onnx - torch| is {logit_diff:.3g} on logits and {value_diff:.3g} on value "
                        f"(tolerance {tolerance})")
    if masked_max is not None and masked_max > -1e8:
        problems.append(f"a padded position kept logit {masked_max:.3g} (expected about -1e9)")
    if problems:
        raise ExportMismatch(f"exported model {path} does not reproduce the torch forward pass: "
                             + "; ".join(problems))
    return {"decisions": int(obs.shape[0]), "max_width": int(mask.shape[1]), "max_abs_logit_diff": logit_diff,
            "max_abs_value_diff": value_diff, "tolerance": tolerance}


def export_onnx(model: ActionScorer, path: str | os.PathLike[str], sample: Decisions,
                metadata: dict[str, str] | None = None) -> dict[str, Any]:
    """Write the v5 model to ``path``, verify it on ``sample``, return ``{"path", "weights_hash",
    "verification"}``."""
    proto = build_model(model, metadata)
    onnx.save(proto, os.fspath(path))
    verification = verify_export(path, model, sample)
    return {"path": os.fspath(path), "weights_hash": weights_hash(proto), "verification": verification}


def export_and_register(registry: CheckpointRegistry, name: str, model: ActionScorer, sample: Decisions,
                        metadata: dict[str, str], *, label: str, overwrite: bool = False
                        ) -> tuple[Checkpoint, dict[str, Any]]:
    """(checkpoint, export) of ``model`` exported and verified (:func:`export_onnx`), registered
    as ``v5`` ``name`` (``CheckpointRegistry.register_written``), its registered weights_hash
    checked against the exported one (the registry hashes the same initializers)."""
    exported: dict[str, Any] = {}
    checkpoint = registry.register_written(
        name, lambda tmp: exported.update(export_onnx(model, tmp, sample, metadata=metadata)), "v5",
        label=label, overwrite=overwrite)
    if checkpoint.weights_hash != exported["weights_hash"]:
        raise RLHFError(f"registered weights_hash {checkpoint.weights_hash} differs from the exported "
                        f"{exported['weights_hash']}", "integrity_error")
    return checkpoint, exported
