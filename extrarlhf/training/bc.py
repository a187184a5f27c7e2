"""Behaviour cloning in PyTorch: the epoch loop over a streamed dataset (stream.py).

The network is model.ActionScorer (``depth=1`` is the network of every earlier checkpoint).
The policy loss is the cross-entropy of the target under the softmax over the legal actions
of its decision, on imitated decisions with more than one legal action (the target is the
chosen action, or with ``target="search_values"`` the softmax of the search teacher's action
values at ``temperature``: data.py); the value head is fitted to the final outcome (1 win,
0 draw, -1 loss) by squared error on every decision, on separate parameters (it never moves
the policy). AdamW (decoupled weight decay on weight matrices only), the learning rate times
``lr_decay`` after each epoch. Top-1 and the validation loss are always measured against
the recorded choice (a tie for the highest logit counts as agreement).

Determinism: the initial weights come from a ``torch.Generator`` seeded by the run, the
batch order from a ``numpy.random.Generator(PCG64(seed))`` (stream.py's shuffle), and the
block runs under model.deterministic (deterministic algorithms, ``threads`` intra-op
threads); nothing reads global random state. The same data, seed and thread count give
bit-identical weights on the same machine and torch build. On a GPU (``device="cuda"``)
cuBLAS also needs ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` for that (torch says so when missing).

Imported only when a training runs (torch is the ``train`` extra).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from adapters import work

from .data import Decisions, take
from .hyper import HyperParams
from .model import ActionScorer, Architecture, segment_log_softmax
from .stream import DatasetStream, batches, prefetched

EpochProgress = Callable[[int, int, dict[str, Any]], None]  # (epoch done, epochs, its metrics)
EVAL_ROWS = 2048  # decisions per forward pass when measuring


@dataclass
class Flat:
    """A batch's policy decisions as tensors: flat action rows, their decision, label rows."""

    obs: torch.Tensor
    features: torch.Tensor
    seg: torch.Tensor
    counts: torch.Tensor
    label_rows: torch.Tensor
    targets: torch.Tensor | None


def flat(data: Decisions, device: torch.device, soft: bool = False) -> Flat:
    counts = data.counts
    starts = data.offsets[:-1]
    return Flat(obs=torch.from_numpy(data.obs).to(device), features=torch.from_numpy(data.features).to(device),
                seg=torch.from_numpy(np.repeat(np.arange(len(data)), counts)).to(device),
                counts=torch.from_numpy(counts).to(device),
                label_rows=torch.from_numpy(starts + data.labels).to(device),
                targets=torch.from_numpy(data.targets).to(device) if soft and data.targets is not None else None)


def architecture(hp: HyperParams) -> Architecture:
    return Architecture(hidden=hp.hidden, hidden2=hp.hidden2, depth=hp.depth, value_hidden=hp.value_hidden,
                        encoder=hp.encoder, embed=hp.embed)


def _agree(scores: torch.Tensor, b: Flat) -> torch.Tensor:
    """Decisions whose recorded choice has the highest score (ties agree)."""
    peak = torch.full((b.counts.numel(),), float("-inf"), dtype=scores.dtype, device=scores.device)
    peak = peak.scatter_reduce(0, b.seg, scores, reduce="amax")
    return scores[b.label_rows] >= peak


def policy_metrics(model: ActionScorer, parts: Any, device: torch.device) -> dict[str, Any]:
    """Mean cross-entropy of the recorded choice, top-1 agreement and the value head's squared
    error over the decisions streamed by ``parts`` (policy metrics on imitated decisions with a
    choice, the value on every decision)."""
    loss, correct, n, value_sq, m = 0.0, 0, 0, 0.0, 0
    with torch.no_grad():
        for part in parts:
            for k in range(0, len(part), EVAL_ROWS):
                chunk = take(part, np.arange(k, min(k + EVAL_ROWS, len(part))))
                v = model.value(torch.from_numpy(chunk.obs).to(device))
                value_sq += float(((v - torch.from_numpy(chunk.outcome).to(device)) ** 2).sum())
                m += len(chunk)
                rows = chunk.policy_rows()
                if rows.size == 0:
                    continue
                b = flat(take(chunk, rows), device)
                scores = model.flat_logits(b.obs, b.features, b.seg)
                logp = segment_log_softmax(scores, b.seg, b.counts)
                loss += float(-logp[b.label_rows].sum())
                correct += int(_agree(scores, b).sum())
                n += int(rows.size)
    nan = float("nan")
    return {"loss": loss / n if n else nan, "top1": correct / n if n else nan, "decisions": n,
            "value_mse": value_sq / m if m else nan, "value_decisions": m}


