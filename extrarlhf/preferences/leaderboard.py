"""A leaderboard of policies as the judges judge them: Bradley-Terry over the specs of a pool's
``A vs B`` sources, from the judgments a preference dataset would keep (selection.py: no gold,
no flagged judge unless the policy keeps them, no judge over the share cap).

Each kept A or B judgment on an ``A vs B`` task is a game the chosen move's spec wins (a tie
is half a win each; ``recorded`` is no spec and is left out). Strengths are fitted by the
minorization-maximization iteration of Hunter (2004), with a tenth of a tie added to every
pair that met so no strength runs off to zero or infinity, and reported as Elo-scale ratings
(400 log10 strength, centred on 1000). The 95% intervals are the 2.5th and 97.5th percentiles
of the ratings over bootstrap resamples of the judgments (a multinomial draw over the
(pair, outcome) counts, the same as resampling judgments, so 100,000 judgments cost no more
than a hundred). ``games`` battle pairs per spec pair (policies.benchmarking, both seats)
give the engine's own order of the same specs, fitted the same way, to compare with.
"""

from __future__ import annotations

import os
from itertools import combinations
from typing import Any, Mapping

import numpy as np

from ..core.errors import InvalidArgument
from .candidates import RECORDED
from .points import check_number
from .policy import PreferencePolicy
from .pool import DEFAULT_PREFERENCES_DIR, pool_dir
from .selection import select_judgments

PRIOR_TIES = 0.1
MAX_RESAMPLES = 10000
MAX_GAMES = 500
_ITERATIONS = 300


def fit_bradley_terry(wins: np.ndarray) -> np.ndarray:
    """Elo-scale ratings (centred on 1000) from ``wins[..., i, j]``: the score of i against j
    (a win 1, a tie 0.5); leading axes are independent fits (bootstrap resamples)."""
    n = wins.shape[-1]
    games = wins + np.swapaxes(wins, -1, -2)
    met = games > 0
    wins = wins + PRIOR_TIES / 2 * met
    games = games + PRIOR_TIES * met
    total = wins.sum(axis=-1)
    p = np.ones(wins.shape[:-1])
    for _ in range(_ITERATIONS):
        denominator = (games / (p[..., :, None] + p[..., None, :])).sum(axis=-1)
        p = np.where(denominator > 0, total / np.maximum(denominator, 1e-300), p)
        p = p / np.exp(np.log(np.maximum(p, 1e-300)).mean(axis=-1, keepdims=True))
    ratings = 400 * np.log10(np.maximum(p, 1e-300))
    return 1000 + ratings - ratings.mean(axis=-1, keepdims=True) if n else ratings


def _cells(games: list[tuple[str, str, float]], specs: list[str]) -> tuple[list[tuple[int, int, float]], np.ndarray]:
    """The distinct (i, j, score of i) games and how many of each: what a bootstrap resamples."""
    index = {s: k for k, s in enumerate(specs)}
    counts: dict[tuple[int, int, float], int] = {}
    for a, b, score in games:
        i, j = index[a], index[b]
        key = (i, j, score) if i < j else (j, i, 1 - score)
        counts[key] = counts.get(key, 0) + 1
    keys = sorted(counts)
    return keys, np.array([counts[k] for k in keys], dtype=float)


def _wins(keys: list[tuple[int, int, float]], counts: np.ndarray, n: int) -> np.ndarray:
    wins = np.zeros(counts.shape[:-1] + (n, n))
    for c, (i, j, score) in enumerate(keys):
        wins[..., i, j] += counts[..., c] * score
        wins[..., j, i] += counts[..., c] * (1 - score)
    return wins


def rate(games: list[tuple[str, str, float]], specs: list[str], resamples: int, seed: int) -> list[dict[str, Any]]:
    """Ratings, bootstrap 95% intervals and games per spec, best first."""
    keys, counts = _cells(games, specs)
    n = len(specs)
    point = fit_bradley_terry(_wins(keys, counts, n))
    rng = np.random.default_rng(seed)
    total = int(counts.sum())
    draws = rng.multinomial(total, counts / total, size=resamples).astype(float) if total else np.zeros((0, 0))
    boot = fit_bradley_terry(_wins(keys, draws, n)) if resamples and total else np.repeat(point[None], 1, 0)
    low, high = np.percentile(boot, [2.5, 97.5], axis=0)
    played = {s: 0 for s in specs}
    for a, b, _ in games:
        played[a] += 1
        played[b] += 1
    rows = [{"spec": s, "rating": round(float(point[k]), 1), "ci95": [round(float(low[k]), 1),
                                                                       round(float(high[k]), 1)],
             "judgments": played[s]} for k, s in enumerate(specs)]
    return sorted(rows, key=lambda r: -r["rating"])


