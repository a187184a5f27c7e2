"""Promotion of a checkpoint to *the* policy, with history and rollback (DESIGN section 11).

Files under the checkpoints dir::

    promoted.json            the promoted pointer (atomic replace): name, kind, weights_hash,
                             sha256, the benchmark that justified it, the previous pointer's name
    promoted.json.lock       serializes promotions and rollbacks (flock)
    promoted_history.jsonl   one line per event ("promote" or "rollback"), each with the
                             pointer document it installed

:func:`promote_checkpoint` promotes only a candidate that (every refusal names each failed check):

1. is registered, with its model file present and intact;
2. has a benchmark report; its *latest* one (highest sequence) is valid (no degraded or
   crashed battle) and passed (the SPRT accepted H1); an unreadable report file of the
   candidate refuses too (it might be the latest);
3. played with the weights it is registered with now (the report's played weights_hash
   equals the registry's, so weights replaced after the benchmark are never promoted);
4. was benchmarked against the current incumbent -- the promoted checkpoint, with the
   weights it was promoted with, or ``baseline:greedy`` when nothing is promoted
   (``require_current_incumbent=False`` waives this one, e.g. for a first promotion
   decided against another reference);
5. is not already the promoted one.

:func:`rollback_promotion` re-installs the pointer that was current before the last
promotion (the history is a stack: promote pushes, rollback pops), after checking that the
checkpoint it names is still registered with the same weights.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .benchmarking import list_benchmarks
from .checkpoints import CheckpointRegistry
from .errors import NotFound, RLHFError, UnsupportedSchema
from .fileio import append_line_locked, atomic_write_json, locked
from .trace import utc_now

POINTER_SCHEMA_VERSION = 1
POINTER = "promoted.json"
HISTORY = "promoted_history.jsonl"
DEFAULT_INCUMBENT = "baseline:greedy"


class PromotionRefused(RLHFError):
    """A promotion or rollback that the rules forbid; ``details["reasons"]`` lists each
    failed check as ``{"check", "message"}``."""

    code = "promotion_refused"

    def __init__(self, message: str, reasons: list[dict[str, str]], **details: Any) -> None:
        super().__init__(message)
        self.reasons = reasons
        self.details = {"reasons": reasons, **details}


def read_promoted(checkpoints_dir: str | os.PathLike[str] = "checkpoints") -> dict[str, Any] | None:
    """The promoted pointer document, or None when nothing is promoted."""
    path = Path(checkpoints_dir) / POINTER
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UnsupportedSchema(f"{path} is not valid JSON ({exc}); restore it from {HISTORY}") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != POINTER_SCHEMA_VERSION:
        raise UnsupportedSchema(f"{path}: schema_version {doc.get('schema_version') if isinstance(doc, dict) else None!r}"
                                f" is not supported (this version reads {POINTER_SCHEMA_VERSION})")
    return doc


def promotion_history(checkpoints_dir: str | os.PathLike[str] = "checkpoints") -> list[dict[str, Any]]:
    """Every promotion event, oldest first (torn or foreign lines are skipped)."""
    path = Path(checkpoints_dir) / HISTORY
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    events = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict) and event.get("event") in ("promote", "rollback") and \
                isinstance(event.get("pointer"), dict):
            events.append(event)
    return events


def _stack(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    stack: list[dict[str, Any]] = []
    for event in events:
        if event["event"] == "promote":
            stack.append(event["pointer"])
        elif stack:
            stack.pop()
    return stack


def current_incumbent(checkpoints_dir: str | os.PathLike[str] = "checkpoints") -> str:
    """The spec new candidates are benchmarked against: the promoted checkpoint, else
    ``baseline:greedy``."""
    doc = read_promoted(checkpoints_dir)
    return doc["name"] if doc else DEFAULT_INCUMBENT


def promotion_status(checkpoints_dir: str | os.PathLike[str] = "checkpoints") -> dict[str, Any]:
    """The promoted pointer (checked against the registry), the incumbent spec and the history."""
    root = Path(checkpoints_dir)
    doc = read_promoted(root)
    events = promotion_history(root)
    check = None
    if doc is not None:
        check = _registered_problems(CheckpointRegistry(root), doc["name"], doc["weights_hash"])
    stack = _stack(events)
    return {"checkpoints_dir": str(root.absolute()), "promoted": doc,
            "incumbent": doc["name"] if doc else DEFAULT_INCUMBENT,
            "promoted_intact": None if doc is None else not check,
            "promoted_problems": check or [],
            "history_consistent": (not stack and doc is None) or (bool(stack) and doc is not None and
                                                                  _same(stack[-1], doc)),
            "can_roll_back_to": stack[-2]["name"] if len(stack) >= 2 else None,
            "history": events}


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.get("name") == b.get("name") and a.get("weights_hash") == b.get("weights_hash")


def _registered_problems(registry: CheckpointRegistry, name: str, weights_hash: str | None) -> list[str]:
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


def _refuse(what: str, reasons: list[dict[str, str]], **details: Any) -> PromotionRefused:
    text = "; ".join(f"[{r['check']}] {r['message']}" for r in reasons)
    return PromotionRefused(f"{what} refused: {text}", reasons, **details)


def promote_checkpoint(name: str, *, checkpoints_dir: str | os.PathLike[str] = "checkpoints",
                       require_current_incumbent: bool = True) -> dict[str, Any]:
    """Promote checkpoint ``name`` (see the module docstring for the rules); returns
    ``{"promoted": pointer, "previous": pointer or None, "benchmark": {...}}``."""
    root = Path(checkpoints_dir)
    registry = CheckpointRegistry(root)
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / POINTER):
        reasons: list[dict[str, str]] = []
        try:
            cp = registry.get(name)
        except NotFound as exc:
            raise _refuse(f"promotion of {name!r}", [{"check": "registered", "message": str(exc)}]) from None
        for problem in _registered_problems(registry, name, cp.weights_hash):
            reasons.append({"check": "file_intact", "message": problem})
        unreadable: list[str] = []
        reports = list_benchmarks(root, name, unreadable)
        report = reports[-1] if reports else None
        for problem in unreadable:  # a damaged report might be the latest one: never guess
            reasons.append({"check": "benchmark_reports_readable", "message": problem})
        current = read_promoted(root)
        incumbent = current["name"] if current else DEFAULT_INCUMBENT
        if report is None:
            reasons.append({"check": "benchmarked", "message": f"{name!r} has no benchmark report in "
                                                               f"{root / 'benchmarks'}; run benchmark_models "
                                                               f"({name!r} vs {incumbent!r}) first"})
        else:
            where = f"latest benchmark #{report['sequence']} ({report['report_path']})"
            if not report["valid"]:
                reasons.append({"check": "benchmark_valid", "message": f"{where} is invalid: "
                                                                       + "; ".join(report["invalid_reasons"])})
            if not report["passed"]:
                reasons.append({"check": "benchmark_passed", "message": f"{where} did not pass: {report['verdict']}"})
            played = report["candidate"]["played_weights_hashes"]
            if played != [cp.weights_hash]:
                reasons.append({"check": "weights_hash", "message": f"{where} played weights_hash "
                                f"{', '.join(h[:16] + '...' for h in played) or 'none'} but {name!r} is registered "
                                f"with {cp.weights_hash[:16]}...; benchmark the registered weights again"})
            if require_current_incumbent:
                bench_inc = report["incumbent"]
                if bench_inc["spec"] != incumbent:
                    reasons.append({"check": "current_incumbent", "message": f"{where} was played against "
                                    f"{bench_inc['spec']!r} but the current incumbent is {incumbent!r}; benchmark "
                                    f"{name!r} against {incumbent!r}"})
                elif current is not None and bench_inc["played_weights_hashes"] != [current["weights_hash"]]:
                    reasons.append({"check": "current_incumbent", "message": f"{where} was played against other "
                                    f"weights of {incumbent!r} than the promoted ones "
                                    f"({current['weights_hash'][:16]}...)"})
        if current is not None and _same(current, {"name": name, "weights_hash": cp.weights_hash}):
            reasons.append({"check": "not_already_promoted", "message": f"{name!r} with these weights is already "
                                                                        f"the promoted checkpoint (since "
                                                                        f"{current['promoted_at']})"})
        if reasons:
            raise _refuse(f"promotion of {name!r}", reasons, candidate=name, incumbent=incumbent)
        assert report is not None
        pointer = {"schema_version": POINTER_SCHEMA_VERSION, "name": name, "kind": cp.kind,
                   "weights_hash": cp.weights_hash, "sha256": cp.sha256, "file": cp.path.name,
                   "promoted_at": utc_now(),
                   "previous": {"name": current["name"], "weights_hash": current["weights_hash"]} if current else None,
                   "benchmark": {"report": report["report_path"], "sequence": report["sequence"],
                                 "incumbent": report["incumbent"]["spec"], "score": report["match"]["score"],
                                 "elo": report["match"]["elo"], "elo_ci95": report["match"]["elo_ci95"],
                                 "llr": report["match"]["sprt"]["llr"], "decision": report["match"]["sprt"]["decision"],
                                 "pairs": report["match"]["pairs"]}}
        atomic_write_json(root / POINTER, pointer)
        append_line_locked(root / HISTORY, json.dumps({"event": "promote", "at": pointer["promoted_at"],
                                                       "name": name, "weights_hash": cp.weights_hash,
                                                       "from": pointer["previous"], "pointer": pointer},
                                                      sort_keys=True))
    return {"promoted": pointer, "previous": current, "pointer_path": str((root / POINTER).absolute()),
            "history_path": str((root / HISTORY).absolute())}


def rollback_promotion(*, checkpoints_dir: str | os.PathLike[str] = "checkpoints") -> dict[str, Any]:
    """Re-install the pointer that was promoted before the current one; returns
    ``{"promoted": restored pointer, "rolled_back": the pointer it replaced}``."""
    root = Path(checkpoints_dir)
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / POINTER):
        current = read_promoted(root)
        stack = _stack(promotion_history(root))
        if current is None:
            raise _refuse("rollback", [{"check": "promoted", "message": "nothing is promoted, so there is nothing "
                                                                        "to roll back"}])
        if not stack or not _same(stack[-1], current):
            raise _refuse("rollback", [{"check": "history_consistent", "message": f"{POINTER} names "
                                        f"{current['name']!r} but {HISTORY} does not end with its promotion; "
                                        f"restore the pointer or promote explicitly"}])
        if len(stack) < 2:
            raise _refuse("rollback", [{"check": "previous_promotion", "message": f"{current['name']!r} is the "
                                        f"first promotion in {HISTORY}; there is no earlier one to roll back to"}])
        target = stack[-2]
        problems = _registered_problems(CheckpointRegistry(root), target["name"], target["weights_hash"])
        if problems:
            raise _refuse("rollback", [{"check": "previous_usable", "message": p} for p in problems],
                          target=target["name"])
        restored = {**target, "restored_at": utc_now(), "restored_by": "rollback",
                    "rolled_back": {"name": current["name"], "weights_hash": current["weights_hash"]}}
        atomic_write_json(root / POINTER, restored)
        append_line_locked(root / HISTORY, json.dumps({"event": "rollback", "at": restored["restored_at"],
                                                       "name": target["name"],
                                                       "weights_hash": target["weights_hash"],
                                                       "from": {"name": current["name"],
                                                                "weights_hash": current["weights_hash"]},
                                                       "pointer": restored}, sort_keys=True))
    return {"promoted": restored, "rolled_back": current, "pointer_path": str((root / POINTER).absolute())}
