"""``train_policy``: a validated, V5-ready dataset -> a registered ``v5`` checkpoint + model card.

Steps (each refusal is an :class:`~extrarlhf.core.errors.RLHFError` with a stable code):

1. arguments, and the checkpoint name: an existing name needs ``overwrite=True``, and the
   promoted checkpoint (or one a rollback could restore) is never overwritten
   (``checkpoint_protected``: ``CheckpointRegistry.check_replaceable``, the check
   ``register`` itself repeats under the promotion lock);
2. ``validate_dataset`` must pass (``validation_failed``, with the failures), the dataset must
   be ``v5_decisions`` or ``v5_policy_split``, and ``dataset_readiness`` must call the V5
   policy contour ready (``not_ready``, with the blockers);
3. read the decisions (train/val/test: the split's files, or for a ``v5_decisions`` dataset
   the same keyed-hash battle assignment ``split_v5_training_dataset`` uses; test is held
   out and only scored at the end); the dataset's manifest must not change while it is
   read (``dataset_changed``);
4. behaviour cloning (bc.py) with numpy on one BLAS thread (blas.py);
5. export to ONNX and verify it against numpy (export.py), register it as kind ``v5`` and
   write the model card next to it (card.py).

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
import secrets
import signal
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..checkpoints.registry import CheckpointRegistry
from ..core.errors import InvalidArgument, NotReady, RLHFError, ValidationFailed
from ..core.names import check_name
from ..runtime.match import check_seed
from .bc import HyperParams, check_training_cost, policy_metrics, train_bc, value_mse
from .blas import single_blas_thread
from .card import build_card, write_card
from .data import Decisions, check_imitate, read_decisions, take, target_fallback
from .export import export_onnx

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


def load_splits(info: dict[str, Any], imitate: str, temperature: float | None = None
                ) -> tuple[dict[str, Decisions], dict[str, Any]]:
    """train/val/test decisions of a checked dataset, and how they were split (``temperature``:
    read the search's soft targets too, data.py)."""
    from ..datasets import DEFAULT_FRACTIONS, DEFAULT_SPLIT_KEY, bucket, split_of

    path, manifest = info["path"], info["manifest"]
    if info["kind"] == "v5_policy_split":
        splits = {s: read_decisions(path / manifest["tables"][s]["file"], imitate, temperature)
                  for s in ("train", "val", "test")}
        how = {"method": "the dataset's own split", **{k: manifest["split"].get(k) for k in ("split_key", "fractions",
                                                                                           "group_key")}}
        return splits, how
    every = read_decisions(path / manifest["tables"]["decisions"]["file"], imitate, temperature)
    fractions = tuple(DEFAULT_FRACTIONS)
    assignment = {b: split_of(bucket(DEFAULT_SPLIT_KEY, "v5_policy", b), fractions)
                  for b in dict.fromkeys(every.battle_ids.tolist())}
    which = np.array([assignment[b] for b in every.battle_ids.tolist()], dtype=object)
    splits = {s: take(every, np.flatnonzero(which == s)) for s in ("train", "val", "test")}
    how = {"method": "keyed hash of the battle id (as split_v5_training_dataset)", "split_key": DEFAULT_SPLIT_KEY,
           "fractions": dict(zip(("train", "val", "test"), fractions)), "group_key": "battle"}
    return splits, how


def train_policy(dataset: str, name: str, seed: int = 0, *, imitate: str = "all", epochs: int = 5,
                 hidden: int = 256, hidden2: int = 128, value_hidden: int = 64, lr: float = 1e-3,
                 lr_decay: float = 0.8, batch_size: int = 128, weight_decay: float = 0.0, value_coef: float = 1.0,
                 target: str = "choice", temperature: float = 0.05,
                 datasets_dir: str | os.PathLike[str] = "datasets",
                 checkpoints_dir: str | os.PathLike[str] = "checkpoints", policy: Any = None,
                 overwrite: bool = False, progress: Progress | None = None) -> dict[str, Any]:
    """Train a behaviour-cloning policy on ``dataset`` (``NAME``, ``NAME/vN`` or ``@POINTER``),
    register it as checkpoint ``name`` (kind ``v5``) and write its model card; returns a
    JSON-able summary (checkpoint, card path, weights_hash, data sizes, per-epoch metrics).
    ``target="search_values"`` imitates a search teacher's action values (bc.py, data.py);
    ``target_fallback`` says when the data had none, so the choices were learnt instead."""
    check_name(name, "checkpoint")
    seed = check_seed(seed)
    imitate = check_imitate(imitate)
    if not isinstance(overwrite, bool):
        raise InvalidArgument(f"overwrite must be true or false, got {overwrite!r}")
    hp = HyperParams(epochs=epochs, hidden=hidden, hidden2=hidden2, value_hidden=value_hidden, lr=lr,
                     lr_decay=lr_decay, batch_size=batch_size, weight_decay=weight_decay, value_coef=value_coef,
                     target=target, temperature=temperature)
    root = Path(checkpoints_dir)
    registry = CheckpointRegistry(root)
    if name in registry.specs():
        if not overwrite:
            raise RLHFError(f"checkpoint {name!r} already exists; choose another name or pass overwrite=true",
                            "already_exists")
        registry.check_replaceable(name)  # the registry's own check (register repeats it under the lock)

    info = check_dataset(dataset, datasets_dir, policy)
    splits, split_info = load_splits(info, imitate, temperature if target == "search_values" else None)
    if _sha256(info["path"] / "manifest.json") != info["manifest_sha256"]:
        raise RLHFError(f"dataset {info['dataset_id']} changed while it was read (overwritten?); train again",
                        "dataset_changed")
    train, val, test = splits["train"], splits["val"], splits["test"]
    if train.policy_rows().size == 0:
        raise InvalidArgument(
            f"no decision to imitate in the train split of {info['dataset_id']} with imitate={imitate!r} "
            f"(imitated decisions with more than one legal action: 0); actors in the dataset: "
            f"{', '.join(f'{k} ({v})' for k, v in sorted(train.actors.items())) or 'none'}; use 'all', "
            f"'winners' or one of those specs")
    check_training_cost(hp, len(train))

    with single_blas_thread() as blas_threads:
        result = train_bc(train, val if len(val) else None, hp, seed,
                          progress=(lambda done, total, _m: progress(done, total)) if progress else None)
        final = dict(result.history[-1])
        if len(test):
            tm = policy_metrics(result.params, test, test.policy_rows())
            final.update({"test_loss": round(tm["loss"], 5) if tm["decisions"] else None,
                          "test_top1": round(tm["top1"], 5) if tm["decisions"] else None,
                          "test_decisions": tm["decisions"],
                          "test_value_mse": round(value_mse(result.params, test), 5)})

    root.mkdir(parents=True, exist_ok=True)
    # named like fileio's temp files (.<target>.<pid>-<random>.tmp): `gc` can tell a dead trainer's export
    tmp = root / f".train-{name}.onnx.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    sample = val if len(val) else train
    try:
        exported = export_onnx(result.params, tmp, sample,
                               metadata={"extrarlhf.dataset_id": info["dataset_id"], "extrarlhf.seed": str(seed),
                                         "extrarlhf.imitate": imitate})
        checkpoint = registry.register(name, tmp, "v5", overwrite=overwrite)
    finally:
        tmp.unlink(missing_ok=True)
    if checkpoint.weights_hash != exported["weights_hash"]:  # the registry hashes the same initializers
        raise RLHFError(f"registered weights_hash {checkpoint.weights_hash} differs from the exported "
                        f"{exported['weights_hash']}", "integrity_error")

    if os.environ.get("RLHF_TEST_CRASH_AT") == "before_card":  # test hook (module docstring)
        os.kill(os.getpid(), signal.SIGKILL)
    fallback = target_fallback(train, target)  # search_values asked, none in the data: said, never silent
    data = {"split": split_info, **{s: d.describe() for s, d in splits.items()}, "target_fallback": fallback}
    dataset_block = {"dataset_id": info["dataset_id"], "kind": info["kind"], "manifest_sha256": info["manifest_sha256"],
                     "path": str(info["path"]), "row_counts": info["manifest"].get("row_counts"),
                     "source_groups": [g.get("group") for g in (info["manifest"].get("sources") or {}).get("groups")
                                       or []],
                     "readiness": info["readiness"]}
    card = build_card(name=name, checkpoint=checkpoint.as_dict(), dataset=dataset_block, seed=seed, imitate=imitate,
                      hyperparameters=hp.as_dict(), data=data, history=result.history, final=final,
                      export={"verification": exported["verification"], "opset": 17},
                      blas_threads=blas_threads, seconds=result.seconds)
    path = write_card(root, card)
    epochs_rate = [m["decisions_per_s"] for m in result.history]
    return {"name": name, "kind": "v5", "weights_hash": checkpoint.weights_hash, "checkpoint": checkpoint.as_dict(),
            "card_path": str(path.absolute()), "dataset_id": info["dataset_id"],
            "manifest_sha256": info["manifest_sha256"], "seed": seed, "imitate": imitate,
            "hyperparameters": hp.as_dict(),
            "data": {s: {k: v for k, v in d.describe().items() if k != "actors"} for s, d in splits.items()},
            "history": result.history, "final": final, "export_verification": exported["verification"],
            "seconds": round(result.seconds, 3), "decisions_per_s_per_epoch": epochs_rate,
            "target_fallback": fallback}
