"""Promotion of a checkpoint to *the* policy, and rollback (DESIGN section 11).

The records (``promoted.json``, its history and intent, the protection of promoted
checkpoints) are ``extrarlhf.checkpoints.promoted``; what a benchmark must show is
:class:`~extrarlhf.policies.promotion_policy.PromotionPolicy`. This module decides and
writes a promotion or a rollback through them; it also re-exports the readers its callers use.

:func:`promote_checkpoint` first repairs what a crash left (see below; a state it cannot repair
refuses with the check ``history_consistent``), then promotes only a candidate that (every
refusal names each failed check):

1. is registered, with its model file present and intact (``registered``, ``file_intact``);
2. has a benchmark report (``benchmarked``); its *latest* one (highest sequence) is valid (no
   degraded or crashed battle: ``benchmark_valid``), its SPRT accepted H1
   (``benchmark_passed``) and its settings meet the policy (``promotion_policy``, one reason
   per setting that falls short); an unreadable report file of the candidate refuses too
   (``benchmark_reports_readable``: it might be the latest);
3. played with the weights it is registered with now (``weights_hash``: the report's played
   weights_hash equals the registry's, so weights replaced after the benchmark are never
   promoted);
4. was benchmarked against the current incumbent (``current_incumbent``) -- the promoted
   checkpoint, with the weights it was promoted with, or ``baseline:random`` when nothing is
   promoted (``require_current_incumbent=False`` waives this one, e.g. for a first promotion
   decided against another reference);
5. is not already the promoted one (``not_already_promoted``).

:func:`rollback_promotion` re-installs the pointer that was current before the last
promotion (the history is a stack: promote pushes, rollback pops), after checking that the
checkpoint it names is still registered with the same weights.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..checkpoints.promoted import (
    DEFAULT_INCUMBENT,
    HISTORY,
    POINTER,
    POINTER_SCHEMA_VERSION,
    commit,
    current_incumbent,
    promote_line,
    promotion_guard,
    promotion_history,
    read_promoted,
    reconcile,
    rollback_line,
    same_pointer,
)
from ..checkpoints.registry import CheckpointRegistry
from ..checkpoints.status import check_promotion, promotion_status, registered_problems
from ..core.clock import utc_now
from ..core.errors import InvalidArgument, NotFound, RLHFError
from ..core.fileio import locked
from .promotion_policy import PromotionPolicy, benchmark_blockers

__all__ = ["DEFAULT_INCUMBENT", "HISTORY", "POINTER", "PromotionPolicy", "PromotionRefused", "benchmark_blockers",
           "check_promotion", "current_incumbent", "promote_checkpoint", "promotion_guard", "promotion_history",
           "promotion_status", "read_promoted", "rollback_promotion"]


class PromotionRefused(RLHFError):
    """A promotion or rollback that the rules forbid; ``details["reasons"]`` lists each
    failed check as ``{"check", "message"}``."""

    code = "promotion_refused"

    def __init__(self, message: str, reasons: list[dict[str, str]], **details: Any) -> None:
        super().__init__(message)
        self.reasons = reasons
        self.details = {"reasons": reasons, **details}



def _refuse(what: str, reasons: list[dict[str, str]], **details: Any) -> PromotionRefused:
    text = "; ".join(f"[{r['check']}] {r['message']}" for r in reasons)
    return PromotionRefused(f"{what} refused: {text}", reasons, **details)


def _inconsistent(what: str, state: dict[str, Any]) -> PromotionRefused:
    return _refuse(what, [{"check": "history_consistent", "message": m} for m in state["unresolved"]])


def promote_checkpoint(name: str, *, checkpoints_dir: str | os.PathLike[str] = "checkpoints",
                       require_current_incumbent: bool = True,
                       policy: PromotionPolicy | None = None) -> dict[str, Any]:
    """Promote checkpoint ``name`` (see the module docstring for the rules; ``policy``
    overrides the default :class:`PromotionPolicy`); returns ``{"promoted": pointer,
    "previous": pointer or None, "pointer_path", "history_path", "repaired"}``."""
    from .benchmarking import list_benchmarks

    policy = PromotionPolicy.coerce(policy)
    if not isinstance(require_current_incumbent, bool):
        raise InvalidArgument(f"require_current_incumbent must be true or false, got {require_current_incumbent!r}")
    root = Path(checkpoints_dir)
    registry = CheckpointRegistry(root)
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / POINTER):
        state = reconcile(root, write=True)
        if not state["consistent"]:
            raise _inconsistent(f"promotion of {name!r}", state)
        reasons: list[dict[str, str]] = []
        try:
            cp = registry.get(name)
        except NotFound as exc:
            raise _refuse(f"promotion of {name!r}", [{"check": "registered", "message": str(exc)}]) from None
        for problem in registered_problems(registry, name, cp.weights_hash):
            reasons.append({"check": "file_intact", "message": problem})
        unreadable: list[str] = []
        reports = list_benchmarks(root, name, unreadable)
        report = reports[-1] if reports else None
        for problem in unreadable:  # a damaged report might be the latest one: never guess
            reasons.append({"check": "benchmark_reports_readable", "message": problem})
        current = state["pointer"]
        incumbent = current["name"] if current else DEFAULT_INCUMBENT
        if report is None:
            reasons.append({"check": "benchmarked", "message": f"{name!r} has no benchmark report in "
                                                               f"{root / 'benchmarks'}; run benchmark_models "
                                                               f"({name!r} vs {incumbent!r}) first"})
        else:
            where = f"latest benchmark #{report['sequence']} ({report['report_path']})"
            for reason in benchmark_blockers(report, policy):
                reasons.append({"check": reason["check"], "message": f"{where}: {reason['message']}"})
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
        if current is not None and same_pointer(current, {"name": name, "weights_hash": cp.weights_hash}):
            reasons.append({"check": "not_already_promoted", "message": f"{name!r} with these weights is already "
                                                                        f"the promoted checkpoint (since "
                                                                        f"{current.get('restored_at') or current['promoted_at']})"})
        if reasons:
            raise _refuse(f"promotion of {name!r}", reasons, candidate=name, incumbent=incumbent,
                          policy=policy.as_dict())
        assert report is not None
        sprt = report["match"]["sprt"]
        pointer = {"schema_version": POINTER_SCHEMA_VERSION, "name": name, "kind": cp.kind,
                   "weights_hash": cp.weights_hash, "sha256": cp.sha256, "file": cp.path.name,
                   "promoted_at": utc_now(),
                   "previous": {"name": current["name"], "weights_hash": current["weights_hash"]} if current else None,
                   "benchmark": {"report": report["report_path"], "sequence": report["sequence"],
                                 "incumbent": report["incumbent"]["spec"], "score": report["match"]["score"],
                                 "elo": report["match"]["elo"], "elo_ci95": report["match"]["elo_ci95"],
                                 "llr": sprt["llr"], "decision": sprt["decision"],
                                 "pairs": report["match"]["pairs"],
                                 "sprt": {k: sprt[k] for k in ("elo0", "elo1", "alpha", "beta")}},
                   "policy": policy.as_dict()}
        commit(root, "promote", pointer, current, promote_line(pointer))
    return {"promoted": pointer, "previous": current, "pointer_path": str((root / POINTER).absolute()),
            "history_path": str((root / HISTORY).absolute()), "repaired": state["repaired"]}


def rollback_promotion(*, checkpoints_dir: str | os.PathLike[str] = "checkpoints") -> dict[str, Any]:
    """Re-install the pointer that was promoted before the current one; returns
    ``{"promoted": restored pointer, "rolled_back": the pointer it replaced, "repaired"}``."""
    root = Path(checkpoints_dir)
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / POINTER):
        state = reconcile(root, write=True)
        if not state["consistent"]:
            raise _inconsistent("rollback", state)
        current, stack = state["pointer"], state["stack"]
        if current is None:
            raise _refuse("rollback", [{"check": "promoted", "message": "nothing is promoted, so there is nothing "
                                                                        "to roll back"}])
        if len(stack) < 2:
            raise _refuse("rollback", [{"check": "previous_promotion", "message": f"{current['name']!r} is the "
                                        f"first promotion in {HISTORY}; there is no earlier one to roll back to"}])
        target = stack[-2]
        problems = registered_problems(CheckpointRegistry(root), target["name"], target["weights_hash"])
        if problems:
            raise _refuse("rollback", [{"check": "previous_usable", "message": p} for p in problems],
                          target=target["name"])
        restored = {**target, "restored_at": utc_now(), "restored_by": "rollback",
                    "rolled_back": {"name": current["name"], "weights_hash": current["weights_hash"]}}
        commit(root, "rollback", restored, current, rollback_line(restored))
    return {"promoted": restored, "rolled_back": current, "pointer_path": str((root / POINTER).absolute()),
            "repaired": state["repaired"]}

