"""The model card: what a trained checkpoint is, what it learned from and how well.

Written as ``<checkpoints_dir>/<name>.card.json`` (atomically) next to the registered model
file ``<name>.<sha256[:12]>.onnx``. It names the dataset by id *and* by the sha256 of its
``manifest.json`` (an overwritten dataset version has another manifest), the seed and every
hyper-parameter, the per-epoch train/val loss and top-1 agreement, and the weights_hash the
registry recorded, so a card describes one set of weights and nothing else.

Every reader checks that (:func:`read_card`, :func:`card_status`): a card whose
``weights_hash`` is not the one the registry holds for its name now is **stale**
(``stale_card``, naming both hashes and the card): e.g. an overwriting ``train_policy``
killed between the registration of the new weights and the card write leaves the old card
next to the new weights. A card missing a field (or with a field of the wrong type) is a
``corrupt_record`` naming the file and field. ``extrarlhf check`` reports both, and with
``--repair`` moves a stale card aside (:func:`set_stale_card_aside`: it describes weights that
are no longer registered, and is kept, renamed, not deleted).
"""

from __future__ import annotations

import json
import os
import platform
import re
from pathlib import Path
from typing import Any

import numpy as np

import engine

from ..core.clock import utc_now
from ..core.errors import CorruptRecord, NotFound, StaleCard, UnsupportedSchema, corrupt_record
from ..core.fileio import atomic_write_json, fsync_dir, writing

CARD_SCHEMA_VERSION = 1
CARD_SUFFIX = ".card.json"
STALE_SUFFIX = ".stale-"  # <name>.card.json.stale-<weights_hash[:12]>: a stale card set aside
_HEX64 = re.compile(r"[0-9a-f]{64}")
_FIX = "train the checkpoint again to write its card, or move the card aside"


def card_path(checkpoints_dir: str | os.PathLike[str], name: str) -> Path:
    return Path(checkpoints_dir) / f"{name}{CARD_SUFFIX}"


def model_block(architecture: Any) -> dict[str, Any]:
    """The card's ``model`` block for a model.Architecture."""
    arch = {k: getattr(architecture, k)
            for k in ("hidden", "hidden2", "depth", "value_hidden", "members", "encoder", "embed")}
    state = "obs W1o"
    if arch["encoder"] == "sets":
        state = (f"globals W1g + sets Wp + bp, sets = the sum and max over occupied slots of each hand card, own "
                 f"creature and enemy creature through its kind's two ReLU layers of width {arch['embed']}")
    layers = (f"h1 = relu({state} + action_features W1a + b1); h = relu(h1 W2 + b2), depth "
              f"{arch['depth']} layer(s) of width {arch['hidden2']}")
    value = "value = tanh(relu(obs Wv + bv) wv2 + bv2)"
    description = f"{layers}; logit = h w3 (masked actions -1e9); {value}"
    if arch["members"] > 1:
        description = (f"an ensemble of {arch['members']} scorers side by side, each {layers}; score = h w3; "
                       f"logit = the mean of the members' scores (masked actions -1e9); {value}, the first member's")
    return {"kind": "v5", "architecture": "mlp_action_scorer", **arch, "description": description,
            "inputs": {"obs": ["N", engine.OBS_DIM], "action_features": ["N", "A", engine.ACTION_FEATURE_DIM],
                       "action_mask": ["N", "A"]},
            "outputs": {"logits": ["N", "A"], "value": ["N", 1]}, "obs_version": engine.OBS_VERSION,
            "ruleset": engine.RULESET}


def checkpoint_block(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The card's ``checkpoint`` block for a registered checkpoint (``Checkpoint.as_dict()``)."""
    return {**{k: checkpoint[k] for k in ("name", "kind", "weights_hash", "sha256", "size_bytes", "registered_at")},
            "file": Path(checkpoint["path"]).name}


def environment_block() -> dict[str, Any]:
    """The card's ``environment`` block: the versions that produced the weights (onnx and
    onnxruntime imported here, not with the module: ~3 s that every code location load paid)."""
    import onnx
    import onnxruntime
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
            "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__, "engine": engine.ENGINE_VERSION,
            "machine": platform.machine()}


