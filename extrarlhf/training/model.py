"""The ``v5`` policy network in PyTorch: an action scorer with a separate value head.

Architecture (``depth`` scoring layers after the first; ``depth=1`` is the network every
earlier checkpoint had)::

    h1[a]    = relu(obs W1o + features[a] W1a + b1)            # = relu([obs, features[a]] W1 + b1)
    h[a]     = relu(... relu(h1[a] W2 + b2) ...)              # depth layers of width hidden2
    logit[a] = h[a] w3                                         # one score per legal action
    value    = tanh(relu(obs Wv + bv) wv2 + bv2)               # outcome estimate in [-1, 1]

With ``encoder="sets"`` the observation enters through a permutation-invariant encoder instead
of ``obs W1o`` (DeepSets): each hand card, own creature and enemy creature goes through a small
network shared by its kind (two ReLU layers of width ``embed``), each kind is pooled over its
occupied slots (sum and max), and ``h1[a] = relu(global W1g + pooled Wp + bp + features[a] W1a
+ b1)``. The rules do not depend on slots, so what one slot teaches, every slot knows: on the
same 15,000 teacher battles the student scored 0.671 against greedy where the flat one scored
0.629, and the 60-minute loop with it met issue 28's target (docs/training.md).

With ``members`` = K > 1 the network is an *ensemble* of K such scorers side by side
(:func:`pack_ensemble`): the first layer is K blocks wide (``hidden`` each), each trunk layer
maps each member's block to its own (``Grouped``: weights [K, in, out], no weight between
members), and the score layer reads every member's last block, so the logit is the sum of
the members' scores (the mean once packed); the value head is one head (the first member's
when packed). An ensemble is still one ``v5`` network (same inputs and outputs) that
onnxruntime runs and PPO can train further. Measured (docs/training.md): PPO fine-tunes of one
base settle at about 0.70 against greedy each, whatever their settings; the mean of the
logits of 3 of them scored 0.714 and of 6 0.717 on 16,384 fresh battles.

Two forms of the same parameters:

* :meth:`ActionScorer.flat_logits` scores *flat* action rows (``features[r]`` belongs to
  decision ``seg[r]``), what training and the policy-gradient fine-tune feed it: no padding
  goes through the network;
* :meth:`ActionScorer.forward` is the ``v5`` contract (padded ``action_features`` [N, A, F]
  and ``action_mask`` [N, A] -> ``logits`` [N, A] with masked positions pushed to about
  -1e9, and ``value`` [N, 1]): what :mod:`.export` writes through ``torch.onnx``.

Determinism (:func:`deterministic`): ``torch.use_deterministic_algorithms(True)`` and a fixed
intra-op thread count for the block, every random draw from a ``torch.Generator`` seeded by
the run; the same data, seed and thread count give bit-identical weights on the same machine
and torch build.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

import engine
from engine.actions import BOARD_SLOTS, HAND_LIMIT
from engine.features import CARD_FEATURES, CREATURE_FEATURES, GLOBAL_FEATURES

# the observation's blocks (engine.features.OBS_FEATURE_NAMES): globals, hand cards, own and enemy creatures
_GLOBAL, _CARD, _CREATURE = len(GLOBAL_FEATURES), len(CARD_FEATURES), len(CREATURE_FEATURES)
_HAND_AT = _GLOBAL
_OWN_AT = _HAND_AT + HAND_LIMIT * _CARD
_ENEMY_AT = _OWN_AT + BOARD_SLOTS * _CREATURE
assert _ENEMY_AT + BOARD_SLOTS * _CREATURE == engine.OBS_DIM
# the sets encoder's kinds, in pooling order: (name of its layers, first column, slots, features per slot)
_BLOCKS = (("card", _HAND_AT, HAND_LIMIT, _CARD), ("own", _OWN_AT, BOARD_SLOTS, _CREATURE),
           ("enemy", _ENEMY_AT, BOARD_SLOTS, _CREATURE))
_SETS = tuple(kind for kind, *_ in _BLOCKS)
MASK_PENALTY = 1e9
_LOCK = threading.RLock()  # trainings in one process take turns (each sets the thread count)


@dataclasses.dataclass(frozen=True)
class Architecture:
    """The network's sizes (recorded in the model card)."""

    hidden: int = 256
    hidden2: int = 128
    depth: int = 1
    value_hidden: int = 64
    members: int = 1   # scorers side by side (an ensemble, pack_ensemble); 1: the plain network
    encoder: str = "flat"  # hyper.ENCODERS; "sets": the observation through per-card networks (module docstring)
    embed: int = 64        # width of the "sets" encoder's per-card networks


