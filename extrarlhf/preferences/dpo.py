"""A DPO-style fine-tune of a v5 policy on a preference dataset, against a reference policy.

Direct Preference Optimization (Rafailov et al., 2023) without a reward model: for a judged
pair (chosen ``c``, rejected ``r``) in state ``s`` the loss is
``-log sigmoid(beta * ((l(s, c) - l(s, r)) - (l_ref(s, c) - l_ref(s, r))))``, where ``l`` are
the policy's logits (the softmax over the legal set's normalizer cancels between two actions
of one state) and ``l_ref`` the frozen reference's. The reference is the starting checkpoint
(``base``) unless another v5 checkpoint is named. Only the two judged actions enter the loss, so
``anchor`` adds ``anchor * ||theta - theta_0||^2`` (theta_0: the starting weights) to keep the
rest of the policy where it started. The epoch with the best validation loss is kept (epoch 0: the reference
itself). Held-out: the share of test pairs whose chosen action the policy ranks higher than
the rejected one, for the tuned policy and for the reference, with Wilson intervals.

The result is a ``v5`` checkpoint exported through ``torch.onnx`` and verified in onnxruntime
(training/export.py), registered with a card (method ``dpo``; base, reference, beta): an
ordinary candidate for ``benchmark_models`` and ``promote_checkpoint`` (the same SPRT gate).
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Mapping

import numpy as np

from ..checkpoints import CheckpointRegistry
from ..core.clock import utc_now
from ..core.names import check_name
from ..training.card import CARD_SCHEMA_VERSION, checkpoint_block, environment_block, model_block, write_card
from ..training.hyper import require_torch
from .dataset import load_pairs
from .policy import PreferencePolicy, wilson
from .points import check_number

MAX_EPOCHS = 200


def _sample(pairs: dict[str, np.ndarray], n: int = 64) -> Any:
    """Held-out pairs as two-action training Decisions (what export verification reads)."""
    from ..training.data import Decisions

    n = min(n, len(pairs["y"]))
    features = np.stack([pairs["a"][:n], pairs["b"][:n]], axis=1).reshape(2 * n, -1)
    return Decisions(obs=pairs["obs"][:n], features=features, offsets=np.arange(0, 2 * n + 1, 2, dtype=np.int64),
                     labels=np.zeros(n, np.int64), outcome=np.zeros(n, np.float32), imitated=np.ones(n, bool),
                     battle_ids=np.array(["preferences"] * n, dtype=object))


def dpo_finetune(dataset: str, base: str, name: str, seed: int = 0, *, reference: str | None = None,
                 beta: float = 0.5, epochs: int = 10, lr: float = 1e-4, batch_size: int = 128, anchor: float = 1e-3,
                 require_ready: bool = True, datasets_dir: str | os.PathLike[str] = "datasets",
                 checkpoints_dir: str | os.PathLike[str] = "checkpoints", overwrite: bool = False,
                 policy: "PreferencePolicy | Mapping[str, Any] | None" = None) -> dict[str, Any]:
    """Fine-tune checkpoint ``base`` on the preference dataset ``dataset`` (module docstring)
    and register the result as ``name``."""
    check_name(name, "checkpoint")
    seed = check_number(seed, "seed", 0, 2 ** 63 - 1, integer=True)
    epochs = check_number(epochs, "epochs", 1, MAX_EPOCHS, integer=True)
    check_number(beta, "beta", 1e-3, 100.0)
    check_number(lr, "lr", 1e-7, 1.0)
    check_number(anchor, "anchor", 0.0, 100.0)
    check_number(batch_size, "batch_size", 8, 8192, integer=True)
    require_torch()
    registry = CheckpointRegistry(checkpoints_dir)
    registry.check_writable(name, overwrite)
    from ..training.finetune import load_base

    parent, net = load_base(registry, base, "fine-tuned with preferences")
    ref_checkpoint, ref_net = (parent, None) if reference is None else load_base(registry, reference,
                                                                                "a DPO reference")
    splits, manifest, ready = load_pairs(dataset, datasets_dir=datasets_dir, require_ready=require_ready, policy=policy)

    import copy

    import torch

    from ..training.export import export_and_register
    from ..training.model import deterministic

    started = time.perf_counter()
    with deterministic(1) as runtime:
        generator = torch.Generator().manual_seed(seed)
        ref = copy.deepcopy(net if ref_net is None else ref_net).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        anchor_to = [p.detach().clone() for p in net.parameters()]  # where the fine-tune starts

        def margin(model: Any, part: dict[str, np.ndarray]) -> torch.Tensor:
            """logit(chosen) - logit(rejected) for each pair."""
            obs = torch.from_numpy(part["obs"])
            seg = torch.arange(len(obs))
            a = model.flat_logits(obs, torch.from_numpy(part["a"]), seg)
            b = model.flat_logits(obs, torch.from_numpy(part["b"]), seg)
            sign = torch.from_numpy(part["y"]) * 2.0 - 1.0
            return sign * (a - b)

        with torch.no_grad():
            ref_margins = {s: margin(ref, p) for s, p in splits.items()}

        def loss_of(part: dict[str, np.ndarray], ref_margin: torch.Tensor) -> torch.Tensor:
            loss = -torch.nn.functional.logsigmoid(beta * (margin(net, part) - ref_margin)).mean()
            if anchor:
                loss = loss + anchor * sum(((p - q) ** 2).sum() for p, q in zip(net.parameters(), anchor_to))
            return loss

        def evaluate(split: str) -> dict[str, Any]:
            part = splits[split]
            if len(part["y"]) == 0:
                return {"pairs": 0}
            with torch.no_grad():
                m = margin(net, part)
                loss = -torch.nn.functional.logsigmoid(beta * (m - ref_margins[split])).mean().item()
                correct = int((m > 0).sum().item())
            return {"pairs": len(part["y"]), "loss": round(loss, 5), "accuracy": round(correct / len(part["y"]), 5),
                    "correct": correct}

        opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.0)
        train, n = splits["train"], len(splits["train"]["y"])
        history, best = [], (math.inf, None, 0)
        for epoch in range(epochs + 1):  # epoch 0: the reference itself, kept if no epoch beats it
            if epoch:
                order = torch.randperm(n, generator=generator).numpy()
                net.train()
                for first in range(0, n, batch_size):
                    idx = order[first:first + batch_size]
                    loss = loss_of({k: v[idx] for k, v in train.items()}, ref_margins["train"][idx])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            net.eval()
            metrics = {"epoch": epoch, "train": evaluate("train"), "val": evaluate("val")}
            history.append(metrics)
            score = metrics["val"].get("loss", metrics["train"]["loss"])
            if score < best[0]:
                best = (score, {k: v.clone() for k, v in net.state_dict().items()}, epoch)
        net.load_state_dict(best[1])
        test = evaluate("test")
        ref_correct = int((ref_margins["test"] > 0).sum().item())
        checkpoint, exported = export_and_register(
            registry, name, net, _sample(splits["test"]),
            {"extrarlhf.dataset_id": manifest["dataset_id"], "extrarlhf.seed": str(seed), "extrarlhf.method": "dpo",
             "extrarlhf.finetuned_from": parent.weights_hash}, label="dpo", overwrite=overwrite)
    pairs = test["pairs"]
    final = {"best_epoch": best[2], "test": test,
             "test_accuracy_ci95": [round(x, 4) for x in wilson(test["correct"], pairs)],
             "reference_test_accuracy": round(ref_correct / pairs, 5),
             "reference_test_accuracy_ci95": [round(x, 4) for x in wilson(ref_correct, pairs)]}
    described = {"name": parent.name, "weights_hash": parent.weights_hash}
    card = {"schema_version": CARD_SCHEMA_VERSION, "kind": "model_card", "name": name, "created_at": utc_now(),
            "model": model_block(net.arch), "checkpoint": checkpoint_block(checkpoint.as_dict()),
            "weights_hash": checkpoint.weights_hash,
            "dataset": {"dataset_id": manifest["dataset_id"], "kind": manifest["kind"],
                        "row_counts": manifest["row_counts"], "readiness": {"preference_ready": ready}},
            "training": {"method": "dpo", "base": described,
                         "reference": {"name": ref_checkpoint.name, "weights_hash": ref_checkpoint.weights_hash},
                         "loss": "-log sigmoid(beta * ((l(c) - l(r)) - (l_ref(c) - l_ref(r)))) over non-tie "
                                 "judgments, plus anchor * ||theta - theta_0||^2 (the starting weights)",
                         "seed": seed, "library": "torch", "torch": runtime["torch"], "threads": runtime["threads"],
                         "hyperparameters": {"beta": beta, "epochs": epochs, "lr": lr, "batch_size": batch_size,
                                             "anchor": anchor},
                         "seconds": round(time.perf_counter() - started, 3)},
            "metrics": {"per_epoch": history, "final": final,
                        "accuracy_definition": "share of non-tie judgments whose chosen action has the higher logit; "
                                               "interval: Wilson 95%"},
            "export": {"verification": exported["verification"], "opset": 17, "exporter": "torch.onnx"},
            "environment": environment_block()}
    card_path = write_card(registry.root, card)
    return {"name": name, "kind": "v5", "weights_hash": checkpoint.weights_hash, "card_path": str(card_path.absolute()),
            "dataset_id": manifest["dataset_id"], "base": described, "reference": card["training"]["reference"],
            "pairs": {s: int(len(p["y"])) for s, p in splits.items()}, "final": final, "history": history,
            "export_verification": exported["verification"]}