def build_card(*, name: str, checkpoint: dict[str, Any], dataset: dict[str, Any], seed: int, imitate: str,
               hyperparameters: dict[str, Any], data: dict[str, Any], history: list[dict[str, Any]],
               final: dict[str, Any], export: dict[str, Any], architecture: Any, runtime: dict[str, Any],
               seconds: float) -> dict[str, Any]:
    """The card as a JSON-ready dict (see the module docstring); ``architecture`` is the
    model.Architecture trained, ``runtime`` what model.deterministic put in force."""
    return {
        "schema_version": CARD_SCHEMA_VERSION,
        "kind": "model_card",
        "name": name,
        "created_at": utc_now(),
        "model": model_block(architecture),
        "checkpoint": checkpoint_block(checkpoint),
        "weights_hash": checkpoint["weights_hash"],
        "dataset": dataset,
        "training": {"method": "behaviour_cloning",
                     "loss": ("cross-entropy of the softmax of the search teacher's action values (temperature "
                              f"{hyperparameters.get('temperature')}; the chosen action where a decision has none)"
                              if hyperparameters.get("target") == "search_values" else
                              "cross-entropy of the chosen action")
                     + " under the softmax over its decision's legal actions; value: squared error to the outcome",
                     "imitate": imitate, "seed": seed,
                     "rng": "torch.Generator().manual_seed(seed) (initial weights), "
                            "numpy.random.Generator(PCG64(seed)) (streaming shuffle)",
                     "library": "torch", "torch": runtime["torch"], "threads": runtime["threads"],
                     "deterministic_algorithms": runtime["deterministic_algorithms"],
                     "device": hyperparameters.get("device"),
                     "optimizer": "torch.optim.AdamW (decoupled weight decay on weight matrices only; lr x lr_decay "
                                  "per epoch)",
                     "hyperparameters": hyperparameters, "data": data, "seconds": round(seconds, 3)},
        "metrics": {"per_epoch": history, "final": final,
                    "top1_definition": "share of imitated decisions with more than one legal action where the "
                                       "model's highest logit is the recorded choice"},
        "export": export,
        "environment": environment_block(),
    }


def write_card(checkpoints_dir: str | os.PathLike[str], card: dict[str, Any]) -> Path:
    path = card_path(checkpoints_dir, card["name"])
    atomic_write_json(path, card)
    return path


def _load(path: Path, name: str) -> dict[str, Any]:
    """The card at ``path`` checked for shape (not yet against the registry)."""
    where = path.absolute()
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotFound(f"checkpoint {name!r} has no model card ({path}); it was not trained by train_policy") \
            from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise corrupt_record(f"not valid JSON ({exc})", path=where, hint=_FIX) from None
    if not isinstance(card, dict):
        raise corrupt_record("not a JSON object", path=where, hint=_FIX)
    got = card.get("schema_version")
    if got != CARD_SCHEMA_VERSION:
        if got is None or isinstance(got, bool) or not isinstance(got, int):
            raise corrupt_record(f"is missing or not an integer (got {got!r})", path=where, field="schema_version",
                                 hint=_FIX)
        raise UnsupportedSchema(f"{path}: model card schema_version {got!r} is not "
                                f"supported (this version reads {CARD_SCHEMA_VERSION})")
    if card.get("kind") != "model_card":
        raise corrupt_record(f"must be 'model_card' (got {card.get('kind')!r})", path=where, field="kind", hint=_FIX)
    if card.get("name") != name:
        raise corrupt_record(f"is {card.get('name')!r}, not the checkpoint {name!r} the file is named after",
                             path=where, field="name", hint=_FIX)
    weights = card.get("weights_hash")
    if not isinstance(weights, str) or not _HEX64.fullmatch(weights):
        raise corrupt_record(f"is missing or not a sha256 hex digest (got {weights!r})", path=where,
                             field="weights_hash", hint=_FIX)
    block = card.get("checkpoint")
    if not isinstance(block, dict) or block.get("weights_hash") != weights:
        raise corrupt_record(f"must be an object whose weights_hash is the card's ({weights[:16]}...)", path=where,
                             field="checkpoint", hint=_FIX)
    return card