class Grouped(nn.Module):
    """K independent linear maps, one per member's block: [..., K*in] -> [..., K*out]."""

    def __init__(self, members: int, width_in: int, width_out: int) -> None:
        super().__init__()
        self.members, self.width_in = members, width_in
        self.weight = nn.Parameter(torch.empty(members, width_in, width_out))
        self.bias = nn.Parameter(torch.zeros(members, width_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        blocks = x.reshape(-1, self.members, self.width_in).transpose(0, 1)  # [K, rows, in]: one matmul per member
        out = torch.matmul(blocks, self.weight).transpose(0, 1) + self.bias  # [rows, K, out]
        return out.reshape(*x.shape[:-1], -1)


class ActionScorer(nn.Module):
    """See the module docstring."""

    def __init__(self, arch: Architecture) -> None:
        super().__init__()
        self.arch = arch
        k = arch.members
        if arch.encoder == "sets":
            e = arch.embed
            for kind, _, _, width in _BLOCKS:
                setattr(self, f"{kind}_in", nn.Linear(width, k * e))
                setattr(self, f"{kind}_mid", Grouped(k, e, e))
            self.pool_in = Grouped(k, 2 * len(_SETS) * e, arch.hidden)
            self.obs_in = nn.Linear(_GLOBAL, k * arch.hidden, bias=False)
        else:
            self.obs_in = nn.Linear(engine.OBS_DIM, k * arch.hidden, bias=False)
        self.action_in = nn.Linear(engine.ACTION_FEATURE_DIM, k * arch.hidden)
        layers: list[nn.Module] = []
        width = arch.hidden
        for _ in range(arch.depth):
            layers += [nn.Linear(width, arch.hidden2) if k == 1 else Grouped(k, width, arch.hidden2), nn.ReLU()]
            width = arch.hidden2
        self.trunk = nn.Sequential(*layers)
        self.score = nn.Linear(k * width, 1, bias=False)
        self.value_head = nn.Sequential(nn.Linear(engine.OBS_DIM, arch.value_hidden), nn.ReLU(),
                                        nn.Linear(arch.value_hidden, 1), nn.Tanh())

    def reset_parameters(self, generator: torch.Generator) -> None:
        """He-normal weights for the ReLU layers, small output layers, zero biases; every draw
        from ``generator``."""
        fan_obs = fan_action = engine.OBS_DIM + engine.ACTION_FEATURE_DIM  # the flat first layer: one fan
        encoder: list[tuple[nn.Module, int | None, float]] = []
        if self.arch.encoder == "sets":  # the pooled state and the action each with its own fan
            fan_obs, fan_action = _GLOBAL + 2 * len(_SETS) * self.arch.embed, engine.ACTION_FEATURE_DIM
            encoder = [(getattr(self, f"{kind}_{part}"), None, 2.0 ** 0.5) for kind in _SETS for part in ("in", "mid")]
            encoder.append((self.pool_in, fan_obs, 2.0 ** 0.5))
        with torch.no_grad():
            for layer, fan_in, gain in (*encoder, (self.obs_in, fan_obs, 2.0 ** 0.5),
                                        (self.action_in, fan_action, 2.0 ** 0.5),
                                        *((m, m.weight.shape[-2] if isinstance(m, Grouped) else m.in_features,
                                           2.0 ** 0.5) for m in self.trunk if isinstance(m, (nn.Linear, Grouped))),
                                        (self.score, self.score.in_features // self.arch.members, 0.1),
                                        (self.value_head[0], engine.OBS_DIM, 2.0 ** 0.5),
                                        (self.value_head[2], self.value_head[2].in_features, 0.1)):
                fan_in = fan_in or (layer.weight.shape[-2] if isinstance(layer, Grouped) else layer.in_features)
                layer.weight.normal_(0.0, gain / fan_in ** 0.5, generator=generator)
                if layer.bias is not None:
                    layer.bias.zero_()

    def state_in(self, obs: torch.Tensor) -> torch.Tensor:
        """The observation's part of the first layer, [N, K*hidden]."""
        if self.arch.encoder != "sets":
            return self.obs_in(obs)
        n, k = obs.shape[0], self.arch.members
        pooled = []
        for kind, lo, slots, width in _BLOCKS:
            items = obs[:, lo:lo + slots * width].reshape(n, slots, width)
            h = torch.relu(getattr(self, f"{kind}_mid")(torch.relu(getattr(self, f"{kind}_in")(items))))
            h = h * items[..., :1]  # feature 0 of every card and creature block is "present"
            pooled += [h.sum(1).reshape(n, k, -1), h.amax(1).reshape(n, k, -1)]
        return self.obs_in(obs[:, :_GLOBAL]) + self.pool_in(torch.cat(pooled, -1).reshape(n, -1))

    def flat_logits(self, obs: torch.Tensor, features: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
        """Scores [R] of flat action rows; ``seg[r]`` is the decision (row of ``obs``) of row ``r``."""
        h = torch.relu(self.action_in(features) + self.state_in(obs)[seg])
        return self.score(self.trunk(h)).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Outcome estimates [N] in [-1, 1]."""
        return self.value_head(obs).squeeze(-1)

    def forward(self, obs: torch.Tensor, action_features: torch.Tensor, action_mask: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """The v5 contract (module docstring)."""
        h = torch.relu(self.action_in(action_features) + self.state_in(obs).unsqueeze(1))
        raw = self.score(self.trunk(h)).squeeze(-1)
        return raw + (action_mask - 1.0) * MASK_PENALTY, self.value_head(obs)

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.parameters())


# The names of the numpy trainer's ONNX initializers (checkpoints trained before PyTorch) and the
# ActionScorer parameter each one is (transposed where torch stores [out, in]), depth 1.
_NUMPY_NAMES = {"W1o": ("obs_in.weight", True), "W1a": ("action_in.weight", True), "b1": ("action_in.bias", False),
                "W2": ("trunk.0.weight", True), "b2": ("trunk.0.bias", False), "w3": ("score.weight", False),
                "Wv": ("value_head.0.weight", True), "bv": ("value_head.0.bias", False),
                "wv2": ("value_head.2.weight", True), "bv2": ("value_head.2.bias", False)}


def from_onnx(model: Any) -> ActionScorer:
    """The network of a ``v5`` checkpoint this project trained (an ``onnx.ModelProto``), to
    train further: initializers named like the parameters (``torch.onnx.export`` with
    ``do_constant_folding=False``) or the numpy trainer's (``W1o`` ...). Raises ValueError for
    any other graph."""
    from onnx import numpy_helper

    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    if "W1o" in weights:
        weights = {new: weights[old].T if transpose else weights[old]
                   for old, (new, transpose) in _NUMPY_NAMES.items() if old in weights}
        weights["score.weight"] = weights["score.weight"].reshape(1, -1)  # w3 is a vector
    needed = ("obs_in.weight", "action_in.weight", "score.weight", "value_head.0.weight")
    if any(k not in weights for k in needed):
        raise ValueError("not a v5 checkpoint of this project's trainer (its initializers are not the ActionScorer's "
                         "parameters); only checkpoints trained by train_policy can be trained further")
    depth = sum(1 for k in weights if k.startswith("trunk.") and k.endswith(".weight"))
    first = weights.get("trunk.0.weight")
    members = int(first.shape[0]) if first is not None and first.ndim == 3 else 1
    sets = "card_mid.weight" in weights
    arch = Architecture(hidden=int(weights["obs_in.weight"].shape[0]) // members,
                        hidden2=int(weights["score.weight"].shape[1]) // members, depth=depth,
                        value_hidden=int(weights["value_head.0.weight"].shape[0]), members=members,
                        encoder="sets" if sets else "flat",
                        embed=int(weights["card_mid.weight"].shape[-1]) if sets else Architecture.embed)
    net = ActionScorer(arch)
    state = net.state_dict()
    if set(state) != set(weights) or any(tuple(state[k].shape) != tuple(weights[k].shape) for k in state):
        raise ValueError("the checkpoint's weights do not match an ActionScorer of their sizes")
    net.load_state_dict({k: torch.from_numpy(weights[k].copy()) for k in state})
    return net


def pack_ensemble(nets: list[ActionScorer]) -> ActionScorer:
    """One network whose logits are the mean of ``nets``' logits, exactly (the module docstring's
    ensemble; plain members of one architecture) and whose value is the first member's."""
    arch = nets[0].arch
    if arch.members != 1 or any(n.arch != arch for n in nets):
        raise ValueError("an ensemble packs plain networks (members 1) of one architecture")
    k = len(nets)
    packed = ActionScorer(dataclasses.replace(arch, members=k))
    with torch.no_grad():
        if arch.encoder == "sets":  # per-kind first layers side by side, every Grouped layer one block per member
            for name in [f"{kind}_{part}" for kind in _SETS for part in ("in", "mid")] + ["pool_in"]:
                layer = getattr(packed, name)
                layer.weight.copy_(torch.cat([getattr(n, name).weight for n in nets]))
                layer.bias.copy_(torch.cat([getattr(n, name).bias for n in nets]))
        packed.obs_in.weight.copy_(torch.cat([n.obs_in.weight for n in nets]))
        packed.action_in.weight.copy_(torch.cat([n.action_in.weight for n in nets]))
        packed.action_in.bias.copy_(torch.cat([n.action_in.bias for n in nets]))
        for i, layer in enumerate(packed.trunk):
            if isinstance(layer, Grouped):
                layer.weight.copy_(torch.stack([n.trunk[i].weight.T for n in nets]))
                layer.bias.copy_(torch.stack([n.trunk[i].bias for n in nets]))
        packed.score.weight.copy_(torch.cat([n.score.weight for n in nets], dim=1) / k)
        packed.value_head.load_state_dict(nets[0].value_head.state_dict())
    return packed


def segment_log_softmax(scores: torch.Tensor, seg: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Log-probabilities [R] of flat rows within their decision's legal set (``counts[d]``
    rows of decision ``d``, rows grouped by decision)."""
    n, width = int(counts.numel()), int(counts.max()) if counts.numel() else 0
    starts = torch.cumsum(counts, 0) - counts
    position = torch.arange(scores.numel(), device=scores.device) - starts[seg]
    padded = torch.full((n, width), float("-inf"), dtype=scores.dtype, device=scores.device)
    padded = padded.index_put((seg, position), scores)
    return torch.log_softmax(padded, dim=1)[seg, position]


@contextlib.contextmanager
def deterministic(threads: int = 1) -> Iterator[dict[str, Any]]:
    """Deterministic algorithms and ``threads`` intra-op threads for the block (both restored
    after); yields what is in force."""
    with _LOCK:
        before_threads = torch.get_num_threads()
        before_det = torch.are_deterministic_algorithms_enabled()
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(True)
        try:
            yield {"threads": torch.get_num_threads(), "deterministic_algorithms": True,
                   "torch": torch.__version__}
        finally:
            torch.use_deterministic_algorithms(before_det)
            torch.set_num_threads(before_threads)
