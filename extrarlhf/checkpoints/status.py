"""The promotion records joined with the registry: is the promoted checkpoint still registered
with the weights it was promoted with, and what ``extrarlhf check`` reports about the records.
(promoted.py reads and writes the records; registry.py asks it which names are protected.)"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..core.errors import NotFound, RLHFError, UnsupportedSchema
from .promoted import DEFAULT_INCUMBENT, POINTER, read_intent, read_state, same_pointer
from .registry import CheckpointRegistry


def promotion_status(checkpoints_dir: str | os.PathLike[str] = "checkpoints", *,
                     repair: bool = True) -> dict[str, Any]:
    """The promoted pointer (checked against the registry), the incumbent spec, the history
    and the consistency of the three files: ``consistent`` (nothing torn is left), ``torn``
    (each problem found, in words), ``repaired`` (what this call repaired), ``damaged``
    (each damaged record: ``code``, ``path``, ``line``, ``field``, ``problem``, ``message``;
    never repaired; ``history_consistent`` is false while there is one, and ``incumbent`` is
    null while ``promoted.json`` itself is damaged). ``repair=False`` only looks."""
    root = Path(checkpoints_dir)
    state = read_state(root, repair=repair)
    doc = state["pointer"]
    check = None
    if doc is not None:
        check = registered_problems(CheckpointRegistry(root), doc["name"], doc["weights_hash"])
    stack = state["stack"]
    intent, _ = read_intent(root)
    out = {"checkpoints_dir": str(root.absolute()), "promoted": doc,
           "incumbent": doc["name"] if doc else (None if state["pointer_error"] else DEFAULT_INCUMBENT),
           "promoted_intact": None if doc is None else not check,
           "promoted_problems": check or [],
           "consistent": state["consistent"], "torn": state["unresolved"],
           "repaired": state["repaired"], "pending_intent": intent,
           "history_consistent": not state["damaged"] and (
               (not stack and doc is None) or (bool(stack) and doc is not None and same_pointer(stack[-1], doc))),
           "can_roll_back_to": stack[-2]["name"] if len(stack) >= 2 and not state["damaged"] else None,
           "damaged": state["damaged"], "history": state["events"]}
    if "repair_error" in state:
        out["repair_error"] = state["repair_error"]
    return out


def check_promotion(checkpoints_dir: str | os.PathLike[str] = "checkpoints", *,
                    repair: bool = False) -> dict[str, Any]:
    """The promotion records' problems for ``extrarlhf check``: ``problems`` (each ``code``,
    ``severity``, ``path``, ``line``, ``field``, ``message`` and ``repairable``: whether the
    crash repair every reader runs would fix it) and ``repaired`` (what ``repair=True`` fixed:
    only the states a crash left, as :func:`promotion_status` repairs them; a damaged record is
    never repaired). ``repair=False`` writes nothing."""
    root = Path(checkpoints_dir)
    problems: list[dict[str, Any]] = []
    try:
        state = read_state(root, repair=repair)
    except UnsupportedSchema as exc:
        return {"problems": [{"code": exc.code, "severity": "error", "path": str((root / POINTER).absolute()),
                              "line": None, "field": "schema_version", "message": str(exc), "repairable": False}],
                "repaired": []}
    for damage in state["damaged"]:
        problems.append({**damage, "severity": "error", "repairable": False})
    damaged_text = {d["message"] for d in state["damaged"]}
    for text in state["unresolved"]:
        if text in damaged_text:
            continue
        problems.append({"code": "promotion_torn", "severity": "error", "path": str(root.absolute()), "line": None,
                         "field": None, "message": text, "repairable": text not in state["unrepairable"]})
    if "repair_error" in state:
        problems.append({"code": "promotion_not_repaired", "severity": "error", "path": str(root.absolute()),
                         "line": None, "field": None, "message": state["repair_error"], "repairable": False})
    pointer = state["pointer"]
    if pointer is not None:
        try:
            found = registered_problems(CheckpointRegistry(root), pointer["name"], pointer["weights_hash"])
        except RLHFError as exc:  # the registry's index itself: reported by the registry check
            found = [f"the promoted checkpoint cannot be checked ({exc.code}: {exc})"]
        for text in found:
            problems.append({"code": "promoted_checkpoint_unusable", "severity": "error",
                             "path": str((root / POINTER).absolute()), "line": None, "field": None,
                             "message": f"the promoted checkpoint ({POINTER}): {text}", "repairable": False})
    return {"problems": problems, "repaired": list(state["repaired"])}


def registered_problems(registry: CheckpointRegistry, name: str, weights_hash: str | None) -> list[str]:
    """Why ``name`` with ``weights_hash`` is not usable now (empty when it is)."""
    try:
        info = registry.inspect(name)
    except NotFound:
        return [f"{name!r} is no longer registered"]
    problems = []
    if weights_hash is not None and info["weights_hash"] != weights_hash:
        problems.append(f"{name!r} is now registered with weights_hash {info['weights_hash'][:16]}..., not "
                        f"{weights_hash[:16]}...")
    if not info["file_present"]:
        problems.append(f"the model file of {name!r} is missing ({info['path']})")
    elif not info["file_intact"]:
        problems.append(f"the model file of {name!r} changed since registration ({info['path']})")
    return problems
