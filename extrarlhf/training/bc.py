"""Behaviour cloning in numpy: a small MLP scores each legal action; softmax over the legal set.

Architecture (the exported ONNX graph computes exactly this, see export.py)::

    h1[a]  = relu(obs @ W1o + features[a] @ W1a + b1)    # = relu([obs, features[a]] @ W1 + b1)
    h2[a]  = relu(h1[a] @ W2 + b2)
    logit[a] = h2[a] @ w3                                 # one score per legal action
    value  = tanh(relu(obs @ Wv + bv) @ wv2 + bv2)        # outcome estimate in [-1, 1]

The policy loss is the cross-entropy of the target under the softmax over the legal
actions of its decision (the target is the chosen action, or with ``target="search_values"``
the softmax of the search teacher's action values at ``temperature``: data.py); the value head is fitted to the final outcome (1 win, 0 draw, -1
loss) by squared error, on separate parameters (it never moves the policy).

Determinism: every random draw (initial weights, batch order) comes from one
``numpy.random.Generator(PCG64(seed))`` owned by the run; nothing reads global random state.
The arithmetic is float32 with fixed shapes and a fixed order, so the same data and seed
give bit-identical weights on the same machine and numpy/BLAS build.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import engine
from adapters import work

from ..core.errors import InvalidArgument, WorkCapExceeded
from .data import Decisions, row_index

TARGETS = ("choice", "search_values")
PARAM_ORDER = ("W1o", "W1a", "b1", "W2", "b2", "w3", "Wv", "bv", "wv2", "bv2")
Params = dict[str, np.ndarray]
EpochProgress = Callable[[int, int, dict[str, Any]], None]  # (epoch done, epochs, its metrics)


@dataclass(frozen=True)
class HyperParams:
    """What a training run is configured with (all recorded in the model card)."""

    epochs: int = 5
    hidden: int = 256
    hidden2: int = 128
    value_hidden: int = 64
    lr: float = 1e-3
    lr_decay: float = 0.8       # learning rate multiplied by this after each epoch
    batch_size: int = 128
    weight_decay: float = 0.0   # decoupled (AdamW style), on weight matrices only
    value_coef: float = 1.0
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    target: str = "choice"      # or "search_values" (module docstring)
    temperature: float = 0.05   # of the search_values target

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise InvalidArgument(f"target must be one of {', '.join(TARGETS)}, got {self.target!r}")
        ints = {"epochs": (1, 1000), "hidden": (1, 4096), "hidden2": (1, 4096), "value_hidden": (1, 4096),
                "batch_size": (1, 1 << 16)}
        for name, (lo, hi) in ints.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise InvalidArgument(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
        # name -> (low, high, low allowed)
        floats = {"lr": (0.0, 1.0, False), "lr_decay": (0.0, 1.0, False), "weight_decay": (0.0, 1.0, True),
                  "value_coef": (0.0, 100.0, True), "beta1": (0.0, 1.0, True), "beta2": (0.0, 1.0, True),
                  "eps": (0.0, 1.0, False), "temperature": (0.0, 10.0, False)}
        for name, (lo, hi, closed) in floats.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not (lo <= value if closed else lo < value) or value > hi or \
                    (name.startswith("beta") and value >= 1.0):
                raise InvalidArgument(f"{name} must be a number in {'[' if closed else '('}{lo}, {hi}"
                                      f"{')' if name.startswith('beta') else ']'}, got {value!r}")

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


# epochs x parameters x training decisions one call may ask for: about 45 CPU-minutes of this trainer
# here (1.5e9 parameter-decisions per second); the 60-minute improvement loop's largest round is 0.9e12.
MAX_TRAINING_COST = 4 * 10**12


def parameter_count(hp: HyperParams) -> int:
    """Trainable parameters of the network ``hp`` describes (init_params' shapes)."""
    obs, feat = engine.OBS_DIM, engine.ACTION_FEATURE_DIM
    return ((obs + feat + 1) * hp.hidden + (hp.hidden + 1) * hp.hidden2 + hp.hidden2
            + (obs + 2) * hp.value_hidden + 1)


def check_training_cost(hp: HyperParams, decisions: int) -> int:
    """The training cost (epochs x parameters x training decisions); refuses one over
    :data:`MAX_TRAINING_COST` with the numbers and what to lower."""
    params = parameter_count(hp)
    cost = hp.epochs * params * decisions
    if cost > MAX_TRAINING_COST:
        raise WorkCapExceeded(
            f"this training asks for epochs x parameters x training decisions = {hp.epochs:,} x {params:,} x "
            f"{decisions:,} = {cost:.2e}; one call may ask for at most MAX_TRAINING_COST = {MAX_TRAINING_COST:.0e} "
            f"(about 45 CPU-minutes): lower epochs, hidden/hidden2, or train on a smaller dataset",
            {"cap": "MAX_TRAINING_COST", "limit": MAX_TRAINING_COST, "asked": cost})
    return cost


def init_params(hp: HyperParams, rng: np.random.Generator) -> Params:
    """He-normal weights for the ReLU layers, small output layers, zero biases."""
    obs, feat = engine.OBS_DIM, engine.ACTION_FEATURE_DIM

    def normal(shape: tuple[int, ...], fan_in: int, gain: float) -> np.ndarray:
        return (rng.standard_normal(shape) * (gain / math.sqrt(fan_in))).astype(np.float32)

    return {
        "W1o": normal((obs, hp.hidden), obs + feat, math.sqrt(2.0)),
        "W1a": normal((feat, hp.hidden), obs + feat, math.sqrt(2.0)),
        "b1": np.zeros(hp.hidden, np.float32),
        "W2": normal((hp.hidden, hp.hidden2), hp.hidden, math.sqrt(2.0)),
        "b2": np.zeros(hp.hidden2, np.float32),
        "w3": normal((hp.hidden2,), hp.hidden2, 0.1),
        "Wv": normal((obs, hp.value_hidden), obs, math.sqrt(2.0)),
        "bv": np.zeros(hp.value_hidden, np.float32),
        "wv2": normal((hp.value_hidden, 1), hp.value_hidden, 0.1),
        "bv2": np.zeros(1, np.float32),
    }


# ------------------------------------------------------------------------------ the math
def policy_forward(p: Params, obs: np.ndarray, features: np.ndarray, seg: np.ndarray) -> tuple[np.ndarray, tuple]:
    """Logits of flat action rows; ``seg[r]`` is the decision (row of ``obs``) of row ``r``."""
    ho = obs @ p["W1o"]
    z1 = features @ p["W1a"]
    z1 += ho[seg]
    z1 += p["b1"]
    h1 = np.maximum(z1, 0.0)
    z2 = h1 @ p["W2"]
    z2 += p["b2"]
    h2 = np.maximum(z2, 0.0)
    return h2 @ p["w3"], (h1, h2)


def value_forward(p: Params, obs: np.ndarray) -> tuple[np.ndarray, tuple]:
    hv = np.maximum(obs @ p["Wv"] + p["bv"], 0.0)
    v = np.tanh(hv @ p["wv2"] + p["bv2"])[:, 0]
    return v, (hv, v)


def segment_softmax(logits: np.ndarray, starts: np.ndarray, seg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities of every row within its segment, max logit per segment)."""
    peak = np.maximum.reduceat(logits, starts)
    e = np.exp(logits - peak[seg])
    return e / np.add.reduceat(e, starts)[seg], peak


def _policy_grads(p: Params, obs: np.ndarray, features: np.ndarray, seg: np.ndarray, starts: np.ndarray,
                  cache: tuple, g: np.ndarray) -> Params:
    h1, h2 = cache
    dz2 = np.outer(g, p["w3"])
    dz2 *= h2 > 0
    dz1 = dz2 @ p["W2"].T
    dz1 *= h1 > 0
    dho = np.add.reduceat(dz1, starts, axis=0)
    return {"w3": h2.T @ g, "W2": h1.T @ dz2, "b2": dz2.sum(axis=0), "W1a": features.T @ dz1,
            "b1": dz1.sum(axis=0), "W1o": obs.T @ dho}


def _value_grads(p: Params, obs: np.ndarray, cache: tuple, target: np.ndarray, coef: float
                 ) -> tuple[Params, float]:
    hv, v = cache
    n = v.shape[0]
    loss = float(np.mean((v - target) ** 2))
    dpre = (coef * 2.0 / n) * (v - target) * (1.0 - v * v)
    dpre = dpre.astype(np.float32)[:, None]
    dhv = (dpre @ p["wv2"].T) * (hv > 0)
    return {"wv2": hv.T @ dpre, "bv2": dpre.sum(axis=0), "Wv": obs.T @ dhv, "bv": dhv.sum(axis=0)}, loss


class Adam:
    """Adam with bias correction and optional decoupled weight decay (matrices only)."""

    def __init__(self, params: Params, hp: HyperParams) -> None:
        self.hp = hp
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0
        self.lr = hp.lr

    def step(self, params: Params, grads: Params) -> None:
        hp = self.hp
        self.t += 1
        c1 = 1.0 - hp.beta1 ** self.t
        c2 = 1.0 - hp.beta2 ** self.t
        step = np.float32(self.lr * math.sqrt(c2) / c1)
        for name, g in grads.items():
            g = g.astype(np.float32, copy=False)
            m, v = self.m[name], self.v[name]
            m *= hp.beta1
            m += (1.0 - hp.beta1) * g
            v *= hp.beta2
            v += (1.0 - hp.beta2) * (g * g)
            if hp.weight_decay and params[name].ndim == 2:
                params[name] *= np.float32(1.0 - self.lr * hp.weight_decay)
            params[name] -= step * m / (np.sqrt(v) + np.float32(hp.eps))


# ------------------------------------------------------------------------------ batches
@dataclass
class Batch:
    obs: np.ndarray
    features: np.ndarray
    seg: np.ndarray
    starts: np.ndarray
    label_rows: np.ndarray
    targets: np.ndarray | None = None  # flat target probabilities, when the data has them


def make_batch(data: Decisions, index: np.ndarray) -> Batch:
    counts = data.counts[index]
    offsets = np.zeros(index.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    rows = row_index(data.offsets, index, offsets)
    seg = np.repeat(np.arange(index.size), counts)
    return Batch(obs=data.obs[index], features=data.features[rows], seg=seg, starts=offsets[:-1],
                 label_rows=offsets[:-1] + data.labels[index],
                 targets=None if data.targets is None else data.targets[rows])


def policy_metrics(p: Params, data: Decisions, index: np.ndarray, chunk: int = 2048) -> dict[str, float]:
    """Mean cross-entropy and top-1 agreement (the model's argmax is the recorded choice) on
    decisions ``index``."""
    if index.size == 0:
        return {"loss": float("nan"), "top1": float("nan"), "decisions": 0}
    loss = 0.0
    correct = 0
    for k in range(0, index.size, chunk):
        b = make_batch(data, index[k:k + chunk])
        logits, _ = policy_forward(p, b.obs, b.features, b.seg)
        probs, peak = segment_softmax(logits, b.starts, b.seg)
        loss += float(-np.log(np.maximum(probs[b.label_rows], 1e-30)).sum())
        correct += int((logits[b.label_rows] >= peak).sum())
    return {"loss": loss / index.size, "top1": correct / index.size, "decisions": int(index.size)}


def value_mse(p: Params, data: Decisions, chunk: int = 8192) -> float:
    if len(data) == 0:
        return float("nan")
    total = 0.0
    for k in range(0, len(data), chunk):
        v, _ = value_forward(p, data.obs[k:k + chunk])
        total += float(((v - data.outcome[k:k + chunk]) ** 2).sum())
    return total / len(data)


@dataclass
class TrainResult:
    params: Params
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


def _r(x: float, nd: int = 5) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), nd)


def train_bc(train: Decisions, val: Decisions | None, hp: HyperParams, seed: int,
             progress: EpochProgress | None = None) -> TrainResult:
    """Train from scratch; per epoch: train/val loss, top-1 agreement, value MSE, decisions/s.
    ``train_loss`` is the cross-entropy of the training target (module docstring); top-1 and
    the validation loss are always measured against the recorded choice."""
    soft = hp.target == "search_values"
    if soft and train.targets is None:
        raise InvalidArgument("target 'search_values' needs decisions read with a temperature (read_decisions)")
    rng = np.random.Generator(np.random.PCG64(seed))
    params = init_params(hp, rng)
    opt = Adam(params, hp)
    rows = train.policy_rows()
    if rows.size == 0:
        raise InvalidArgument("no imitated decision with a choice (more than one legal action) in the training "
                              "split: imitate another actor or collect more data")
    val_rows = val.policy_rows() if val is not None else np.zeros(0, np.int64)
    all_train = np.arange(len(train))
    result = TrainResult(params)
    started = time.perf_counter()
    for epoch in range(hp.epochs):
        t0 = time.perf_counter()
        order = rows[rng.permutation(rows.size)]
        value_order = all_train[rng.permutation(all_train.size)]
        n_batches = math.ceil(order.size / hp.batch_size)
        value_batch = math.ceil(value_order.size / n_batches)
        loss_sum = 0.0
        correct = 0
        value_loss_sum = 0.0
        for b in range(n_batches):
            work.check()  # a cancelled caller stops within one batch
            index = order[b * hp.batch_size:(b + 1) * hp.batch_size]
            batch = make_batch(train, index)
            logits, cache = policy_forward(params, batch.obs, batch.features, batch.seg)
            probs, peak = segment_softmax(logits, batch.starts, batch.seg)
            correct += int((logits[batch.label_rows] >= peak).sum())
            if soft:
                loss_sum += float(-(batch.targets * np.log(np.maximum(probs, 1e-30))).sum())
                g = probs - batch.targets
            else:
                loss_sum += float(-np.log(np.maximum(probs[batch.label_rows], 1e-30)).sum())
                g = probs
                g[batch.label_rows] -= 1.0
            g /= np.float32(index.size)
            grads = _policy_grads(params, batch.obs, batch.features, batch.seg, batch.starts, cache, g)
            vindex = value_order[b * value_batch:(b + 1) * value_batch]
            if vindex.size:
                vobs = train.obs[vindex]
                _, vcache = value_forward(params, vobs)
                vgrads, vloss = _value_grads(params, vobs, vcache, train.outcome[vindex], hp.value_coef)
                grads.update(vgrads)
                value_loss_sum += vloss * vindex.size
            opt.step(params, grads)
        seconds = time.perf_counter() - t0
        metrics: dict[str, Any] = {
            "epoch": epoch + 1, "lr": _r(opt.lr, 8),
            "train_loss": _r(loss_sum / order.size), "train_top1": _r(correct / order.size),
            "train_value_mse": _r(value_loss_sum / max(all_train.size, 1)),
            "train_decisions": int(order.size), "seconds": round(seconds, 3),
            "decisions_per_s": round(order.size / seconds, 1) if seconds > 0 else None,
        }
        if val is not None and len(val):
            vm = policy_metrics(params, val, val_rows)
            metrics.update({"val_loss": _r(vm["loss"]), "val_top1": _r(vm["top1"]),
                            "val_value_mse": _r(value_mse(params, val)), "val_decisions": vm["decisions"]})
        else:
            metrics.update({"val_loss": None, "val_top1": None, "val_value_mse": None, "val_decisions": 0})
        result.history.append(metrics)
        opt.lr *= hp.lr_decay
        if progress is not None:
            progress(epoch + 1, hp.epochs, metrics)
    result.seconds = time.perf_counter() - started
    return result


def forward_padded(p: Params, obs: np.ndarray, features: np.ndarray, mask: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The v5 contract in numpy: padded inputs [N, A, F] and mask [N, A] -> logits [N, A]
    (masked positions pushed to about -1e9, as the ONNX graph does) and value [N, 1]."""
    n, a, _ = features.shape
    ho = obs @ p["W1o"]
    h1 = np.maximum(features @ p["W1a"] + ho[:, None, :] + p["b1"], 0.0)
    h2 = np.maximum(h1 @ p["W2"] + p["b2"], 0.0)
    raw = h2 @ p["w3"]
    logits = raw + (mask.astype(np.float32) - np.float32(1.0)) * np.float32(1e9)
    value, _ = value_forward(p, obs)
    return logits.astype(np.float32), value[:, None].astype(np.float32)
