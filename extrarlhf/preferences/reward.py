"""A Bradley-Terry reward model trained from a preference dataset.

The reward of action ``a`` in state ``s`` is the score of training/model.py's ActionScorer
(the same observation and action features the policies read); the probability that a judge
prefers A to B is ``sigmoid(r(s, A) - r(s, B))``, fitted by logistic loss on the non-tie
judgments of the train split (AdamW, deterministic for a seed on the CPU). The epoch with the
best validation loss is kept. Held-out accuracy is the share of the test split's non-tie
judgments whose preferred action gets the higher reward, with a Wilson 95% interval.

The model is exported through ``torch.onnx`` as an ``action_onnx`` model (``obs``,
``action_features``, ``action_mask`` -> ``scores``: the rewards), checked in onnxruntime
against torch on held-out pairs, and registered in the checkpoint registry with a card
(``<name>.card.json``, method ``bradley_terry_reward``); as a spec it plays the action of
highest reward, so it can be benchmarked like any policy. Needs the ``train`` extra.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Mapping

import numpy as np


from ..checkpoints import CheckpointRegistry
from ..core.clock import utc_now
from ..core.errors import RLHFError
from ..core.names import check_name
from ..training.card import CARD_SCHEMA_VERSION, checkpoint_block, environment_block, model_block, write_card
from ..training.hyper import require_torch
from .dataset import load_pairs
from .policy import PreferencePolicy, wilson
from .points import check_number

MAX_EPOCHS = 200


def train_reward_model(dataset: str, name: str, seed: int = 0, *, base: str | None = None, epochs: int = 30,
                       hidden: int = 128, hidden2: int = 64, lr: float = 1e-3, weight_decay: float = 1e-4, batch_size: int = 256,
                       require_ready: bool = True, datasets_dir: str | os.PathLike[str] = "datasets",
                       checkpoints_dir: str | os.PathLike[str] = "checkpoints", overwrite: bool = False,
                       policy: "PreferencePolicy | Mapping[str, Any] | None" = None) -> dict[str, Any]:
    """Fit the reward model on ``dataset`` (a preference dataset), register it as ``name``.
    ``base`` (a v5 checkpoint this project trained) starts it from that policy's action scorer
    (its logits are a reward the policy already believes; ``hidden``/``hidden2`` are then its)."""
    check_name(name, "checkpoint")
    seed = check_number(seed, "seed", 0, 2 ** 63 - 1, integer=True)
    epochs = check_number(epochs, "epochs", 1, MAX_EPOCHS, integer=True)
    for what, value in (("hidden", hidden), ("hidden2", hidden2)):
        check_number(value, what, 4, 1024, integer=True)
    check_number(lr, "lr", 1e-6, 1.0)
    check_number(weight_decay, "weight_decay", 0.0, 1.0)
    check_number(batch_size, "batch_size", 8, 8192, integer=True)
    require_torch()
    registry = CheckpointRegistry(checkpoints_dir)
    registry.check_writable(name, overwrite)
    splits, manifest, ready = load_pairs(dataset, datasets_dir=datasets_dir, require_ready=require_ready, policy=policy)

    import torch

    from ..training.export import build_model
    from ..training.model import ActionScorer, Architecture, deterministic

    parent = None
    if base is not None:
        from ..training.finetune import load_base

        parent, base_net = load_base(registry, base, "the start of a reward model")
        arch = base_net.arch
    else:
        arch = Architecture(hidden=hidden, hidden2=hidden2, depth=1, value_hidden=4)

    class Rewards(torch.nn.Module):
        """The scorer's rewards only: the action_onnx contract."""

        def __init__(self, scorer: ActionScorer) -> None:
            super().__init__()
            self.scorer = scorer

        def forward(self, obs: torch.Tensor, action_features: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
            return self.scorer(obs, action_features, action_mask)[0]

    def margins(net: ActionScorer, part: dict[str, np.ndarray]) -> torch.Tensor:
        obs = torch.from_numpy(part["obs"])
        seg = torch.arange(len(obs))
        return (net.flat_logits(obs, torch.from_numpy(part["a"]), seg)
                - net.flat_logits(obs, torch.from_numpy(part["b"]), seg))

    def evaluate(net: ActionScorer, part: dict[str, np.ndarray]) -> dict[str, float]:
        if len(part["y"]) == 0:
            return {"loss": float("nan"), "accuracy": float("nan"), "pairs": 0}
        with torch.no_grad():
            m = margins(net, part)
            y = torch.from_numpy(part["y"])
            loss = torch.nn.functional.binary_cross_entropy_with_logits(m, y).item()
            correct = int(((m > 0).float() == y).sum().item())
        return {"loss": round(loss, 5), "accuracy": round(correct / len(y), 5), "pairs": len(y), "correct": correct}

    started = time.perf_counter()
    history = []
    with deterministic(1) as runtime:
        generator = torch.Generator().manual_seed(seed)
        net = ActionScorer(arch)
        net.reset_parameters(generator)
        if parent is not None:
            net.load_state_dict(base_net.state_dict())
        opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
        train = splits["train"]
        n = len(train["y"])
        best = (math.inf, None, 0)
        for epoch in range(epochs + 1):  # epoch 0: the starting network, kept if no epoch beats it
            if epoch:
                order = torch.randperm(n, generator=generator).numpy()
                net.train()
                for first in range(0, n, batch_size):
                    part = {k: v[order[first:first + batch_size]] for k, v in train.items()}
                    loss = torch.nn.functional.binary_cross_entropy_with_logits(margins(net, part),
                                                                                torch.from_numpy(part["y"]))
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            net.eval()
            metrics = {"epoch": epoch, "train": evaluate(net, train), "val": evaluate(net, splits["val"])}
            history.append(metrics)
            score = metrics["val"]["loss"] if metrics["val"]["pairs"] else metrics["train"]["loss"]
            if score < best[0]:
                best = (score, {k: v.clone() for k, v in net.state_dict().items()}, epoch)
        net.load_state_dict(best[1])
        test = evaluate(net, splits["test"])
        low, high = wilson(test["correct"], test["pairs"])
        proto = build_model(Rewards(net), {"extrarlhf.dataset_id": manifest["dataset_id"], "extrarlhf.seed": str(seed),
                                           "extrarlhf.method": "bradley_terry_reward"},
                            outputs=("scores",), kind="action_onnx")
        verification = _verify(proto, net, splits["test"])
    import onnx

    checkpoint = registry.register_written(name, lambda tmp: onnx.save(proto, os.fspath(tmp)), "action_onnx",
                                           label="reward", overwrite=overwrite)
    final = {"best_epoch": best[2], "test": test, "test_accuracy_ci95": [round(low, 4), round(high, 4)]}
    card = {"schema_version": CARD_SCHEMA_VERSION, "kind": "model_card", "name": name, "created_at": utc_now(),
            "model": model_block(arch), "checkpoint": checkpoint_block(checkpoint.as_dict()),
            "weights_hash": checkpoint.weights_hash,
            "dataset": {"dataset_id": manifest["dataset_id"], "kind": manifest["kind"],
                        "row_counts": manifest["row_counts"], "sources": manifest["sources"],
                        "readiness": {"preference_ready": ready}},
            "training": {"method": "bradley_terry_reward",
                         "loss": "logistic loss of sigmoid(r(s, A) - r(s, B)) against the judge's choice (ties out)",
                         "seed": seed, "base": None if parent is None else {"name": parent.name,
                                                                             "weights_hash": parent.weights_hash},
                         "library": "torch", "torch": runtime["torch"], "threads": runtime["threads"],
                         "hyperparameters": {"epochs": epochs, "hidden": arch.hidden, "hidden2": arch.hidden2,
                                             "lr": lr, "weight_decay": weight_decay, "batch_size": batch_size},
                         "seconds": round(time.perf_counter() - started, 3)},
            "metrics": {"per_epoch": history, "final": final,
                        "accuracy_definition": "share of non-tie judgments whose preferred action has the higher "
                                               "reward; interval: Wilson 95%"},
            "export": {"verification": verification, "opset": 17, "exporter": "torch.onnx", "kind": "action_onnx"},
            "environment": environment_block()}
    card_path = write_card(registry.root, card)
    return {"name": name, "kind": "action_onnx", "weights_hash": checkpoint.weights_hash,
            "card_path": str(card_path.absolute()), "dataset_id": manifest["dataset_id"],
            "pairs": {s: int(len(p["y"])) for s, p in splits.items()}, "final": final, "history": history,
            "export_verification": verification}


def _verify(proto: Any, net: Any, part: dict[str, np.ndarray], tolerance: float = 1e-4) -> dict[str, Any]:
    """The exported rewards of the first held-out pairs in onnxruntime equal torch's."""
    import torch

    from adapters.onnx_models import new_session

    k = min(64, len(part["y"]))
    obs, feats = part["obs"][:k], np.stack([part["a"][:k], part["b"][:k]], axis=1)
    mask = np.ones((k, 2), np.float32)
    scores = new_session(proto.SerializeToString()).run(["scores"], {"obs": obs, "action_features": feats,
                                                                       "action_mask": mask})[0]
    with torch.no_grad():
        ref = net(torch.from_numpy(obs), torch.from_numpy(feats), torch.from_numpy(mask))[0].numpy()
    diff = float(np.abs(scores - ref).max()) if k else 0.0
    if not np.isfinite(scores).all() or diff > tolerance:
        raise RLHFError(f"the exported reward model does not reproduce torch (max difference {diff:.3g}, tolerance "
                        f"{tolerance})", "export_mismatch")
    return {"pairs": k, "max_abs_score_diff": diff, "tolerance": tolerance}
