"""Which of a pool's judgments a preference dataset (and the leaderboard) keeps, and why the
others were left out (the logs keep everything; this only chooses), and ``judge_quality``, the
pool's judge-quality report (quality.py says what it holds).

In order: skips are not judgments; gold tasks are dropped (they measure judges: gold.py);
flagged judges' judgments are left out while the policy's ``drop_flagged`` holds (quality.py
says who and why); then no judge keeps more than ``max_judge_share`` of what is left (one over
the number of judges left when that is more, so a cap never empties a dataset): a judge over
the cap keeps the judgments first in a keyed order of their task ids. Each kept task answered
by two kept judges or more gets a consensus: the answer of a strict majority of them, else none,
and the Dawid-Skene estimate (consensus.py) over the kept judgments, the kept judges' gold
answers anchoring it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Mapping

from .consensus import dawid_skene, majority
from .gold import read_gold
from .policy import PreferencePolicy
from .pool import DEFAULT_PREFERENCES_DIR, JUDGMENTS, _lines, pool_dir, read_pool
from .quality import assess


def pool_judgments(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    doc = read_pool(folder)
    tasks = {t["task_id"] for t in doc["tasks"]}
    return doc, [j for j in _lines(folder / JUDGMENTS) if j["task_id"] in tasks]


def judge_quality(pool: str, *, preferences_dir: str | os.PathLike[str] = DEFAULT_PREFERENCES_DIR,
                  policy: "PreferencePolicy | Mapping[str, Any] | None" = None) -> dict[str, Any]:
    """The pool's judge-quality report (module docstring)."""
    policy = PreferencePolicy.coerce(policy)
    folder = pool_dir(preferences_dir, pool)
    doc, judgments = pool_judgments(folder)
    return {"pool": doc["pool"], "tasks": len(doc["tasks"]), **assess(judgments, read_gold(folder), policy)}


def cap_counts(counts: dict[str, int], share: float) -> tuple[int | None, float]:
    """The most judgments any one judge keeps so that none holds more than ``share`` of the
    total (None: no judge is over it), and the share applied (at least one over the judges)."""
    if not counts:
        return None, share
    share = max(share, 1 / len(counts))
    ns = sorted(counts.values())

    def fits(c: int) -> bool:
        return c <= share * sum(min(n, c) for n in ns) + 1e-9

    if fits(ns[-1]):
        return None, share
    low, high = 1, ns[-1]  # c / S(c) never decreases with c: the largest c that fits, by bisection
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low, share


def _cap_order(task_id: str) -> bytes:
    return hashlib.sha256(f"cap\0{task_id}".encode()).digest()


def select_judgments(folder: Path, policy: PreferencePolicy) -> dict[str, Any]:
    """``{"doc", "kept", "consensus", "left_out", "quality"}`` for the pool in ``folder``:
    ``kept`` the judgment records kept, ``consensus`` ``task_id -> (majority or None, Dawid-Skene
    or None, judges)``."""
    doc, judgments = pool_judgments(folder)
    gold = read_gold(folder)
    quality = assess(judgments, gold, policy)
    reasons = {r["judge"]: r["reason"] for r in quality["judges"] if r["flagged"]}
    answered = [j for j in judgments if j["choice"] != "skip"]
    not_gold = [j for j in answered if j["task_id"] not in gold]
    dropped = reasons if policy.drop_flagged else {}
    unflagged = [j for j in not_gold if j["judge"] not in dropped]
    per_judge: dict[str, list[dict[str, Any]]] = {}
    for j in unflagged:
        per_judge.setdefault(j["judge"], []).append(j)
    cap, share = cap_counts({k: len(v) for k, v in per_judge.items()}, policy.max_judge_share)
    kept, capped = [], {}
    for judge, rows in per_judge.items():
        if cap is not None and len(rows) > cap:
            capped[judge] = len(rows) - cap
            rows = sorted(rows, key=lambda j: _cap_order(j["task_id"]))[:cap]
        kept += rows
    by_task: dict[str, list[str]] = {}
    for j in kept:
        by_task.setdefault(j["task_id"], []).append(j["choice"])
    kept_judges = set(per_judge)
    estimate = dawid_skene([(j["task_id"], j["judge"], j["choice"]) for j in kept]
                           + [(j["task_id"], j["judge"], j["choice"]) for j in answered
                              if j["task_id"] in gold and j["judge"] in kept_judges],
                           {t: g["better"] for t, g in gold.items()})["answers"]
    consensus = {task_id: (majority(answers), estimate[task_id][0] if len(answers) >= 2 else None, len(answers))
                 for task_id, answers in by_task.items()}
    flagged_out = [j for j in not_gold if j["judge"] in dropped]
    left_out = {
        "judgments_logged": len(judgments), "skipped": len(judgments) - len(answered),
        "gold": {"tasks": len(gold), "judgments": len(answered) - len(not_gold)},
        "flagged": {"judges": len(reasons), "judgments": len(flagged_out), "left_out": bool(dropped),
                    "reasons": dict(sorted(reasons.items()))},
        "capped": {"judges": len(capped), "judgments": sum(capped.values()), "max_judge_share": round(share, 4),
                   "cap": cap},
        "kept": {"judges": len(per_judge), "judgments": len(kept)},
    }
    return {"doc": doc, "kept": kept, "consensus": consensus, "left_out": left_out, "quality": quality}


def everyone_flagged(selection: dict[str, Any]) -> list[str]:
    """Blockers when every judge who answered a task for the dataset is flagged and left out."""
    out = selection["left_out"]
    if selection["kept"] or not out["flagged"]["judgments"]:
        return []
    return [f"every judge is flagged and left out ({out['flagged']['judges']} judges, "
            f"{out['flagged']['judgments']} judgments); keep them with --keep-flagged (drop_flagged false) or "
            f"judge more carefully"] + [f"{judge}: {reason}" for judge, reason in out["flagged"]["reasons"].items()]
