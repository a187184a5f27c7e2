"""benchmark_models: the SPRT log-likelihood ratio pinned against an independent computation,
the Elo interval against a worked example, paired play, early stopping after each pair (H1
never before the promotion policy's min_pairs), independence from the number of workers,
degraded battles, stored reports with their promotion eligibility."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from extrarlhf.checkpoints.registry import CheckpointRegistry
from extrarlhf.core.errors import RLHFError
from extrarlhf.policies.benchmarking import (
    PAIR_SCORES,
    _mle_given_score,
    benchmark_models,
    elo_of_score,
    elo_side_of_zero,
    latest_benchmark,
    list_benchmarks,
    logistic,
    score_stats,
    sprt_bounds,
    sprt_llr,
)
from extrarlhf.policies.promotion import PromotionPolicy
from tests import onnx_factory
from tests.training_helpers import train_small

TRINOMIAL = (0.0, 0.5, 1.0)  # L/D/W battle scores


# ---------------------------------------------------------------------------- statistics
def _independent_llr(w: int, d: int, l: int, elo0: float, elo1: float) -> float:
    """The trinomial GSPRT by another route: with p_win = t the constraint p_win + p_draw/2 = s
    leaves one free parameter (p_draw = 2(s - t), p_loss = 1 - 2s + t); the maximum of
    W log t + D log(2(s-t)) + L log(1-2s+t) solves W(s-t)(1-2s+t) - D t(1-2s+t) + L t(s-t) = 0,
    a quadratic in t whose root inside (max(0, 2s-1), s) is taken. Empty cells count 1e-3
    (fishtest's regularization)."""
    W, D, L = (float(x) if x > 0 else 1e-3 for x in (w, d, l))

    def loglik(s: float) -> float:
        a = 1.0 - 2.0 * s
        # W(s - t)(a + t) - D t (a + t) + L t (s - t), expanded in powers of t
        c2 = -W - D - L
        c1 = W * (s - a) - D * a + L * s
        c0 = W * s * a
        roots = [r.real for r in np.roots([c2, c1, c0]) if abs(r.imag) < 1e-12]
        lo, hi = max(0.0, 2.0 * s - 1.0), s
        (t,) = [r for r in roots if lo < r < hi]
        return W * math.log(t) + D * math.log(2.0 * (s - t)) + L * math.log(1.0 - 2.0 * s + t)

    s0, s1 = (1.0 / (1.0 + 10.0 ** (-e / 400.0)) for e in (elo0, elo1))
    return loglik(s1) - loglik(s0)


@pytest.mark.parametrize("w,d,l,elo0,elo1", [
    (120, 80, 100, 0.0, 10.0),
    (55, 0, 5, 0.0, 10.0),      # no draws: a regularized empty cell
    (0, 10, 30, 0.0, 10.0),     # no wins
    (500, 1000, 480, -5.0, 5.0),
    (10, 3, 12, 0.0, 5.0),
    (300, 0, 300, 0.0, 10.0),
])
def test_sprt_llr_is_pinned_for_fixed_counts(w: int, d: int, l: int, elo0: float, elo1: float) -> None:
    # on L/D/W cells the general GSPRT has a closed form to check it against
    assert sprt_llr([l, d, w], elo0, elo1, TRINOMIAL) == pytest.approx(_independent_llr(w, d, l, elo0, elo1), abs=1e-8)


@pytest.mark.parametrize("penta", [[5, 1, 566, 0, 428], [40, 90, 300, 80, 30], [0, 0, 7, 0, 3], [12, 0, 0, 0, 0]])
def test_the_pentanomial_mle_is_the_constrained_maximum(penta: list[int]) -> None:
    """Under each hypothesis the fitted pair-score distribution sums to 1, has the hypothesis's
    mean and is the best of many others with that mean (perturbed along mean-preserving
    directions), so the LLR is the generalized ratio it claims to be."""
    regular = np.array([c if c > 0 else 1e-3 for c in penta], float)
    probs = regular / regular.sum()
    values = np.array(PAIR_SCORES)
    rng = np.random.default_rng(0)
    for s in (logistic(0.0), logistic(10.0), logistic(150.0)):
        fitted = np.array(_mle_given_score(list(probs), PAIR_SCORES, s))
        assert fitted.sum() == pytest.approx(1.0, abs=1e-9) and fitted @ values == pytest.approx(s, abs=1e-9)
        best = regular @ np.log(fitted)
        for _ in range(200):
            direction = rng.normal(size=5)
            # project onto {sum = 0, mean change = 0}
            basis = np.stack([np.ones(5), values])
            direction -= basis.T @ np.linalg.lstsq(basis.T, direction, rcond=None)[0]
            other = fitted + 1e-3 * direction / np.abs(direction).max()
            if (other > 0).all():
                assert regular @ np.log(other) <= best + 1e-12
    llr = sprt_llr(penta, 0.0, 10.0)
    p0 = np.array(_mle_given_score(list(probs), PAIR_SCORES, logistic(0.0)))
    p1 = np.array(_mle_given_score(list(probs), PAIR_SCORES, logistic(10.0)))
    assert llr == pytest.approx(regular @ (np.log(p1) - np.log(p0)), abs=1e-9)


def test_the_pentanomial_sprt_weighs_the_pair_variance() -> None:
    """Near the hypotheses the pentanomial GSPRT is fishtest's normal approximation over pairs,
    P (s1 - s0)(2s - s0 - s1) / (2 var), with ``var`` the pair-score variance: the same score
    from pairs that mostly split (the deal decided, little variance) is stronger evidence than
    from pairs won or lost whole."""
    for penta in ([200, 0, 1200, 0, 220], [300, 200, 800, 210, 310], [30, 40, 500, 60, 40]):
        pairs = sum(penta)
        s = sum(c * v for c, v in zip(penta, PAIR_SCORES)) / pairs
        var = sum(c * (v - s) ** 2 for c, v in zip(penta, PAIR_SCORES)) / pairs
        s0, s1 = logistic(0.0), logistic(5.0)
        approx = pairs * (s1 - s0) * (2 * s - s0 - s1) / (2 * var)
        assert sprt_llr(penta, 0.0, 5.0) == pytest.approx(approx, rel=0.05), penta
    # score 0.55 both: 100 splits + 55 WW + 45 LL, or 180 splits + 15 WW + 5 LL
    assert sprt_llr([5, 0, 180, 0, 15], 0.0, 5.0) > sprt_llr([45, 0, 100, 0, 55], 0.0, 5.0) > 0


def test_sprt_llr_near_the_hypotheses_matches_the_normal_approximation() -> None:
    # close to s0/s1 the GSPRT is ~ N (s1-s0)(2s-s0-s1) / (2 var) (fishtest's LLR_alt2)
    w, d, l = 2040, 3980, 1980
    n = w + d + l
    s = (w + d / 2) / n
    var = (w * (1 - s) ** 2 + d * (0.5 - s) ** 2 + l * s ** 2) / n
    s0, s1 = logistic(0.0), logistic(5.0)
    approx = n * (s1 - s0) * (2 * s - s0 - s1) / (2 * var)
    assert sprt_llr([l, d, w], 0.0, 5.0, TRINOMIAL) == pytest.approx(approx, rel=0.02)
    assert sprt_llr([0, 0, 0, 0, 0], 0.0, 10.0) == 0.0
    # more winning pairs -> a higher ratio
    assert sprt_llr([5, 5, 30, 10, 10], 0, 10) > sprt_llr([8, 5, 34, 5, 8], 0, 10) > sprt_llr([10, 10, 30, 5, 5], 0, 10)
    with pytest.raises(ValueError, match="3 counts for 5 cells"):
        sprt_llr([1, 2, 3], 0.0, 10.0)


def test_sprt_bounds_and_logistic_elo() -> None:
    lower, upper = sprt_bounds(0.05, 0.05)
    assert lower == pytest.approx(-2.944438979, abs=1e-9) and upper == pytest.approx(2.944438979, abs=1e-9)
    lower, upper = sprt_bounds(0.05, 0.1)
    assert lower == pytest.approx(math.log(0.1 / 0.95)) and upper == pytest.approx(math.log(0.9 / 0.05))
    assert logistic(0.0) == 0.5 and elo_of_score(0.5) == 0.0
    assert elo_of_score(logistic(123.0)) == pytest.approx(123.0)
    assert elo_of_score(1.0) == pytest.approx(1199.8, abs=0.1)  # clamped at 0.999, as fishtest does


def test_elo_interval_worked_example() -> None:
    """W/D/L 60/20/20: score 0.7; per-battle variance (60*0.3^2 + 20*0.2^2 + 20*0.7^2)/100 = 0.16;
    standard error sqrt(0.16/100) = 0.04; score interval 0.7 +- 1.96*0.04 = [0.6216, 0.7784];
    Elo = -400 log10(1/s - 1): 147.19 at 0.7, 86.23 at 0.6216, 218.25 at 0.7784."""
    stats = score_stats(60, 20, 20)
    assert stats["score"] == pytest.approx(0.7)
    assert stats["variance_per_battle"] == pytest.approx(0.16)
    assert stats["stderr"] == pytest.approx(0.04)
    assert stats["score_ci95"] == pytest.approx([0.6216, 0.7784], abs=1e-4)
    assert stats["elo"] == pytest.approx(147.19, abs=0.01)
    assert stats["elo_ci95"] == pytest.approx([86.23, 218.25], abs=0.01)
    assert score_stats(0, 0, 0)["score"] is None
    assert stats["interval"].startswith("trinomial")


def test_the_pair_interval_worked_example() -> None:
    """The 6-network ensemble against greedy over 1,000 pairs: 5 LL, 1 LD, 566 LW/WL, 428 WW
    (W/D/L 1,422/1/577). Score 0.71125; pair variance (5*0.71125^2 + 0.46125^2 + 566*0.21125^2
    + 428*0.28875^2)/1000 = 0.0636859; standard error sqrt(0.0636859/1000) = 0.0079803; interval
    0.71125 +- 0.015641. The per-battle interval would be 0.71125 +- 0.019855, 1.27x as wide:
    the battles of a pair are not independent (the deal that favours a seat splits the pair)."""
    stats = score_stats(1422, 1, 577, [5, 1, 566, 0, 428])
    assert stats["score"] == pytest.approx(0.71125)
    assert stats["variance_per_pair"] == pytest.approx(0.0636859, abs=1e-7)
    assert stats["stderr"] == pytest.approx(0.0079803, abs=1e-7)
    assert stats["score_ci95"] == pytest.approx([0.71125 - 0.015641, 0.71125 + 0.015641], abs=1e-6)
    assert stats["score_ci95_trinomial"] == pytest.approx([0.71125 - 0.019855, 0.71125 + 0.019855], abs=1e-6)
    assert stats["interval"].startswith("pentanomial")
    with pytest.raises(ValueError, match="3 pentanomial pairs do not hold the 8 battles"):
        score_stats(5, 1, 2, [1, 0, 1, 0, 1])


# ---------------------------------------------------------------------------- playing
@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ck = tmp_path_factory.mktemp("bench") / "ck"
    train_small(ck, "cand", seed=0)
    train_small(ck, "other", seed=1)
    return ck


def _wdl(pairs: list[str]) -> tuple[int, int, int]:
    """W/D/L of the candidate over pair results such as ["WL", "WW", "DL"]."""
    text = "".join(pairs)
    return text.count("W"), text.count("D"), text.count("L")


def _penta(pairs: list[str]) -> list[int]:
    """The pentanomial of pair results such as ["WL", "WW", "DL"] (cell = the pair's points, W 2, D 1)."""
    cells = [0] * 5
    for pair in pairs:
        cells[2 * pair.count("W") + pair.count("D")] += 1
    return cells


def test_benchmark_against_random_passes_early_and_stores_its_report(trained: Path) -> None:
    report = benchmark_models("cand", "baseline:random", n_pairs=150, baseline_pairs=3, seed=1,
                              checkpoints_dir=trained)
    m, sprt = report["match"], report["match"]["sprt"]
    assert report["valid"] and report["passed"] and sprt["decision"] == "H1" and sprt["stopped_early"]
    assert m["pairs"] == sprt["pairs_at_decision"] < 150
    assert m["wins"] + m["draws"] + m["losses"] == 2 * m["pairs"] == report["battles_counted"]
    assert sum(m["pentanomial"]) == m["pairs"] == len(m["pair_results"])
    assert _wdl(m["pair_results"]) == (m["wins"], m["draws"], m["losses"])
    assert sprt["llr"] == pytest.approx(sprt_llr(m["pentanomial"], 0.0, 10.0))
    # the SPRT was checked after every pair: the stop is the first pair whose LLR fell to the lower
    # bound, or reached the upper one with at least min_pairs (50) pairs played
    assert sprt["min_pairs_before_h1_stop"] == 50
    wdl_path = [sprt_llr(_penta(m["pair_results"][:k]), 0.0, 10.0) for k in range(1, m["pairs"] + 1)]
    assert wdl_path[-1] >= sprt["upper"] and m["pairs"] >= 50
    assert all(sprt["lower"] < x and (x < sprt["upper"] or k < 50) for k, x in enumerate(wdl_path[:-1], 1))
    assert report["promotion_eligible"] and report["promotion_blockers"] == []
    assert report["promotion_policy"] == PromotionPolicy().as_dict()
    assert m["elo_ci95"][0] < m["elo"] < m["elo_ci95"][1] or m["score"] == 1.0
    # each model against each baseline (the baseline incumbent never plays itself)
    pairs = {(b["model"], b["opponent"]) for b in report["baselines"]}
    assert pairs == {("cand", "baseline:random"), ("cand", "baseline:greedy"), ("baseline:random", "baseline:greedy")}
    assert all(b["wins"] + b["draws"] + b["losses"] == 6 for b in report["baselines"])
    # weights that played = weights registered
    registered = CheckpointRegistry(trained).get("cand").weights_hash
    assert report["candidate"]["played_weights_hashes"] == [registered] and report["candidate"]["weights_hash_matches"]
    # stored atomically as JSON + markdown, sequence 1, then 2
    path = Path(report["report_path"])
    assert path == trained.absolute() / "benchmarks" / "cand-vs-baseline_random-1.json"
    stored = json.loads(path.read_text())
    assert stored["match"]["wins"] == m["wins"] and stored["sequence"] == 1
    md = Path(report["markdown_path"]).read_text()
    assert "| cand vs baseline:random |" in md and "PASSED" in md and "| cand | baseline:greedy |" in md
    assert "**eligible**" in md
    assert f"won whole): {m['pentanomial']}. The 95% CI is over pairs." in md
    assert m["interval"].startswith("pentanomial") and sum(m["score_ci95_trinomial"]) == pytest.approx(2 * m["score"])
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    again = benchmark_models("cand", "baseline:random", n_pairs=2, baseline_pairs=0, seed=1, checkpoints_dir=trained)
    assert again["sequence"] == 2 and not again["passed"] and again["match"]["sprt"]["decision"] == "inconclusive"
    assert [b["check"] for b in again["promotion_blockers"]] == ["benchmark_passed", "promotion_policy"]
    assert latest_benchmark("cand", trained)["sequence"] == 2
    assert [r["sequence"] for r in list_benchmarks(trained, "cand")] == [1, 2]
    # same seed, same first pairs: the short run is a prefix of the long one
    assert again["match"]["pair_results"] == m["pair_results"][:2]


def test_results_do_not_depend_on_workers_and_h0_is_accepted(trained: Path) -> None:
    kwargs = dict(n_pairs=40, baseline_pairs=0, seed=5, elo0=0.0, elo1=200.0, write=False, checkpoints_dir=trained)
    one = benchmark_models("cand", "other", max_workers=1, **kwargs)
    two = benchmark_models("cand", "other", max_workers=2, **kwargs)
    for key in ("wins", "draws", "losses", "pair_results", "pentanomial"):
        assert one["match"][key] == two["match"][key], key
    assert one["match"]["sprt"]["llr"] == two["match"]["sprt"]["llr"]
    assert one["match"]["sprt"]["decision"] == two["match"]["sprt"]["decision"]
    # two similar small models: a +200 Elo hypothesis is rejected quickly
    assert one["match"]["sprt"]["decision"] == "H0" and one["match"]["pairs"] < 40 and not one["passed"]
    assert one["valid"] and "FAILED" in one["verdict"]
    assert not (trained / "benchmarks" / "cand-vs-other-1.json").exists()  # write=False
    # without early stopping every pair is played and counted
    full = benchmark_models("cand", "other", n_pairs=12, baseline_pairs=0, seed=5, elo0=0.0, elo1=200.0,
                            stop_early=False, write=False, checkpoints_dir=trained)
    assert full["match"]["pairs"] == 12 and full["battles_played"] == 24 and not full["match"]["sprt"]["stopped_early"]


def test_h1_never_stops_before_min_pairs_and_h0_stops_at_once(trained: Path) -> None:
    """A +200 Elo hypothesis against random is accepted after a few pairs; the match still goes on
    to the policy's min_pairs, so that the decided benchmark counts for promotion."""
    kwargs = dict(n_pairs=100, elo1=200.0, baseline_pairs=0, seed=1, write=False, checkpoints_dir=trained)
    full = benchmark_models("cand", "baseline:random", **kwargs)
    m, sprt = full["match"], full["match"]["sprt"]
    path = [sprt_llr(_penta(m["pair_results"][:k]), 0.0, 200.0) for k in range(1, m["pairs"] + 1)]
    first_crossing = next(k for k, x in enumerate(path, 1) if x >= sprt["upper"])
    assert first_crossing < 50  # the SPRT alone would have stopped here
    assert m["pairs"] == sprt["pairs_at_decision"] == 50 and sprt["decision"] == "H1" and sprt["stopped_early"]
    assert full["passed"] and full["promotion_eligible"]
    # a core caller's policy moves the minimum; the pairs are the same games (a prefix)
    quick = benchmark_models("cand", "baseline:random", policy=PromotionPolicy(min_pairs=5), **kwargs)
    assert quick["match"]["pairs"] == max(first_crossing, 5) < 50
    assert quick["match"]["pair_results"] == m["pair_results"][:quick["match"]["pairs"]]
    assert quick["passed"] and quick["promotion_policy"]["min_pairs"] == 5
    assert quick["match"]["sprt"]["min_pairs_before_h1_stop"] == 5
    # judged by the default policy, the quick report would not count
    from extrarlhf.policies.promotion import benchmark_blockers

    assert [b["check"] for b in benchmark_blockers(quick)] == ["promotion_policy"]
    # an H0 stop is never delayed (a +600 hypothesis between two similar models)
    h0 = benchmark_models("cand", "other", n_pairs=100, elo1=600.0, baseline_pairs=0, seed=5, write=False,
                          checkpoints_dir=trained)
    assert h0["match"]["sprt"]["decision"] == "H0" and h0["match"]["pairs"] < 50 and not h0["passed"]
    assert h0["verdict"].startswith("FAILED")


# ---------------------------------------------------------------------------- verdicts at the pair cap
@pytest.mark.parametrize("candidate, incumbent, word, side", [
    ("baseline:random", "baseline:greedy", "WORSE", "below"),
    ("baseline:greedy", "baseline:random", "BETTER", "above"),
])
def test_at_the_pair_cap_an_interval_that_excludes_zero_says_worse_or_better(
        tmp_path: Path, candidate: str, incumbent: str, word: str, side: str) -> None:
    """Hypotheses 5 Elo apart with alpha = beta = 1e-6: the SPRT stays undecided for all 60 pairs
    (its logic is unchanged), while the Elo interval of a one-sided match excludes zero."""
    report = benchmark_models(candidate, incumbent, n_pairs=60, baseline_pairs=0, alpha=1e-6, beta=1e-6,
                              elo0=0.0, elo1=5.0, checkpoints_dir=tmp_path)
    m, sprt = report["match"], report["match"]["sprt"]
    assert sprt["decision"] == "inconclusive" and m["pairs"] == 60 and not sprt["stopped_early"]
    assert sprt["lower"] < sprt["llr"] < sprt["upper"]
    lo, hi = m["elo_ci95"]
    assert (hi < 0) if side == "below" else (lo > 0)
    assert elo_side_of_zero(m, 50) == side
    assert report["verdict"].startswith(f"{word}: the SPRT stayed undecided") and "INCONCLUSIVE" not in report["verdict"]
    assert f"wholly {side} zero" in report["verdict"] and "95% CI" in report["verdict"]
    assert not report["passed"] and report["valid"] and not report["promotion_eligible"]
    assert [b["check"] for b in report["promotion_blockers"]] == ["benchmark_passed"]
    assert f"**{report['verdict']}**" in Path(report["markdown_path"]).read_text()


def test_at_the_pair_cap_fewer_than_min_pairs_stays_inconclusive(tmp_path: Path) -> None:
    """Two pairs lost 4-0: the normal interval is a point at -1200, which says nothing."""
    report = benchmark_models("baseline:random", "baseline:greedy", n_pairs=2, baseline_pairs=0, write=False,
                              checkpoints_dir=tmp_path)
    m = report["match"]
    assert m["losses"] == 4 and m["elo_ci95"][1] < 0 and elo_side_of_zero(m, 50) is None
    assert report["verdict"].startswith("INCONCLUSIVE:") and "fewer than 50 pairs" in report["verdict"]


@pytest.mark.parametrize("wins, draws, losses, side", [
    (150, 10, 230, "below"),   # the case: Elo -72, 95% CI about [-108, -38]
    (230, 10, 150, "above"),
    (190, 10, 190, None),      # an even match: the interval includes zero
    (180, 10, 200, None),      # slightly behind, but not significantly
])
def test_elo_side_of_zero_follows_the_interval(wins: int, draws: int, losses: int, side: str | None) -> None:
    match = {"pairs": (wins + draws + losses) // 2, **score_stats(wins, draws, losses)}
    assert elo_side_of_zero(match, 50) == side
    lo, hi = match["elo_ci95"]
    assert (side == "below") == (hi < 0) and (side == "above") == (lo > 0)
    assert elo_side_of_zero({**match, "pairs": 49}, 50) is None


def test_a_degraded_battle_invalidates_the_benchmark(trained: Path, tmp_path: Path) -> None:
    registry = CheckpointRegistry(trained)
    registry.register("nan", onnx_factory.save(onnx_factory.v5_nan(), tmp_path / "nan.onnx"), "v5")
    report = benchmark_models("nan", "baseline:random", n_pairs=20, baseline_pairs=2, checkpoints_dir=trained)
    assert not report["valid"] and not report["passed"] and report["degraded_battles"] > 0
    assert "degraded" in report["invalid_reasons"][0] and "non_finite_output" in report["invalid_reasons"][0]
    assert report["verdict"].startswith("INVALID") and Path(report["report_path"]).exists()
    assert report["baselines"] == [] and "invalidated" in report["baselines_skipped"]
    # a model file changed on disk after registration: hash mismatch -> degraded, other played hash
    cp = registry.get("other")
    cp.path.write_bytes(onnx_factory.mlp_v5(width=8, seed=3).SerializeToString())
    try:
        report = benchmark_models("cand", "other", n_pairs=3, baseline_pairs=0, checkpoints_dir=trained,
                                  write=False)
        assert not report["valid"] and report["degraded_battles"] == 6
        assert any("hash_mismatch" in r for r in report["invalid_reasons"])
        assert report["incumbent"]["played_weights_hashes"] != [cp.weights_hash]
        assert not report["incumbent"]["weights_hash_matches"]
    finally:
        registry.register("other", _restore(trained, tmp_path), "v5", overwrite=True)


def _restore(ck: Path, tmp_path: Path) -> Path:
    """A fresh small model to put back under the name 'other' (module fixture hygiene)."""
    src = tmp_path / "restore"
    train_small(src, "other", seed=1)
    return CheckpointRegistry(src).get("other").path


def test_arguments_are_checked(trained: Path) -> None:
    cases = [({"elo0": 10.0, "elo1": 0.0}, "invalid_argument"), ({"alpha": 0.0}, "invalid_argument"),
             ({"beta": 0.7}, "invalid_argument"), ({"n_pairs": 0}, "invalid_argument"),
             ({"max_workers": 0}, "invalid_argument"), ({"seed": -1}, "invalid_argument")]
    for kwargs, code in cases:
        with pytest.raises(RLHFError) as info:
            benchmark_models("cand", "baseline:random", checkpoints_dir=trained, **kwargs)
        assert info.value.code == code, kwargs
    with pytest.raises(RLHFError) as info:  # the policy is a PromotionPolicy object, never a client's mapping
        benchmark_models("cand", "baseline:random", checkpoints_dir=trained, policy={"min_pairs": 1})
    assert info.value.code == "invalid_argument" and "PromotionPolicy" in str(info.value)
    with pytest.raises(RLHFError) as info:
        benchmark_models("cand", "cand", checkpoints_dir=trained)
    assert info.value.code == "invalid_argument"
    with pytest.raises(RLHFError) as info:
        benchmark_models("cand", "nobody", checkpoints_dir=trained)
    assert info.value.code == "unknown_spec" and "baseline:greedy" in str(info.value)
