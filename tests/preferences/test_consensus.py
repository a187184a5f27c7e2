"""The Dawid-Skene consensus (consensus.py): hand-made panels where it beats the majority, and
degenerate inputs that must not crash. Pure numpy, no pool needed; the figures on real pools
come from benchmarks/preference_trust.py."""

from __future__ import annotations

import numpy as np
import pytest

from extrarlhf.core.errors import InvalidArgument
from extrarlhf.preferences.consensus import dawid_skene, majority


def _truth(n: int, seed: int) -> dict[str, str]:
    rng = np.random.default_rng(seed)
    return {f"t{i}": ("A", "B")[rng.integers(2)] for i in range(n)}


def _right(answers: dict[str, str | None], truth: dict[str, str]) -> int:
    return sum(answers[t] == c for t, c in truth.items())


def test_gold_anchors_let_one_reliable_judge_beat_two_who_always_answer_wrong():
    truth = _truth(300, 0)
    labels, known = [], {}
    for n, (task, better) in enumerate(truth.items()):
        worse = "B" if better == "A" else "A"
        labels += [(task, "reliable", better), (task, "adversary-1", worse), (task, "adversary-2", worse)]
        if n < 20:
            known[task] = better  # gold: proved by the engine
    by_task = {t: [a for u, _, a in labels if u == t] for t in truth}
    assert _right({t: majority(v) for t, v in by_task.items()}, truth) == 0  # outvoted every time
    ds = dawid_skene(labels, known)
    assert _right({t: a for t, (a, _) in ds["answers"].items()}, truth) == 300
    confusion = np.array(ds["confusion"]["adversary-1"])
    assert confusion[0, 1] > 0.9 and confusion[1, 0] > 0.9  # read as answering the other move


def test_reliable_judges_outweigh_random_ones_without_gold():
    """Panels of 3 drawn from 4 judges right 85% of the time, 2 at random (A, B, tie) and one
    that nearly always answers A: Dawid-Skene weighs the reliable ones and beats the majority."""
    for seed in range(3):
        rng = np.random.default_rng(seed)
        truth = _truth(300, seed)
        labels = []
        for task, better in truth.items():
            worse = "B" if better == "A" else "A"
            for judge in rng.choice(["r1", "r2", "r3", "r4", "x", "y", "z"], 3, replace=False):
                if judge.startswith("r"):
                    labels.append((task, judge, better if rng.random() < 0.85 else worse))
                elif judge == "z":
                    labels.append((task, judge, "A" if rng.random() < 0.9 else "B"))
                else:
                    labels.append((task, judge, ("A", "B", "tie")[rng.integers(3)]))
        by_task = {t: [a for u, _, a in labels if u == t] for t in truth}
        ds = dawid_skene(labels)
        assert _right({t: a for t, (a, _) in ds["answers"].items()}, truth) \
            > _right({t: majority(v) for t, v in by_task.items()}, truth) + 15
        assert dawid_skene(labels) == ds  # deterministic: no random start


def test_degenerate_inputs_do_not_crash():
    one = dawid_skene([("a", "j", "tie"), ("b", "j", "tie")])
    assert set(one["answers"]) == {"a", "b"} and np.isfinite(np.array(one["confusion"]["j"])).all()
    assert all(0 <= p <= 1 for _, p in one["answers"].values())
    empty = dawid_skene([])
    assert empty["answers"] == {} and empty["iterations"] == 0
    assert dawid_skene([("a", "j", "A")], {"a": "B"})["answers"]["a"] == ("B", 1.0)  # gold wins over a judge
    assert majority(["A"]) is None and majority(["A", "B"]) is None and majority(["A", "A", "B"]) == "A"
    with pytest.raises(InvalidArgument, match="answers are"):
        dawid_skene([("a", "j", "skip")])
    with pytest.raises(InvalidArgument, match="iterations"):
        dawid_skene([("a", "j", "A")], iterations=0)
