"""``train_policy``: a validated, V5-ready dataset -> a registered ``v5`` checkpoint + model card.

Steps (each refusal is an :class:`~extrarlhf.core.errors.RLHFError` with a stable code):

1. arguments, and the checkpoint name: an existing name needs ``overwrite=True``, and the
   promoted checkpoint (or one a rollback could restore) is never overwritten
   (``checkpoint_protected``: ``CheckpointRegistry.check_replaceable``, the check
   ``register`` itself repeats under the promotion lock);
2. ``validate_dataset`` must pass (``validation_failed``, with the failures), the dataset must
   be ``v5_decisions`` or ``v5_policy_split``, and ``dataset_readiness`` must call the V5
   policy contour ready (``not_ready``, with the blockers);
3. stream the decisions (stream.py: train/val/test are the split's files, or for a
   ``v5_decisions`` dataset the same keyed-hash battle assignment ``split_v5_training_dataset``
   uses; test is held out and only scored at the end), one pass counting them and spooling
   them for the epochs; the dataset's manifest must not change while it is read
   (``dataset_changed``);
4. behaviour cloning in PyTorch (bc.py, model.py) under model.deterministic (``threads``
   intra-op threads, deterministic algorithms), on ``device``;
5. export through torch.onnx and verify it against torch in onnxruntime (export.py),
   register it as kind ``v5`` and write the model card next to it (card.py).

torch is imported here only when a training runs (the ``train`` extra; without it the call
says what to install).

The card records the weights_hash it describes, and every reader checks it against the
registry (card.read_card: ``stale_card``): a process killed between the registration of an
overwrite and the card write leaves the previous card next to the new weights, and that card
is reported as stale, never read as the new model's. Test hook: ``RLHF_TEST_CRASH_AT=before_card``
SIGKILLs the process right there (inert when unset; tests/training/test_card_staleness.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path
from typing import Any, Callable

from ..checkpoints.registry import CheckpointRegistry
from ..core.errors import InvalidArgument, NotReady, RLHFError, ValidationFailed
from ..core.names import check_name
from ..runtime.match import check_seed
from .card import build_card, write_card
from .data import check_imitate, target_fallback
from .hyper import HyperParams, check_device, check_training_cost, require_torch

TRAINABLE_KINDS = ("v5_decisions", "v5_policy_split")
Progress = Callable[[int, int], None]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_dataset(dataset: str, datasets_dir: Any, policy: Any = None) -> dict[str, Any]:
    """Validate ``dataset`` and check its V5 policy readiness; returns ``{"dataset_id", "path",
    "kind", "manifest", "manifest_sha256", "readiness"}`` or raises with the reasons."""
    from ..datasets import dataset_readiness, validate_dataset

    validation = validate_dataset(dataset, datasets_dir=datasets_dir)
    if not validation.get("valid", validation.get("ok")):
        failures = validation["failures"]
        raise ValidationFailed(f"dataset {validation['dataset_id']} fails validation, refusing to train on it: "
                               + "; ".join(f"[{f['code']}] {f['message']}" for f in failures[:3])
                               + (f" (and {len(failures) - 3} more)" if len(failures) > 3 else ""), failures)
    if validation["kind"] not in TRAINABLE_KINDS:
        raise InvalidArgument(f"dataset {validation['dataset_id']} is a {validation['kind']} dataset; a policy "
                              f"trains on {' or '.join(TRAINABLE_KINDS)} (materialize_v5_dataset, "
                              f"split_v5_training_dataset)")
    readiness = dataset_readiness(dataset=validation["dataset_id"], datasets_dir=datasets_dir, policy=policy)
    if not readiness["v5_policy_training_ready"]:
        blockers = readiness["v5_policy_blockers"]
        error = NotReady(f"dataset {validation['dataset_id']} is not ready for V5 policy training: "
                         + "; ".join(blockers), blockers)
        error.details = {"blockers": blockers, "dataset_id": validation["dataset_id"]}  # type: ignore[attr-defined]
        raise error
    path = Path(validation["path"])
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    return {"dataset_id": validation["dataset_id"], "path": path, "kind": validation["kind"], "manifest": manifest,
            "manifest_sha256": _sha256(path / "manifest.json"),
            "readiness": {"v5_policy_training_ready": True, "evidence": readiness.get("evidence"),
                          "policy": readiness.get("policy")}}


def _same_manifest(info: dict[str, Any]) -> None:
    if _sha256(info["path"] / "manifest.json") != info["manifest_sha256"]:
        raise RLHFError(f"dataset {info['dataset_id']} changed while it was read (overwritten?); train again",
                        "dataset_changed")


def train_policy(dataset: str, name: str, seed: int = 0, *, imitate: str = "all", epochs: int = 5,
                 hidden: int = 256, hidden2: int = 128, depth: int = 1, value_hidden: int = 64,
                 encoder: str = "flat", embed: int = 64, lr: float = 1e-3,
                 lr_decay: float = 0.8, batch_size: int = 128, weight_decay: float = 0.0, value_coef: float = 1.0,
                 target: str = "choice", temperature: float = 0.05, shuffle_buffer: int = 16384,
                 threads: int = 1, device: str = "cpu",
                 datasets_dir: str | os.PathLike[str] = "datasets",
                 checkpoints_dir: str | os.PathLike[str] = "checkpoints", policy: Any = None,
                 overwrite: bool = False, progress: Progress | None = None) -> dict[str, Any]:
    """Train a behaviour-cloning policy on ``dataset`` (``NAME``, ``NAME/vN`` or ``@POINTER``),
    register it as checkpoint ``name`` (kind ``v5``) and write its model card; returns a
    JSON-able summary (checkpoint, card path, weights_hash, data sizes, per-epoch metrics).
    ``target="search_values"`` imitates a search teacher's action values (bc.py, data.py);
    ``target_fallback`` says when the data had none, so the choices were learnt instead.
    ``depth``/``hidden``/``hidden2`` size the network and ``encoder``/``embed`` choose how it
    reads the observation (model.Architecture), ``threads`` and
    ``device`` where it trains (hyper.HyperParams)."""
    check_name(name, "checkpoint")
    seed = check_seed(seed)
    imitate = check_imitate(imitate)
    if not isinstance(overwrite, bool):
        raise InvalidArgument(f"overwrite must be true or false, got {overwrite!r}")
    hp = HyperParams(epochs=epochs, hidden=hidden, hidden2=hidden2, depth=depth, value_hidden=value_hidden,
                     encoder=encoder, embed=embed, lr=lr,
                     lr_decay=lr_decay, batch_size=batch_size, weight_decay=weight_decay, value_coef=value_coef,
                     target=target, temperature=temperature, shuffle_buffer=shuffle_buffer, threads=threads,
                     device=device)
    require_torch()
    check_device(hp.device)
    root = Path(checkpoints_dir)
    registry = CheckpointRegistry(root)
    registry.check_writable(name, overwrite)  # before any work (register repeats the protection check under its lock)

    from .stream import DatasetStream, check_split_sizes

    info = check_dataset(dataset, datasets_dir, policy)
    with DatasetStream(info, imitate, temperature if target == "search_values" else None) as stream:
        stats = stream.scan()
        _same_manifest(info)
        check_split_sizes(stats, info["dataset_id"], imitate)
        check_training_cost(hp, stats["train"].decisions)

        from .bc import policy_metrics, train_bc
        from .export import export_and_register
        from .model import deterministic

        with deterministic(hp.threads) as runtime:
            result = train_bc(stream, hp, seed, validate=stats["val"].decisions > 0,
                              progress=(lambda done, total, _m: progress(done, total)) if progress else None)
            final = dict(result.history[-1])
            if stats["test"].decisions:
                tm = policy_metrics(result.model, stream.chunks("test"), next(result.model.parameters()).device)
                final.update({"test_loss": round(tm["loss"], 5) if tm["decisions"] else None,
                              "test_top1": round(tm["top1"], 5) if tm["decisions"] else None,
                              "test_decisions": tm["decisions"],
                              "test_value_mse": round(tm["value_mse"], 5)})
            held_out = next(s for s in ("val", "test", "train") if stats[s].decisions)
            sample = stream.sample(held_out, 64)

            metadata = {"extrarlhf.dataset_id": info["dataset_id"], "extrarlhf.seed": str(seed),
                        "extrarlhf.imitate": imitate}
            checkpoint, exported = export_and_register(registry, name, result.model, sample, metadata,
                                                       label="train", overwrite=overwrite)

    if os.environ.get("RLHF_TEST_CRASH_AT") == "before_card":  # test hook (module docstring)
        os.kill(os.getpid(), signal.SIGKILL)
    fallback = target_fallback(stats["train"], target)  # search_values asked, none in the data: said, never silent
    described = {s: st.describe() for s, st in stats.items()}
    data = {"split": stream.how, **described, "target_fallback": fallback,
            "streaming": {"shuffle_buffer": hp.shuffle_buffer, "buffer_peak_decisions": result.buffer_peak,
                          "row_groups": {s: len(stream.units[s]) for s in stats}}}
    dataset_block = {"dataset_id": info["dataset_id"], "kind": info["kind"], "manifest_sha256": info["manifest_sha256"],
                     "path": str(info["path"]), "row_counts": info["manifest"].get("row_counts"),
                     "source_groups": [g.get("group") for g in (info["manifest"].get("sources") or {}).get("groups")
                                       or []],
                     "readiness": info["readiness"]}
    card = build_card(name=name, checkpoint=checkpoint.as_dict(), dataset=dataset_block, seed=seed, imitate=imitate,
                      hyperparameters=hp.as_dict(), architecture=result.model.arch, data=data,
                      history=result.history, final=final,
                      export={"verification": exported["verification"], "opset": 17, "exporter": "torch.onnx"},
                      runtime=runtime, seconds=result.seconds)
    path = write_card(root, card)
    epochs_rate = [m["decisions_per_s"] for m in result.history]
    return {"name": name, "kind": "v5", "weights_hash": checkpoint.weights_hash, "checkpoint": checkpoint.as_dict(),
            "card_path": str(path.absolute()), "dataset_id": info["dataset_id"],
            "manifest_sha256": info["manifest_sha256"], "seed": seed, "imitate": imitate,
            "hyperparameters": hp.as_dict(),
            "data": {s: {k: v for k, v in d.items() if k != "actors"} for s, d in described.items()},
            "history": result.history, "final": final, "export_verification": exported["verification"],
            "seconds": round(result.seconds, 3), "decisions_per_s_per_epoch": epochs_rate,
            "target_fallback": fallback}
