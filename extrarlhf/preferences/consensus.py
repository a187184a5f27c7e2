"""Consensus of several judges on one task: the strict majority, and a Dawid-Skene estimate.

Dawid and Skene (1979): every judge has a confusion matrix (the probability that it answers
``l`` when the better answer is ``k``, over A, B and tie), the tasks' true answers have class
priors, and EM alternates between the true answers' posteriors (E) and the matrices and priors
that fit them best (M). Here it starts from the majority vote (each task's share of votes per
answer: deterministic, no random start; with known answers, the first matrices come from the
known tasks alone), runs ``iterations`` rounds (fewer when nothing moves
by more than 1e-9), and adds ``smoothing`` pseudo-counts to every cell so a judge that never
gave some answer, or a pool with a single judge, still has finite logarithms. Tasks whose
answer is known (``known``: gold tasks, proved by the engine) keep it throughout: they anchor
the matrices, so judges who agree with each other against the gold are read as wrong rather
than trusted (without anchors, EM can only trust whoever agrees most).
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from ..core.errors import InvalidArgument

ANSWERS = ("A", "B", "tie")
ITERATIONS = 50
SMOOTHING = 1.0  # add-one: with 0.01, EM fits random judges through the tie class and falls below majority


def majority(answers: list[str]) -> str | None:
    """The answer of a strict majority of ``answers``, else None (and None for fewer than two)."""
    if len(answers) < 2:
        return None
    top = max(set(answers), key=lambda a: (answers.count(a), a))
    return top if answers.count(top) * 2 > len(answers) else None


def dawid_skene(labels: Iterable[tuple[str, str, str]], known: Mapping[str, str] | None = None, *,
                iterations: int = ITERATIONS, smoothing: float = SMOOTHING) -> dict[str, object]:
    """The Dawid-Skene estimate from ``labels`` ``(task, judge, answer)`` (answers A, B or tie).

    Returns ``{"answers": task -> (answer, posterior probability)}`` for every labelled task
    (the likeliest answer; the first of A, B, tie on an exact tie), ``"confusion": judge -> 3x3``
    (rows the true answer, columns the judge's, as lists), ``"priors"`` and ``"iterations"`` run."""
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise InvalidArgument(f"iterations must be a positive integer, got {iterations!r}")
    known = dict(known or {})
    rows = list(labels)
    if any(r[2] not in ANSWERS for r in rows) or any(v not in ANSWERS for v in known.values()):
        raise InvalidArgument(f"Dawid-Skene answers are {', '.join(ANSWERS)}")
    tasks = sorted({t for t, _, _ in rows})
    judges = sorted({j for _, j, _ in rows})
    if not rows:
        return {"answers": {}, "confusion": {}, "priors": [1 / len(ANSWERS)] * len(ANSWERS), "iterations": 0}
    t_index = {t: k for k, t in enumerate(tasks)}
    j_index = {j: k for k, j in enumerate(judges)}
    a_index = {a: k for k, a in enumerate(ANSWERS)}
    t = np.array([t_index[r[0]] for r in rows])
    j = np.array([j_index[r[1]] for r in rows])
    a = np.array([a_index[r[2]] for r in rows])
    k = len(ANSWERS)
    anchored = np.array([t_index[task] for task in tasks if task in known], dtype=int)
    anchor_class = np.array([a_index[known[task]] for task in tasks if task in known], dtype=int)

    def clamp(post: np.ndarray) -> np.ndarray:
        post[anchored] = 0.0
        post[anchored, anchor_class] = 1.0
        return post

    post = np.zeros((len(tasks), k))
    np.add.at(post, (t, a), 1.0)
    post = clamp(post / post.sum(axis=1, keepdims=True))
    weight = np.ones(len(tasks))
    if len(anchored):  # the first matrices from the known answers alone: a majority does not outvote them
        weight = np.zeros(len(tasks))
        weight[anchored] = 1.0
    for done in range(1, iterations + 1):
        priors = (post * weight[:, None]).sum(axis=0) + smoothing
        priors /= priors.sum()
        counts = np.full((len(judges), k, k), smoothing)
        np.add.at(counts, (j, slice(None), a), post[t] * weight[t, None])  # counts[judge, true, answered]
        weight = np.ones(len(tasks))
        confusion = counts / counts.sum(axis=2, keepdims=True)
        log_post = np.tile(np.log(priors), (len(tasks), 1))
        np.add.at(log_post, t, np.log(confusion[j, :, a]))
        log_post -= log_post.max(axis=1, keepdims=True)
        new = np.exp(log_post)
        new = clamp(new / new.sum(axis=1, keepdims=True))
        moved = float(np.abs(new - post).max())
        post = new
        if moved < 1e-9:
            break
    best = post.argmax(axis=1)
    return {"answers": {task: (ANSWERS[best[n]], round(float(post[n, best[n]]), 4)) for n, task in enumerate(tasks)},
            "confusion": {judge: np.round(confusion[n], 4).tolist() for n, judge in enumerate(judges)},
            "priors": np.round(priors, 4).tolist(), "iterations": done}
