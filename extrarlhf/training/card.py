"""The model card: what a trained checkpoint is, what it learned from and how well.

Written as ``<checkpoints_dir>/<name>.card.json`` (atomically) next to the registered model
file ``<name>.<sha256[:12]>.onnx``. It names the dataset by id *and* by the sha256 of its
``manifest.json`` (an overwritten dataset version has another manifest), the seed and every
hyper-parameter, the per-epoch train/val loss and top-1 agreement, and the weights_hash the
registry recorded, so a card describes one set of weights and nothing else.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime

import engine

from ..errors import NotFound, UnsupportedSchema
from ..fileio import atomic_write_json
from ..runtime.trace import utc_now

CARD_SCHEMA_VERSION = 1
CARD_SUFFIX = ".card.json"


def card_path(checkpoints_dir: str | os.PathLike[str], name: str) -> Path:
    return Path(checkpoints_dir) / f"{name}{CARD_SUFFIX}"


def build_card(*, name: str, checkpoint: dict[str, Any], dataset: dict[str, Any], seed: int, imitate: str,
               hyperparameters: dict[str, Any], data: dict[str, Any], history: list[dict[str, Any]],
               final: dict[str, Any], export: dict[str, Any], blas_threads: int | None,
               seconds: float) -> dict[str, Any]:
    """The card as a JSON-ready dict (see the module docstring)."""
    return {
        "schema_version": CARD_SCHEMA_VERSION,
        "kind": "model_card",
        "name": name,
        "created_at": utc_now(),
        "model": {"kind": "v5", "architecture": "mlp_action_scorer",
                  "description": "h1 = relu(obs W1o + action_features W1a + b1); h2 = relu(h1 W2 + b2); "
                                 "logit = h2 w3 (masked actions -1e9); value = tanh(relu(obs Wv + bv) wv2 + bv2)",
                  "inputs": {"obs": ["N", engine.OBS_DIM], "action_features": ["N", "A", engine.ACTION_FEATURE_DIM],
                             "action_mask": ["N", "A"]},
                  "outputs": {"logits": ["N", "A"], "value": ["N", 1]}, "obs_version": engine.OBS_VERSION,
                  "ruleset": engine.RULESET},
        "checkpoint": {**{k: checkpoint[k] for k in ("name", "kind", "weights_hash", "sha256", "size_bytes",
                                                     "registered_at")},
                       "file": Path(checkpoint["path"]).name},
        "weights_hash": checkpoint["weights_hash"],
        "dataset": dataset,
        "training": {"method": "behaviour_cloning", "loss": "cross-entropy of the chosen action under the softmax "
                                                            "over its decision's legal actions; value: squared "
                                                            "error to the outcome",
                     "imitate": imitate, "seed": seed, "rng": "numpy.random.Generator(PCG64(seed))",
                     "optimizer": "adam", "hyperparameters": hyperparameters, "data": data,
                     "blas_threads": blas_threads, "seconds": round(seconds, 3)},
        "metrics": {"per_epoch": history, "final": final,
                    "top1_definition": "share of imitated decisions with more than one legal action where the "
                                       "model's highest logit is the recorded choice"},
        "export": export,
        "environment": {"python": platform.python_version(), "numpy": np.__version__, "onnx": onnx.__version__,
                        "onnxruntime": onnxruntime.__version__, "engine": engine.ENGINE_VERSION,
                        "machine": platform.machine()},
    }


def write_card(checkpoints_dir: str | os.PathLike[str], card: dict[str, Any]) -> Path:
    path = card_path(checkpoints_dir, card["name"])
    atomic_write_json(path, card)
    return path


def read_card(checkpoints_dir: str | os.PathLike[str], name: str) -> dict[str, Any]:
    path = card_path(checkpoints_dir, name)
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotFound(f"checkpoint {name!r} has no model card ({path}); it was not trained by train_policy") \
            from None
    except json.JSONDecodeError as exc:
        raise UnsupportedSchema(f"{path} is not valid JSON ({exc})") from None
    got = card.get("schema_version") if isinstance(card, dict) else None
    if got != CARD_SCHEMA_VERSION:
        raise UnsupportedSchema(f"{path}: model card schema_version {got!r} is not "
                                f"supported (this version reads {CARD_SCHEMA_VERSION})")
    return card