@dataclass
class TrainResult:
    model: ActionScorer
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    buffer_peak: int = 0  # the most decisions the shuffle buffer held


def _r(x: float | None, nd: int = 5) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), nd)


def _optimizer(model: ActionScorer, hp: HyperParams) -> torch.optim.Optimizer:
    matrices = [p for p in model.parameters() if p.ndim == 2]
    others = [p for p in model.parameters() if p.ndim != 2]
    return torch.optim.AdamW([{"params": matrices, "weight_decay": hp.weight_decay},
                              {"params": others, "weight_decay": 0.0}], lr=hp.lr, betas=(hp.beta1, hp.beta2),
                             eps=hp.eps, fused=hp.device == "cpu" or None)


def train_bc(stream: DatasetStream, hp: HyperParams, seed: int, validate: bool = True,
             progress: EpochProgress | None = None) -> TrainResult:
    """Train from scratch on ``stream``'s train split; per epoch: train/val loss, top-1
    agreement, value MSE, decisions/s (module docstring). Runs under model.deterministic."""
    soft = hp.target == "search_values"
    device = torch.device(hp.device)
    model = ActionScorer(architecture(hp))
    model.reset_parameters(torch.Generator().manual_seed(seed))
    model.to(device)
    opt = _optimizer(model, hp)
    rng = np.random.Generator(np.random.PCG64(seed))
    result = TrainResult(model)
    watermark = [0]
    started = time.perf_counter()
    for epoch in range(hp.epochs):
        t0 = time.perf_counter()
        model.train()
        loss_sum, correct, n, value_sum, m = 0.0, 0, 0, 0.0, 0
        for batch in prefetched(batches(stream.epoch("train", rng, hp.shuffle_buffer, watermark), hp.batch_size)):
            work.check()  # a cancelled caller stops within one batch
            rows = batch.policy_rows()
            loss = torch.zeros((), device=device)
            if rows.size:
                policy = take(batch, rows)  # soft targets only where a decision has them (else bit-identical
                b = flat(policy, device, soft and bool(policy.valued.any()))  # to target "choice")
                scores = model.flat_logits(b.obs, b.features, b.seg)
                logp = segment_log_softmax(scores, b.seg, b.counts)
                if b.targets is not None:
                    policy_loss = -(b.targets * logp).sum() / rows.size
                else:
                    policy_loss = -logp[b.label_rows].mean()
                loss = loss + policy_loss
                loss_sum += policy_loss.item() * rows.size
                correct += int(_agree(scores.detach(), b).sum())
                n += int(rows.size)
            v = model.value(torch.from_numpy(batch.obs).to(device))
            value_loss = torch.mean((v - torch.from_numpy(batch.outcome).to(device)) ** 2)
            loss = loss + hp.value_coef * value_loss
            value_sum += value_loss.item() * len(batch)
            m += len(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        seconds = time.perf_counter() - t0
        lr = opt.param_groups[0]["lr"]
        metrics: dict[str, Any] = {
            "epoch": epoch + 1, "lr": _r(lr, 8),
            "train_loss": _r(loss_sum / n if n else None), "train_top1": _r(correct / n if n else None),
            "train_value_mse": _r(value_sum / m if m else None),
            "train_decisions": n, "seconds": round(seconds, 3),
            "decisions_per_s": round(n / seconds, 1) if seconds > 0 else None,
        }
        model.eval()
        vm = policy_metrics(model, stream.chunks("val"), device) if validate else {"decisions": 0}
        if vm["decisions"] or vm.get("value_decisions"):
            metrics.update({"val_loss": _r(vm["loss"]), "val_top1": _r(vm["top1"]),
                            "val_value_mse": _r(vm["value_mse"]), "val_decisions": vm["decisions"]})
        else:
            metrics.update({"val_loss": None, "val_top1": None, "val_value_mse": None, "val_decisions": 0})
        result.history.append(metrics)
        for group in opt.param_groups:
            group["lr"] *= hp.lr_decay
        if progress is not None:
            progress(epoch + 1, hp.epochs, metrics)
    result.seconds = time.perf_counter() - started
    result.buffer_peak = watermark[0]
    model.eval()
    return result
