"""How far each judge of a pool can be trusted: gold accuracy, agreement, think times, flags.

Per judge (a pseudonym; never a name): its kind, judgments (A, B or tie), skips, gold tasks
answered and right (a tie on a gold task is wrong: the engine proved one move better) with the
Wilson 95% interval (``gold_accuracy``, ``gold_ci95``), its agreement with the other judges on
the tasks they answered in common (gold and overlap tasks; A, B and tie are three answers,
skips none), how many of the judges it shares at least ``min_shared`` tasks with it agrees
with, the median think time, and ``flagged`` with a ``reason``:

- ``gold``: it answered at least ``min_gold_answered`` gold tasks and the upper bound of its
  gold interval lies below ``min_gold_accuracy`` (policy.py states the defaults);
- ``agreement``: at least one judge the gold vouches for (``min_gold_answered`` gold answers,
  not flagged; while no judge has that many, any judge the gold does not flag) shares
  ``min_shared`` tasks with it, and it agrees (the same answer on at least ``min_agreement`` of
  the shared tasks) with none of them.

Per pool: Krippendorff's alpha (nominal: A, B, tie) over the tasks answered by two judges or
more, over all judges and over the judges kept (not flagged).

Pure: :func:`assess` takes a pool's judgment records and gold answers (selection.py reads
them, and ``judge_quality`` is there); pool.py asks it which judges are flagged now.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .policy import PreferencePolicy, wilson

ANSWERS = ("A", "B", "tie")


def krippendorff_alpha(units: list[list[str]]) -> float | None:
    """Nominal Krippendorff's alpha of ``units`` (each the answers given to one task; units
    with fewer than two answers are not pairable and count for nothing); None when nothing
    is pairable or every answer is the same (no disagreement is expected, alpha undefined)."""
    index = {a: i for i, a in enumerate(ANSWERS)}
    counts = np.zeros((len(units), len(ANSWERS)))
    for u, answers in enumerate(units):
        for a in answers:
            counts[u, index[a]] += 1
    m = counts.sum(axis=1)
    counts, m = counts[m >= 2], m[m >= 2]
    if not len(m):
        return None
    weights = counts / (m - 1)[:, None]
    coincidence = weights.T @ counts - np.diag(weights.sum(axis=0))
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    observed = coincidence.sum() - np.trace(coincidence)
    expected = (n_c.sum() ** 2 - (n_c ** 2).sum()) / (n - 1)
    if expected <= 0:
        return None
    return float(1 - observed / expected)


def assess(judgments: list[dict[str, Any]], gold: Mapping[str, Mapping[str, Any]],
           policy: PreferencePolicy) -> dict[str, Any]:
    """The quality report of ``judgments`` (a pool's log records) given its gold answers."""
    by_judge: dict[str, dict[str, Any]] = {}
    by_task: dict[str, list[tuple[str, str]]] = {}
    for j in judgments:
        row = by_judge.setdefault(j["judge"], {"judge": j["judge"], "kind": j["judge_kind"], "judgments": 0,
                                               "skips": 0, "gold_answered": 0, "gold_right": 0, "think": []})
        if j.get("think_ms") is not None:
            row["think"].append(j["think_ms"])
        if j["choice"] == "skip":
            row["skips"] += 1
            continue
        row["judgments"] += 1
        answer = gold.get(j["task_id"])
        if answer is not None:
            row["gold_answered"] += 1
            row["gold_right"] += j["choice"] == answer["better"]
        by_task.setdefault(j["task_id"], []).append((j["judge"], j["choice"]))
    partners = _partners(sorted(by_judge), by_task)
    vouched = {judge for judge, row in by_judge.items()
               if row["gold_answered"] >= policy.min_gold_answered and not _gold_flagged(row, policy)}
    if not vouched:  # no gold measured yet: every judge the gold does not flag is a partner
        vouched = {judge for judge, row in by_judge.items() if not _gold_flagged(row, policy)}
    rows = [_judge_row(row, partners.get(judge, []), policy, vouched) for judge, row in sorted(by_judge.items())]
    flagged = {r["judge"] for r in rows if r["flagged"]}
    units = [[c for _, c in answers] for answers in by_task.values()]
    kept_units = [[c for judge, c in answers if judge not in flagged] for answers in by_task.values()]
    alpha_all, alpha_kept = krippendorff_alpha(units), krippendorff_alpha(kept_units)
    return {"judges": rows, "flagged": len(flagged), "kept": len(rows) - len(flagged),
            "judgments": sum(r["judgments"] for r in rows), "gold_tasks": len(gold),
            "shared_tasks": sum(len(a) >= 2 for a in by_task.values()),
            "krippendorff_alpha": {"all": _round(alpha_all), "kept": _round(alpha_kept)},
            "rule": {"gold": f"flagged when at least {policy.min_gold_answered} gold tasks are answered and the "
                             f"upper bound of the Wilson 95% interval of gold accuracy is below "
                             f"{policy.min_gold_accuracy}",
                     "agreement": f"flagged when it shares at least {policy.min_shared} tasks with some judge the "
                                  f"gold vouches for and gives the same answer as none of them on "
                                  f"{policy.min_agreement:.0%} of those tasks"},
            "policy": policy.selection()}


def _partners(judges: list[str], by_task: dict[str, list[tuple[str, str]]]) -> dict[str, list[tuple[str, int, int]]]:
    """judge -> ``(other, tasks answered by both, same answer)`` for every other judge it shares a
    task with: one-hot (judge x shared task) matrices per answer, multiplied (fast for 100,000s)."""
    shared_tasks = [answers for answers in by_task.values() if len(answers) >= 2]
    if not shared_tasks:
        return {}
    index = {j: k for k, j in enumerate(judges)}
    onehot = np.zeros((len(ANSWERS), len(judges), len(shared_tasks)), dtype=np.float32)
    for t, answers in enumerate(shared_tasks):
        for judge, choice in answers:
            onehot[ANSWERS.index(choice), index[judge], t] = 1
    present = onehot.sum(axis=0)
    both = present @ present.T
    same = sum(onehot[a] @ onehot[a].T for a in range(len(ANSWERS)))
    np.fill_diagonal(both, 0)
    out: dict[str, list[tuple[str, int, int]]] = {}
    for j, k in zip(*np.nonzero(both)):
        out.setdefault(judges[j], []).append((judges[k], int(both[j, k]), int(same[j, k])))
    return out


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _gold_flagged(row: dict[str, Any], policy: PreferencePolicy) -> bool:
    answered = row["gold_answered"]
    return answered >= policy.min_gold_answered and wilson(row["gold_right"], answered)[1] < policy.min_gold_accuracy


def _judge_row(row: dict[str, Any], partners: list[tuple[str, int, int]], policy: PreferencePolicy,
               vouched: set[str]) -> dict[str, Any]:
    """One judge's report; agreement is judged only against ``vouched`` judges (module
    docstring), so a careful judge whose only partner clicks at random is not flagged for it."""
    answered, right = row["gold_answered"], row["gold_right"]
    low, high = wilson(right, answered)
    n_shared = sum(n for _, n, _ in partners)
    measured = [(other, n, same) for other, n, same in partners
                if n >= policy.min_shared and other in vouched]
    agrees = [other for other, n, same in measured if same / n >= policy.min_agreement]
    reason = None
    if _gold_flagged(row, policy):
        reason = (f"gold: {right} of {answered} gold tasks right ({right / answered:.2f}, 95% interval "
                  f"[{low:.2f}, {high:.2f}]), the whole interval below min_gold_accuracy {policy.min_gold_accuracy}")
    elif measured and not agrees:
        best = max(same / n for _, n, same in measured)
        reason = (f"agreement: agrees with none of the {len(measured)} judges it shares {policy.min_shared}+ tasks "
                  f"with (best {best:.2f}, needs {policy.min_agreement})")
    think = row["think"]
    return {"judge": row["judge"], "kind": row["kind"], "judgments": row["judgments"], "skips": row["skips"],
            "gold_answered": answered, "gold_right": right,
            "gold_accuracy": round(right / answered, 4) if answered else None,
            "gold_ci95": [round(low, 4), round(high, 4)] if answered else None,
            "shared": n_shared, "agreement": round(sum(s for _, _, s in partners) / n_shared, 4) if n_shared else None,
            "partners_measured": len(measured), "agrees_with": len(agrees),
            "median_think_ms": int(np.median(think)) if think else None,
            "flagged": reason is not None, "reason": reason}
