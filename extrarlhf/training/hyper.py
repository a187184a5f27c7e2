"""What a training run is configured with, what one call may cost, and whether torch is there.

Nothing here imports torch: ``import extrarlhf.training`` (and the MCP server that lists the
training tool) stays light; bc.py, model.py and export.py import it when a training runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import engine

from ..core.errors import InvalidArgument, WorkCapExceeded
from ..core.extras import require

TARGETS = ("choice", "search_values")
ENCODERS = ("flat", "sets")  # model.Architecture.encoder
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class HyperParams:
    """What a training run is configured with (all recorded in the model card)."""

    epochs: int = 5
    hidden: int = 256
    hidden2: int = 128
    depth: int = 1              # scoring layers of width hidden2 after the first (model.Architecture)
    value_hidden: int = 64
    encoder: str = "flat"       # or "sets": the observation through per-card networks (model.py)
    embed: int = 64             # width of the "sets" encoder's per-card networks
    lr: float = 1e-3
    lr_decay: float = 0.8       # learning rate multiplied by this after each epoch
    batch_size: int = 128
    weight_decay: float = 0.0   # decoupled (AdamW style), on weight matrices only
    value_coef: float = 1.0
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    target: str = "choice"      # or "search_values" (data.py)
    temperature: float = 0.05   # of the search_values target
    shuffle_buffer: int = 16384  # decisions the streaming shuffle holds (stream.py)
    threads: int = 1            # torch intra-op threads (the weights are bit-identical for a thread count)
    device: str = "cpu"         # or "cuda" when torch sees a GPU

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise InvalidArgument(f"target must be one of {', '.join(TARGETS)}, got {self.target!r}")
        if self.encoder not in ENCODERS:
            raise InvalidArgument(f"encoder must be one of {', '.join(ENCODERS)}, got {self.encoder!r}")
        if self.device not in DEVICES:
            raise InvalidArgument(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        ints = {"epochs": (1, 1000), "hidden": (1, 4096), "hidden2": (1, 4096), "depth": (1, 16),
                "value_hidden": (1, 4096), "embed": (1, 1024), "batch_size": (1, 1 << 16), "shuffle_buffer": (1, 1 << 22),
                "threads": (1, 256)}
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


# epochs x parameters x training decisions one call may ask for: about 45 CPU-minutes of the torch
# trainer here (measured with benchmarks/train_memory.py at 16x, the default net and batch: 205,441
# parameters x ~373k training decisions in 25.4 s per epoch on one torch thread, plus ~9 s of the
# stream's reader thread: about 2.2e9 parameter-decisions per CPU-second; the numpy trainer's cap
# was 4e12 at 1.5e9). The 60-minute improvement loop's largest round is 0.9e12.
MAX_TRAINING_COST = 6 * 10**12


def parameter_count(hp: HyperParams) -> int:
    """Trainable parameters of the network ``hp`` describes (model.ActionScorer's layers)."""
    obs, feat = engine.OBS_DIM, engine.ACTION_FEATURE_DIM
    trunk = (hp.hidden + 1) * hp.hidden2 + (hp.depth - 1) * (hp.hidden2 + 1) * hp.hidden2
    first = (obs + feat + 1) * hp.hidden
    if hp.encoder == "sets":  # per-kind networks, the pooled state's layer, the globals' layer
        card, creature, e = len(engine.features.CARD_FEATURES), len(engine.features.CREATURE_FEATURES), hp.embed
        encoder = (card + 1) * e + 2 * (creature + 1) * e + 3 * (e + 1) * e + (6 * e + 1) * hp.hidden
        first = encoder + len(engine.features.GLOBAL_FEATURES) * hp.hidden + (feat + 1) * hp.hidden
    return first + trunk + hp.hidden2 + (obs + 2) * hp.value_hidden + 1


def check_training_cost(hp: HyperParams, decisions: int) -> int:
    """The training cost (epochs x parameters x training decisions); refuses one over
    :data:`MAX_TRAINING_COST` with the numbers and what to lower."""
    params = parameter_count(hp)
    cost = hp.epochs * params * decisions
    if cost > MAX_TRAINING_COST:
        raise WorkCapExceeded(
            f"this training asks for epochs x parameters x training decisions = {hp.epochs:,} x {params:,} x "
            f"{decisions:,} = {cost:.2e}; one call may ask for at most MAX_TRAINING_COST = {MAX_TRAINING_COST:.0e} "
            f"(about 45 CPU-minutes): lower epochs, hidden/hidden2/depth, or train on a smaller dataset",
            {"cap": "MAX_TRAINING_COST", "limit": MAX_TRAINING_COST, "asked": cost})
    return cost


def require_torch() -> None:
    """:class:`~extrarlhf.core.extras.MissingExtra` (``pip install 'extrarlhf[train]'``) when torch
    cannot be imported."""
    require("torch", "train_policy (the PyTorch trainer)")


def check_device(device: str) -> None:
    """``cuda`` only when torch sees a GPU (InvalidArgument otherwise)."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise InvalidArgument("device 'cuda' was asked for but torch sees no CUDA GPU here "
                              f"(torch {torch.__version__}, torch.cuda.is_available() is False); use device 'cpu'")