def _judged_games(selection: dict[str, Any]) -> list[tuple[str, str, float]]:
    tasks = {t["task_id"]: t for t in selection["doc"]["tasks"]}
    games = []
    for j in selection["kept"]:
        t = tasks[j["task_id"]]
        a, b = t["candidates"]["A"]["origin"], t["candidates"]["B"]["origin"]
        if " vs " not in t["source"] or RECORDED in (a, b):
            continue
        games.append((a, b, {"A": 1.0, "B": 0.0, "tie": 0.5}[j["choice"]]))
    return games


def engine_games(specs: list[str], games: int, seed: int,
                 checkpoints_dir: str | os.PathLike[str]) -> list[tuple[str, str, float]]:
    """``games`` battle pairs (both seats) between every two specs, played to the end."""
    from ..policies.benchmarking import pair_jobs, play_battles, side_plan

    sides = {s: side_plan(s, os.fspath(checkpoints_dir)) for s in specs}
    out = []
    for a, b in combinations(specs, 2):
        for battle in play_battles(sides, pair_jobs(a, b, f"leaderboard:{a}:{b}", seed, range(games))):
            winner = battle["winner"]
            score = 0.5 if winner in (0, None) else (1.0 if (winner == 1) == (battle["p1"] == a) else 0.0)
            out.append((a, b, score))
    return out


def _kendall(first: list[str], second: list[str]) -> float | None:
    pairs = list(combinations(first, 2))
    if not pairs:
        return None
    where = {s: k for k, s in enumerate(second)}
    agree = sum(1 if where[x] < where[y] else -1 for x, y in pairs)
    return round(agree / len(pairs), 4)


def ranks_specs(source: str) -> bool:
    """Whether a pool source compares two specs (``A vs B``, neither ``recorded``)."""
    return " vs " in source and RECORDED not in source.split(" vs ")


def preference_leaderboard(pool: str, *, resamples: int = 1000, games: int = 0, seed: int = 0,
                           preferences_dir: str | os.PathLike[str] = DEFAULT_PREFERENCES_DIR,
                           checkpoints_dir: str | os.PathLike[str] = "checkpoints",
                           policy: "PreferencePolicy | Mapping[str, Any] | None" = None) -> dict[str, Any]:
    """The pool's leaderboard (module docstring); ``games`` > 0 adds the engine's order."""
    resamples = check_number(resamples, "resamples", 0, MAX_RESAMPLES, integer=True)
    games = check_number(games, "games (battle pairs per spec pair)", 0, MAX_GAMES, integer=True)
    policy = PreferencePolicy.coerce(policy)
    selection = select_judgments(pool_dir(preferences_dir, pool), policy)
    doc = selection["doc"]
    pairs = [s for s in doc["sources"] if ranks_specs(s)]
    if not pairs:
        raise InvalidArgument(f"pool {doc['pool']!r} has no 'A vs B' source between two specs (its sources: "
                              f"{', '.join(doc['sources'])}); a leaderboard ranks the specs such sources compare")
    specs = sorted({side for s in pairs for side in s.split(" vs ")})
    judged = _judged_games(selection)
    rows = rate(judged, specs, resamples, seed)
    for better, worse in zip(rows, rows[1:]):
        better["apart_from_next"] = better["ci95"][0] > worse["ci95"][1]
    out = {"pool": doc["pool"], "specs": specs, "judgments": len(judged), "resamples": resamples, "ratings": rows,
           "order": [r["spec"] for r in rows], "left_out": selection["left_out"], "engine": None}
    if games:
        played = engine_games(specs, games, seed, checkpoints_dir)
        engine_rows = rate(played, specs, resamples, seed)
        order = [r["spec"] for r in engine_rows]
        out["engine"] = {"games_per_pair": 2 * games, "ratings": engine_rows, "order": order,
                         "same_order": order == out["order"], "kendall_tau": _kendall(out["order"], order)}
    return out