def _stale(path: Path, card: dict[str, Any], name: str, registered: str | None) -> StaleCard:
    ours = card["weights_hash"]
    if registered is None:
        why = f"checkpoint {name!r} is not registered any more"
    else:
        why = f"checkpoint {name!r} is registered with weights_hash {registered[:16]}... now"
    error = StaleCard(f"model card {path.absolute()} is stale: it describes weights_hash {ours[:16]}... (written "
                      f"{card.get('created_at')}) but {why}; the card does not describe the registered weights (an "
                      f"overwriting train_policy interrupted between registration and the card write, or the "
                      f"checkpoint was registered again). Train {name!r} again to get its card, or run "
                      f"`extrarlhf check --repair` to set the stale card aside")
    error.details = {"card": str(path.absolute()), "name": name, "card_weights_hash": ours,  # type: ignore[attr-defined]
                     "registered_weights_hash": registered}
    return error


def read_card(checkpoints_dir: str | os.PathLike[str], name: str) -> dict[str, Any]:
    """The model card of checkpoint ``name``, checked against the registry: ``not_found`` when
    there is none, ``corrupt_record`` (file and field) when it is damaged, ``stale_card`` when
    its ``weights_hash`` is not the one registered under ``name`` now (or ``name`` is no longer
    registered)."""
    from ..checkpoints.registry import CheckpointRegistry

    path = card_path(checkpoints_dir, name)
    card = _load(path, name)
    try:
        registered: str | None = CheckpointRegistry(checkpoints_dir).get(name).weights_hash
    except NotFound:
        registered = None
    if registered != card["weights_hash"]:
        raise _stale(path, card, name, registered)
    return card


def card_status(checkpoints_dir: str | os.PathLike[str], name: str) -> dict[str, Any]:
    """Whether checkpoint ``name``'s card describes its registered weights, without raising:
    ``state`` is ``ok``, ``missing``, ``stale`` or ``damaged`` (``corrupt_record`` /
    ``unsupported_schema``), with ``path``, ``message`` and, for a stale card, both hashes."""
    path = card_path(checkpoints_dir, name)
    out: dict[str, Any] = {"name": name, "path": str(path.absolute())}
    try:
        card = read_card(checkpoints_dir, name)
    except NotFound as exc:
        return {**out, "state": "missing", "message": str(exc)}
    except StaleCard as exc:
        return {**out, "state": "stale", "message": str(exc), **exc.details}  # type: ignore[attr-defined]
    except (CorruptRecord, UnsupportedSchema) as exc:
        return {**out, "state": "damaged", "code": exc.code, "message": str(exc),
                "details": getattr(exc, "details", None)}
    return {**out, "state": "ok", "weights_hash": card["weights_hash"]}


def set_stale_card_aside(checkpoints_dir: str | os.PathLike[str], name: str) -> Path | None:
    """Rename a stale card (re-checked here) to ``<name>.card.json.stale-<its weights_hash[:12]>``
    so no reader takes it for the card of the registered weights; returns the new path, or None
    when the card is not stale (nothing is done)."""
    status = card_status(checkpoints_dir, name)
    if status["state"] != "stale":
        return None
    path = card_path(checkpoints_dir, name)
    aside = path.with_name(path.name + STALE_SUFFIX + status["card_weights_hash"][:12])
    with writing(path.parent, f"setting the stale model card of {name!r} aside"):
        os.replace(path, aside)
        fsync_dir(path.parent)
    return aside
