"""``finetune_policy``: a registered ``v5`` checkpoint -> a policy-gradient fine-tuned one + model card.

Steps (refusals are :class:`~extrarlhf.core.errors.RLHFError` with a stable code, as in
``train_policy``):

1. arguments; the new name must be free (or ``overwrite=True``, never the promoted
   checkpoint: ``CheckpointRegistry.check_replaceable``); the base checkpoint must be a ``v5``
   model this project trained (``model.from_onnx``; ``invalid_argument`` otherwise) whose file
   still has the weights_hash the registry recorded (``integrity_error``);
2. PPO against the opponents for ``minutes`` (ppo.py; the native engine core plays the
   battles: ``engine_unavailable`` without it);
3. export through ``torch.onnx`` verified in onnxruntime on real decision points of the
   fine-tune (export.py), registration as kind ``v5``, and the model card: method
   ``ppo_finetune``, the base checkpoint and its weights_hash, the settings, every update's
   figures and every evaluation.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from adapters.model_files import read_model_file
from adapters.onnx_contracts import weights_hash

from ..checkpoints.registry import CheckpointRegistry
from ..core.clock import utc_now
from ..core.errors import InvalidArgument, RLHFError
from ..core.extras import require
from ..core.names import check_name
from ..runtime.match import check_seed
from .card import CARD_SCHEMA_VERSION, checkpoint_block, environment_block, model_block, write_card

Progress = Callable[[int, dict[str, Any]], None]


def _engine_core() -> None:
    from engine import backend

    if backend.native() is None:
        raise RLHFError("the policy-gradient fine-tune plays its battles on the native engine core, which is not "
                        "available here (EXTRAARENA_ENGINE=python, or the native core not built: `make setup` or a pip install of the checkout builds it)",
                        "engine_unavailable")


def _sample(roll: Any, n: int = 256) -> Any:
    """The first ``n`` decisions of a rollout as training Decisions (what export verification reads)."""
    from .data import Decisions

    n = min(n, roll.counts.size)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(roll.counts[:n], out=offsets[1:])
    return Decisions(obs=roll.obs[:n], features=roll.features[:offsets[-1]], offsets=offsets,
                     labels=roll.chosen[:n], outcome=np.zeros(n, np.float32), imitated=np.ones(n, bool),
                     battle_ids=np.array(["finetune"] * n, dtype=object))


def _selection(chosen: Any) -> str:
    """What the registered network is, in words (the model card's ``training.selection``)."""
    network = (f"the exponential moving average of the learner's weights (decay {chosen.ema:g} per update)"
               if chosen.ema else "the learner")
    said = ("the best of the evaluations (argmax play against the first opponent on the fine-tune's own battles) of "
            + network + "; the base network when none improved on it")
    if chosen.learners == 1:
        return said
    staged = "" if chosen.stages == 1 else (
        f" in each of {chosen.stages} stages, every later stage starting from the ensemble of the learners before "
        f"it distilled into one network")
    total = chosen.learners * chosen.stages
    return (f"{chosen.learners} independent learners, one process each{staged}; for each, " + said
            + f". Then the base, their ensemble (one network of the {total} side by side, the mean of their "
              f"logits){', the distilled networks' if chosen.stages > 1 else ''}, the average of their weights and "
              f"each learner's network played the same "
              f"{chosen.selection_battles} battles of a selection seed none of them evaluated on, and the "
              f"best-scoring one was kept, ties going to the earlier in that order (metrics.best.selection)")


def load_base(registry: CheckpointRegistry, base: str, use: str = "fine-tuned") -> tuple[Any, Any]:
    """(checkpoint, model.ActionScorer) of a v5 checkpoint this project trained, its file
    checked against the registry's weights_hash; ``use`` says what for in the errors."""
    import onnx

    from .model import from_onnx

    parent = registry.get(base)
    if parent.kind != "v5":
        raise InvalidArgument(f"checkpoint {base!r} is a {parent.kind} model; only v5 checkpoints can be {use}")
    proto = onnx.load_from_string(read_model_file(parent.path))
    if weights_hash(proto) != parent.weights_hash:
        raise RLHFError(f"checkpoint {base!r}'s file no longer has the weights_hash the registry recorded; "
                        f"run `extrarlhf check`", "integrity_error")
    try:
        return parent, from_onnx(proto)
    except ValueError as exc:
        raise InvalidArgument(f"checkpoint {base!r}: {exc}") from None


def finetune_policy(base: str, name: str, seed: int = 0, *, minutes: float = 10.0,
                    checkpoints_dir: str | os.PathLike[str] = "checkpoints", overwrite: bool = False,
                    progress: Progress | None = None, **settings: Any) -> dict[str, Any]:
    """Fine-tune checkpoint ``base`` with PPO for about ``minutes`` and register the best
    evaluated network as ``name`` (module docstring); ``settings`` are
    :class:`.ppo.FinetuneSettings` fields (opponents, lr, temperature, ...). Returns a JSON-able
    summary: the checkpoint, card path, the score against the first opponent before and after
    (on the fine-tune's own evaluation battles), every evaluation, seconds."""
    require("torch", "fine-tuning a policy")
    from .export import export_and_register
    from .ppo import FinetuneSettings, finetune

    check_name(name, "checkpoint")
    seed = check_seed(seed)
    if not isinstance(overwrite, bool):
        raise InvalidArgument(f"overwrite must be true or false, got {overwrite!r}")
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not 0 < minutes <= 24 * 60:
        raise InvalidArgument(f"minutes must be a number in (0, 1440], got {minutes!r}")
    if "opponents" in settings:
        settings["opponents"] = tuple(settings["opponents"])
    try:
        chosen = FinetuneSettings(**settings)
    except TypeError as exc:
        raise InvalidArgument(f"unknown fine-tune setting ({exc}); the settings are "
                              f"{', '.join(FinetuneSettings.__dataclass_fields__)}") from None
    root = Path(checkpoints_dir)
    registry = CheckpointRegistry(root)
    registry.check_writable(name, overwrite)  # before any work (register repeats the protection check under its lock)
    parent, net = load_base(registry, base)
    _engine_core()

    result = finetune(net, chosen, seed, seconds=60.0 * minutes, progress=progress)
    checkpoint, exported = export_and_register(
        registry, name, result.net, _sample(result.sample),
        {"extrarlhf.finetuned_from": parent.weights_hash, "extrarlhf.seed": str(seed),
         "extrarlhf.method": "ppo_finetune"}, label="finetune", overwrite=overwrite)
    improved = result.improved
    card = {
        "schema_version": CARD_SCHEMA_VERSION, "kind": "model_card", "name": name, "created_at": utc_now(),
        "model": model_block(result.net.arch),
        "checkpoint": checkpoint_block(checkpoint.as_dict()),
        "weights_hash": checkpoint.weights_hash,
        "dataset": None,
        "training": {"method": "ppo_finetune",
                     "loss": "PPO clipped surrogate of the softmax(logits / temperature) policy with GAE "
                             "(gamma 1, reward +1 win / 0 draw / -1 loss), value head squared error to the "
                             "lambda-return",
                     "base": {"name": base, "weights_hash": parent.weights_hash},
                     "seed": seed, "settings": result.settings, "minutes": minutes,
                     "selection": _selection(chosen),
                     "improved": improved, "seconds": result.seconds},
        "metrics": {"start": result.start, "best": result.best, "evaluations": result.evaluations,
                    "per_update": result.history},
        "export": {"verification": exported["verification"], "opset": 17},
        "environment": environment_block(),
    }
    path = write_card(root, card)
    return {"name": name, "kind": "v5", "weights_hash": checkpoint.weights_hash, "checkpoint": checkpoint.as_dict(),
            "card_path": str(path.absolute()), "base": base, "seed": seed, "settings": result.settings,
            "start": result.start, "best": result.best, "improved": improved, "evaluations": result.evaluations,
            "updates": len(result.history), "seconds": result.seconds,
            "export_verification": exported["verification"]}
