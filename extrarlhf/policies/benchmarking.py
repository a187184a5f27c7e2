"""``benchmark_models``: candidate vs incumbent on paired seeds, with Elo and an SPRT, as chess
engine testing does (fishtest's pentanomial SPRT).

Play. Pair ``i`` is one seed played twice with the seats swapped (same decks, same starting
seat), so luck mostly cancels. Battles run untraced, many side by side in lockstep: each
step evaluates the pending decisions of every live battle with ``adapters.decide_many``
(one ``session.run`` per model), like the series runner, optionally on worker processes.
Every result is folded pair by pair *in pair order*, so the outcome never depends on the
number of workers or on how battles were batched.

Statistics (counted from the candidate's side; W/D/L over battles, and the pentanomial: how
many pairs scored 0, 1/4, 1/2, 3/4 and 1, i.e. LL, LD+DL, LW+DD+WL, DW+WD, WW):

* score ``s = (W + D/2) / N``; logistic Elo ``-400 log10(1/s - 1)`` (scores clamped to
  [0.001, 0.999], i.e. +-1200 Elo, as fishtest does);
* 95% interval: ``s +- 1.959964 * sqrt(var / P)`` with ``var`` the variance of the *pair*
  score over the pentanomial and ``P`` the pairs, mapped to Elo. The pair, not the battle,
  is the independent unit: the two battles of a pair share their decks, so a deal that
  favours one seat gives one win each far more often than chance (the 6-network ensemble
  against greedy: 5 LL, 566 LW/WL and 428 WW in 1,000 pairs), and the per-battle
  (trinomial) variance, which treats them as independent, overstates the uncertainty (there
  by 1.27x). ``score_ci95_trinomial`` still gives that interval, for comparison;
* SPRT: the generalized log-likelihood ratio of fishtest's ``LLR_logistic`` on the
  pentanomial (each hypothesis ``score = L(elo)`` with ``L(x) = 1 / (1 + 10^(-x/400))``; the
  likelihood of the pair scores is maximised under each constraint; empty cells get 1e-3),
  checked after every pair against ``log(beta / (1 - alpha))`` (accept H0: stop, fail) and
  ``log((1 - beta) / alpha)`` (accept H1: stop). An H1 crossing stops the match only once
  the promotion policy's ``min_pairs`` pairs are played (an H0 crossing stops at once): the
  match goes on, and the decision is the one at the stop, so that a decided benchmark with
  ``n_pairs >= min_pairs`` has enough pairs to count for promotion. Reaching ``n_pairs``
  undecided leaves the SPRT decision ``inconclusive`` (not passed); the verdict then says
  what the numbers do say: ``WORSE`` when the 95% Elo interval lies wholly below zero (a
  futility result: more pairs would not make the candidate pass), ``BETTER`` when it lies
  wholly above zero (stronger, but not shown to be ``elo1`` stronger), ``INCONCLUSIVE``
  only when the interval includes zero or fewer than ``min_pairs`` pairs were played.

Promotion eligibility. ``passed`` is true only when the benchmark is valid, the SPRT
accepted H1 *and* its settings meet the :class:`extrarlhf.policies.promotion.PromotionPolicy`
(``elo0 >= 0``, ``alpha`` and ``beta <= 0.05``, at least ``min_pairs`` pairs; ``policy=``
overrides it, for core callers only). Any elo0 may be measured, but the report says
``promotion_eligible`` and lists ``promotion_blockers`` (``{"check", "message"}``, the checks
``promote_checkpoint`` uses); an H1 accepted under lax settings is reported as "NOT ELIGIBLE
FOR PROMOTION", never as "PASSED", with the candidate's score and Elo next to it.

Each model also plays ``baseline_pairs`` pairs against ``baseline:random`` and
``baseline:greedy`` (informative; the same seeds for both models).

Any degraded battle (a model fell back to a baseline: missing file, changed weights,
NaN...) or crashed battle invalidates the benchmark: ``valid: false``, ``passed: false``,
with the reasons. The played weights_hash of each model is recorded next to the registered
one (promotion requires them equal).

Reports go to ``<checkpoints_dir>/benchmarks/<candidate>-vs-<incumbent>-<n>.json`` (and a
``.md`` twin), written atomically; ``n`` is the candidate's benchmark sequence number.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable

import engine
from adapters import ModelPolicy, SearchPolicy, decide_many, make_baseline, work
from adapters.guided import GuidedSearchPolicy
from engine import derive_seed

from ..checkpoints.registry import CheckpointRegistry
from ..core.clock import utc_now
from ..core.errors import Cancelled, InvalidArgument, NotFound, RLHFError, UnsupportedSchema
from ..core.fileio import atomic_write_bytes, atomic_write_json, locked
from ..core.procs import cap_workers, process_pool, stop_flag
from ..core.work_caps import check_search_work, search_sims
from ..runtime.actors import concrete_spec, resolve_actor
from ..runtime.match import check_seed
from .promotion_policy import PromotionPolicy, benchmark_blockers

REPORT_SCHEMA_VERSION = 1
BENCHMARKS_DIR = "benchmarks"
Z95 = 1.959963984540054
SCORE_EPS = 1e-3
CHUNK_PAIRS = 16  # pairs a worker plays side by side (32 battles in lockstep)
MAX_PAIRS = 100_000
MAX_WORKERS = 64
Progress = Callable[[int, int], None]
# the running SPRT after each chunk of pairs: {"pairs", "wins", "draws", "losses", "llr",
# "lower", "upper", "decision"}
SprtProgress = Callable[[dict[str, Any]], None]


# ---------------------------------------------------------------------------- statistics
def logistic(elo: float) -> float:
    """Expected score of a player ``elo`` points stronger: ``1 / (1 + 10^(-elo/400))``."""
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


def elo_of_score(score: float) -> float:
    """Logistic Elo difference of an expected score (clamped to [0.001, 0.999])."""
    s = min(max(score, SCORE_EPS), 1.0 - SCORE_EPS)
    return -400.0 * math.log10(1.0 / s - 1.0)


PAIR_SCORES = (0.0, 0.25, 0.5, 0.75, 1.0)  # a pair's mean score in each pentanomial cell
INTERVAL_STATISTIC = "pentanomial (the variance of the pair score; pairs are the independent unit)"
SPRT_STATISTIC = "pentanomial GSPRT (fishtest LLR_logistic)"


def score_stats(wins: int, draws: int, losses: int, pentanomial: list[int] | None = None) -> dict[str, Any]:
    """Score, Elo and their 95% intervals from W/D/L; with the ``pentanomial`` pair counts
    the interval is the pairs' (module docstring) and ``score_ci95_trinomial`` the per-battle
    one, else the per-battle (trinomial) interval only."""
    n = wins + draws + losses
    if n == 0:
        return {"battles": 0, "score": None, "elo": None, "elo_ci95": None, "score_ci95": None, "stderr": None}
    s = (wins + 0.5 * draws) / n
    var = (wins * (1.0 - s) ** 2 + draws * (0.5 - s) ** 2 + losses * s ** 2) / n
    se, statistic = math.sqrt(var / n), "trinomial (the variance of the battle score)"
    extra: dict[str, Any] = {"variance_per_battle": var}
    if pentanomial is not None:
        extra["score_ci95_trinomial"] = [s - Z95 * se, s + Z95 * se]
        pairs = sum(pentanomial)
        if 2 * pairs != n:
            raise ValueError(f"{pairs} pentanomial pairs do not hold the {n} battles of W/D/L {wins}/{draws}/{losses}")
        pair_var = sum(c * (v - s) ** 2 for c, v in zip(pentanomial, PAIR_SCORES)) / pairs
        se, statistic = math.sqrt(pair_var / pairs), INTERVAL_STATISTIC
        extra["variance_per_pair"] = pair_var
    lo, hi = s - Z95 * se, s + Z95 * se
    return {"battles": n, "score": s, "elo": elo_of_score(s), "score_ci95": [lo, hi],
            "elo_ci95": [elo_of_score(lo), elo_of_score(hi)], "stderr": se, "interval": statistic, **extra}


def _secular(values: list[float], probs: list[float]) -> float:
    """The root x of sum_i p_i a_i / (1 + x a_i) = 0 between -1/max(a) and -1/min(a)
    (the function is decreasing there), by bisection to float precision."""
    lo, hi = -1.0 / max(values), -1.0 / min(values)
    span = hi - lo
    lo, hi = lo + 1e-12 * span, hi - 1e-12 * span
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        f = sum(p * a / (1.0 + mid * a) for a, p in zip(values, probs))
        if f > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-16 * max(1.0, abs(mid)):
            break
    return 0.5 * (lo + hi)


def _mle_given_score(probs: list[float], scores: tuple[float, ...], s: float) -> list[float]:
    """Maximum-likelihood distribution over the cells (cell i scores ``scores[i]``) with
    expected score ``s`` for the empirical ``probs`` (the multinomial MLE under one linear
    constraint)."""
    values = [v - s for v in scores]
    x = _secular(values, probs)
    return [p / (1.0 + x * a) for a, p in zip(values, probs)]


def sprt_llr(counts: list[int], elo0: float, elo1: float, scores: tuple[float, ...] = PAIR_SCORES) -> float:
    """Generalized log-likelihood ratio of H1 (elo1) vs H0 (elo0) for the cell ``counts``
    (cell i scores ``scores[i]``: by default the pentanomial of pairs; ``(0, 0.5, 1)`` for
    L/D/W battles), in logistic Elo (fishtest's ``LLR_logistic``)."""
    if len(counts) != len(scores):
        raise ValueError(f"{len(counts)} counts for {len(scores)} cells")
    if sum(counts) == 0:
        return 0.0
    regular = [float(c) if c > 0 else 1e-3 for c in counts]
    n = sum(regular)
    probs = [c / n for c in regular]
    p0 = _mle_given_score(probs, scores, logistic(elo0))
    p1 = _mle_given_score(probs, scores, logistic(elo1))
    return sum(c * (math.log(b) - math.log(a)) for c, a, b in zip(regular, p0, p1))


def _classify(llr: float, lower: float, upper: float) -> str:
    return "H1" if llr >= upper else ("H0" if llr <= lower else "inconclusive")


def sprt_bounds(alpha: float, beta: float) -> tuple[float, float]:
    """(lower, upper): accept H0 at or below lower, H1 at or above upper."""
    return math.log(beta / (1.0 - alpha)), math.log((1.0 - beta) / alpha)


# ---------------------------------------------------------------------------- playing
def side_plan(spec: str, checkpoints_dir: str) -> dict[str, Any]:
    """How a worker builds a policy for ``spec``: baselines by name, checkpoints by registered
    path, kind and weights_hash (resolved once, so every battle checks the same hash)."""
    actor = resolve_actor(spec, "model", checkpoints_dir)
    if actor.is_baseline:
        return {"spec": spec, "kind": "baseline", "baseline": spec.split(":", 1)[1], "weights_hash": None}
    if actor.kind == "search":
        return {"spec": spec, "kind": "search", "checkpoints_dir": checkpoints_dir, "weights_hash": actor.weights_hash}
    cp = CheckpointRegistry(checkpoints_dir).get(spec)
    return {"spec": spec, "kind": cp.kind, "path": str(cp.path), "weights_hash": cp.weights_hash}


def _policy(side: dict[str, Any], seed: int) -> Any:
    if side["kind"] == "baseline":
        return make_baseline(side["baseline"], seed)
    if side["kind"] == "search":
        return resolve_actor(side["spec"], "model", side["checkpoints_dir"]).make_policy(seed)
    return ModelPolicy(side["path"], side["kind"], expected_weights_hash=side["weights_hash"], seed=seed,
                       spec=side["spec"])


def play_battles(sides: dict[str, dict[str, Any]], jobs: list[tuple[Any, int, str, str]]) -> list[dict[str, Any]]:
    """Play ``(key, seed, p1_spec, p2_spec)`` battles side by side to the end; one result per
    job, in order: winner, turns, decisions, degraded (+ warnings), crash, played hashes.
    Runs in a worker process or in-process."""
    live = []
    results: list[dict[str, Any] | None] = [None] * len(jobs)
    # Models play argmax and fall back to the deterministic greedy baseline, so one ModelPolicy
    # per model serves every battle of the chunk (building one re-reads and hashes the file);
    # baselines get their own seeded instance per battle (random draws from it).
    models: dict[str, Any] = {}

    def policy(spec: str, seed: int) -> Any:
        side = sides[spec]
        if side["kind"] in ("baseline", "search"):  # a search keeps per-battle state (its seed, its rollouts)
            return _policy(side, seed)
        if spec not in models:
            models[spec] = _policy(side, 0)
        return models[spec]

    for i, (key, seed, p1, p2) in enumerate(jobs):
        policies = (policy(p1, derive_seed(seed, "policy-p1")), policy(p2, derive_seed(seed, "policy-p2")))
        played = {}
        for spec, pol in zip((p1, p2), policies):
            if isinstance(pol, (ModelPolicy, SearchPolicy, GuidedSearchPolicy)):
                played[spec] = pol.weights_hash
        live.append({"i": i, "key": key, "seed": seed, "state": engine.new_battle(seed), "policies": policies,
                     "decisions": 0, "warnings": [], "played": played, "specs": (p1, p2)})
    while live:
        work.check()  # a cancelled benchmark (its caller's scope, or the pool's stop flag) stops here
        try:
            decisions = decide_many([(b["policies"][b["state"].to_move - 1], b["state"]) for b in live])
        except Exception as exc:  # noqa: BLE001 - an adapter bug: every battle of the step is affected
            decisions = [exc] * len(live)
        still = []
        for battle, decision in zip(live, decisions):
            state = battle["state"]
            try:
                if isinstance(decision, Exception):
                    raise decision
                if decision.warning is not None:
                    battle["warnings"].append({"decision_index": battle["decisions"],
                                               "spec": battle["specs"][state.to_move - 1], **decision.warning})
                state.apply(decision.action_id)
                battle["decisions"] += 1
            except Exception as exc:  # noqa: BLE001 - recorded; the benchmark becomes invalid
                results[battle["i"]] = _battle_result(battle, crash=f"{type(exc).__name__}: {exc}")
                continue
            if state.is_terminal:
                results[battle["i"]] = _battle_result(battle)
            else:
                still.append(battle)
        live = still
    return results  # type: ignore[return-value]


def _battle_result(battle: dict[str, Any], crash: str | None = None) -> dict[str, Any]:
    state = battle["state"]
    return {"key": battle["key"], "seed": battle["seed"], "p1": battle["specs"][0], "p2": battle["specs"][1],
            "winner": state.winner if crash is None else None, "turns": state.turn, "decisions": battle["decisions"],
            "degraded": bool(battle["warnings"]), "warnings": battle["warnings"][:3],
            "warning_count": len(battle["warnings"]), "crash": crash, "played": battle["played"]}


class _Runner:
    """Plays job chunks in order, in-process (1 worker) or on a process pool; ``results``
    yields each chunk's results in submission order, keeping at most ``2 * workers`` chunks
    in flight so an early stop wastes little."""

    def __init__(self, sides: dict[str, dict[str, Any]], max_workers: int) -> None:
        self.sides, self.max_workers = sides, max_workers
        self.pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> "_Runner":
        if self.max_workers > 1:
            self.stop = stop_flag("extrarlhf.policies.benchmarking")
            self.pool = process_pool(self.max_workers, "extrarlhf.policies.benchmarking", stop=self.stop)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.pool is not None:
            self.stop.set()  # chunks still playing (an early stop, a cancel) stop at their next decision
            self.pool.shutdown(wait=True, cancel_futures=True)

    def results(self, chunks: list[list[tuple]]):
        if self.pool is None:
            for chunk in chunks:
                yield play_battles(self.sides, chunk)
            return
        pending: list[Future] = []
        todo = iter(chunks)
        window = 2 * self.max_workers
        for chunk in todo:
            pending.append(self.pool.submit(play_battles, self.sides, chunk))
            if len(pending) >= window:
                break
        while pending:
            head = pending.pop(0)
            wait([head], return_when=FIRST_COMPLETED)
            result = head.result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(self.pool.submit(play_battles, self.sides, nxt))
            try:
                yield result
            except GeneratorExit:
                for future in pending:
                    future.cancel()
                raise


def _pair_seed(seed: int, label: str, index: int) -> int:
    return derive_seed(seed, f"benchmark:{label}:{index}") >> 1


def pair_jobs(a: str, b: str, label: str, seed: int, pairs: range) -> list[tuple]:
    """Jobs of pairs: A as player 1 then A as player 2 on one seed; key = (label, pair, a_seat)."""
    jobs = []
    for i in pairs:
        s = _pair_seed(seed, label, i)
        jobs += [((label, i, 1), s, a, b), ((label, i, 2), s, b, a)]
    return jobs


class _Tally:
    """W/D/L of A against B, the pentanomial pair counts (LL, LD+DL, LW+DD+WL, DW+WD, WW) and
    every pair's results in order (A as player 1, then as player 2: "WL", "DW", ...), so the
    SPRT path can be re-traced from a report."""

    def __init__(self, a: str, b: str) -> None:
        self.a, self.b = a, b
        self.wins = self.draws = self.losses = 0
        self.pairs = 0
        self.pentanomial = [0, 0, 0, 0, 0]
        self.pair_results: list[str] = []  # per pair, in order: A's results as player 1 then 2 ("WL", "DW"...)
        self.turns = self.decisions = 0

    def add_pair(self, first: dict[str, Any], second: dict[str, Any]) -> None:
        points = 0
        letters = ""
        for result, a_seat in ((first, 1), (second, 2)):
            self.turns += result["turns"]
            self.decisions += result["decisions"]
            if result["winner"] == 0:
                self.draws += 1
                points += 1
                letters += "D"
            elif result["winner"] == a_seat:
                self.wins += 1
                points += 2
                letters += "W"
            else:
                self.losses += 1
                letters += "L"
        self.pentanomial[points] += 1
        self.pair_results.append(letters)
        self.pairs += 1

    def as_dict(self) -> dict[str, Any]:
        stats = score_stats(self.wins, self.draws, self.losses, self.pentanomial)
        n = stats["battles"] or 1
        return {"model": self.a, "opponent": self.b, "pairs": self.pairs, "wins": self.wins, "draws": self.draws,
                "losses": self.losses, "win_rate": self.wins / n if stats["battles"] else None,
                "pentanomial": list(self.pentanomial), "pair_results": list(self.pair_results), "mean_turns": round(self.turns / n, 2),
                "mean_decisions": round(self.decisions / n, 2), **stats}


# ---------------------------------------------------------------------------- reports
def benchmarks_dir(checkpoints_dir: str | os.PathLike[str]) -> Path:
    return Path(checkpoints_dir) / BENCHMARKS_DIR


def _file_part(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", spec)


def list_benchmarks(checkpoints_dir: str | os.PathLike[str] = "checkpoints", candidate: str | None = None,
                    unreadable: list[str] | None = None) -> list[dict[str, Any]]:
    """Every readable report (optionally of one candidate), oldest first (by sequence); the
    report files that cannot be read are appended to ``unreadable`` (with why) when given."""
    folder = benchmarks_dir(checkpoints_dir)
    if not folder.is_dir():
        return []
    out = []
    prefix = f"{_file_part(candidate)}-vs-" if candidate else ""
    for path in folder.glob(f"{prefix}*.json"):
        try:
            report = read_report(path)
        except RLHFError as exc:
            if unreadable is not None:
                unreadable.append(str(exc))
            continue
        if candidate is None or report["candidate"]["spec"] == candidate:
            report["report_path"] = str(path)
            out.append(report)
    return sorted(out, key=lambda r: (r["candidate"]["spec"], r["sequence"]))


def read_report(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NotFound(f"benchmark report {p} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UnsupportedSchema(f"benchmark report {p} is not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != REPORT_SCHEMA_VERSION or \
            doc.get("kind") != "policy_benchmark":
        raise UnsupportedSchema(f"{p} is not a benchmark report this version reads (schema_version "
                                f"{REPORT_SCHEMA_VERSION}, kind policy_benchmark)")
    return doc


def latest_benchmark(candidate: str, checkpoints_dir: str | os.PathLike[str] = "checkpoints"
                     ) -> dict[str, Any] | None:
    """The candidate's most recent report (highest sequence), or None."""
    reports = list_benchmarks(checkpoints_dir, candidate)
    return reports[-1] if reports else None


def _fmt(x: Any, nd: int = 1, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.{nd}f}" if signed else f"{x:.{nd}f}"


def format_markdown(report: dict[str, Any]) -> str:
    """A readable summary: verdict, the main match with its SPRT, then the baseline table."""
    m, sprt = report["match"], report["match"]["sprt"]
    cand, inc = report["candidate"], report["incumbent"]
    lines = [f"# Benchmark {cand['spec']} vs {inc['spec']} (#{report['sequence']})", "",
             f"**{report['verdict']}**", ""]
    lines += ["| match | pairs | W | D | L | score | Elo | 95% CI | LLR | bounds | decision |",
              "|---|---:|---:|---:|---:|---:|---:|---|---:|---|---|"]
    ci = m["elo_ci95"]
    lines.append(f"| {cand['spec']} vs {inc['spec']} | {m['pairs']} | {m['wins']} | {m['draws']} | {m['losses']} | "
                 f"{_fmt(m['score'], 3)} | {_fmt(m['elo'], 1, True)} | "
                 f"{'-' if ci is None else f'[{ci[0]:+.1f}, {ci[1]:+.1f}]'} | {sprt['llr']:+.3f} | "
                 f"[{sprt['lower']:.3f}, {sprt['upper']:.3f}] | {sprt['decision']} |")
    lines += ["", f"SPRT elo0={sprt['elo0']}, elo1={sprt['elo1']}, alpha={sprt['alpha']}, beta={sprt['beta']}"
                  f"{' (stopped early)' if sprt['stopped_early'] else ''}, on the pentanomial (pairs lost whole, "
                  f"LD, split, DW, won whole): {m['pentanomial']}. The 95% CI is over pairs.", ""]
    if report["baselines"]:
        lines += ["| model | opponent | pairs | W | D | L | win rate | score | Elo | 95% CI |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for b in report["baselines"]:
            ci = b["elo_ci95"]
            lines.append(f"| {b['model']} | {b['opponent']} | {b['pairs']} | {b['wins']} | {b['draws']} | "
                         f"{b['losses']} | {_fmt(b['win_rate'], 3)} | {_fmt(b['score'], 3)} | "
                         f"{_fmt(b['elo'], 1, True)} | {'-' if ci is None else f'[{ci[0]:+.1f}, {ci[1]:+.1f}]'} |")
        lines.append("")
    lines.append("| model | registered weights_hash | played weights_hash |")
    lines.append("|---|---|---|")
    for side in (cand, inc):
        played = ", ".join(h[:16] for h in side["played_weights_hashes"]) or "-"
        lines.append(f"| {side['spec']} | {(side['registered_weights_hash'] or '-')[:16]} | {played} |")
    if not report["valid"]:
        lines += ["", "**Invalid:** " + "; ".join(report["invalid_reasons"])]
    if "promotion_eligible" in report:
        pol = report["promotion_policy"]
        lines += ["", f"Promotion (policy elo0 >= {pol['min_elo0']:g}, alpha <= {pol['max_alpha']:g}, beta <= "
                      f"{pol['max_beta']:g}, at least {pol['min_pairs']} pairs): "
                      + ("**eligible**." if report["promotion_eligible"] else "**not eligible**: " +
                         "; ".join(f"[{b['check']}] {b['message']}" for b in report["promotion_blockers"]))]
    lines += ["", f"{report['battles_played']} battles in {report['seconds']:.1f}s "
                  f"({_fmt(report['battles_per_s'], 1)} battles/s, {report['settings']['max_workers']} worker(s))."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- the benchmark
def _check_number(value: Any, name: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not lo < value < hi:
        raise InvalidArgument(f"{name} must be a number in ({lo}, {hi}), got {value!r}")
    return float(value)


def _check_int(value: Any, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidArgument(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
    return value


def benchmark_models(candidate: str, incumbent: str, *, n_pairs: int = 200, seed: int = 0, elo0: float = 0.0,
                     elo1: float = 10.0, alpha: float = 0.05, beta: float = 0.05, baseline_pairs: int = 20,
                     max_workers: int = 1, stop_early: bool = True,
                     checkpoints_dir: str | os.PathLike[str] = "checkpoints",
                     progress: Progress | None = None, write: bool = True,
                     policy: PromotionPolicy | None = None,
                     cancel: Callable[[], bool] | None = None,
                     sprt_progress: SprtProgress | None = None) -> dict[str, Any]:
    """Benchmark ``candidate`` against ``incumbent`` (specs: checkpoint names or baselines);
    returns the report (also written to the benchmarks folder unless ``write=False``).
    ``sprt_progress`` gets the running SPRT after each chunk of main pairs.
    ``policy`` (default :class:`PromotionPolicy`) decides ``promotion_eligible`` and the
    fewest pairs before an H1 stop (module docstring)."""
    policy = PromotionPolicy.coerce(policy)
    checkpoints_dir = os.path.abspath(checkpoints_dir)
    n_pairs = _check_int(n_pairs, "n_pairs", 1, MAX_PAIRS)
    baseline_pairs = _check_int(baseline_pairs, "baseline_pairs", 0, MAX_PAIRS)
    max_workers = cap_workers(_check_int(max_workers, "max_workers", 1, MAX_WORKERS))
    seed = check_seed(seed)
    elo0 = _check_number(elo0, "elo0", -1000.0, 1000.0)
    elo1 = _check_number(elo1, "elo1", -1000.0, 1000.0)
    if not elo0 < elo1:
        raise InvalidArgument(f"elo0 must be below elo1 (H0: elo <= elo0 against H1: elo >= elo1), got "
                              f"elo0={elo0}, elo1={elo1}")
    alpha = _check_number(alpha, "alpha", 0.0, 0.5)
    beta = _check_number(beta, "beta", 0.0, 0.5)
    if not isinstance(stop_early, bool):
        raise InvalidArgument(f"stop_early must be true or false, got {stop_early!r}")
    candidate = concrete_spec(candidate, "candidate", checkpoints_dir)  # @promoted -> the promoted name
    incumbent = concrete_spec(incumbent, "incumbent", checkpoints_dir)
    if candidate == incumbent:
        raise InvalidArgument(f"candidate and incumbent are both {candidate!r}; a benchmark compares two models")
    baselines_planned = [(model, base) for model in (candidate, incumbent)
                         for base in ("baseline:random", "baseline:greedy") if model != base] if baseline_pairs else []
    check_search_work(2 * n_pairs * (search_sims(candidate) + search_sims(incumbent))
                      + 2 * baseline_pairs * sum(search_sims(model) for model, _ in baselines_planned),
                      f"this benchmark ({n_pairs:,} pairs, {baseline_pairs:,} against each baseline)",
                      "ask for fewer pairs (the SPRT stops early when it can) or fewer sims")
    sides = {spec: side_plan(spec, checkpoints_dir) for spec in (candidate, incumbent)}
    for spec in ("baseline:random", "baseline:greedy"):
        sides.setdefault(spec, side_plan(spec, checkpoints_dir))
    lower, upper = sprt_bounds(alpha, beta)
    started_at, t0 = utc_now(), time.perf_counter()

    planned = 2 * n_pairs + 2 * baseline_pairs * len(baselines_planned)
    done = 0
    all_results: list[dict[str, Any]] = []

    def tick(n: int, remaining: int) -> None:
        """``n`` more battles played; ``remaining`` still planned (shrinks on an early stop)."""
        nonlocal done
        done += n
        if progress is not None:
            progress(done, done + remaining)
        if cancel is not None and cancel():
            raise Cancelled(f"benchmark of {candidate} against {incumbent} cancelled after {done} battles; no report "
                            f"was written")

    tally = _Tally(candidate, incumbent)
    llr, decision, stop_pair = 0.0, "inconclusive", None
    invalid = False
    with _Runner(sides, max_workers) as runner:
        chunks = [pair_jobs(candidate, incumbent, "main", seed, range(k, min(k + CHUNK_PAIRS, n_pairs)))
                  for k in range(0, n_pairs, CHUNK_PAIRS)]
        stream = runner.results(chunks)
        for results in stream:
            all_results.extend(results)
            invalid = invalid or any(r["degraded"] or r["crash"] for r in results)
            for k in range(0, len(results), 2):
                if stop_pair is not None:
                    break
                tally.add_pair(results[k], results[k + 1])
                llr = sprt_llr(tally.pentanomial, elo0, elo1)
                decision = _classify(llr, lower, upper)
                if stop_early and (decision == "H0" or (decision == "H1" and tally.pairs >= policy.min_pairs)):
                    stop_pair = tally.pairs
            if sprt_progress is not None:
                sprt_progress({"pairs": tally.pairs, "wins": tally.wins, "draws": tally.draws,
                               "losses": tally.losses, "llr": round(llr, 4), "lower": round(lower, 4),
                               "upper": round(upper, 4), "decision": decision})
            stopping = stop_pair is not None or invalid
            main_left = 0 if stopping else 2 * n_pairs - (len(all_results))
            tick(len(results), main_left + (0 if invalid else planned - 2 * n_pairs))
            if stopping:
                stream.close()
                break
        baseline_tallies = {key: _Tally(*key) for key in baselines_planned}
        baselines_played = bool(baselines_planned) and not invalid
        if baselines_played:
            jobs = []
            for model, base in baselines_planned:
                jobs += pair_jobs(model, base, f"baseline:{base}", seed, range(baseline_pairs))
            chunks = [jobs[k:k + 2 * CHUNK_PAIRS] for k in range(0, len(jobs), 2 * CHUNK_PAIRS)]
            left = len(jobs)
            for results in runner.results(chunks):
                all_results.extend(results)
                for k in range(0, len(results), 2):
                    first, second = results[k], results[k + 1]
                    model = first["p1"]
                    baseline_tallies[(model, first["p2"])].add_pair(first, second)
                left -= len(results)
                tick(len(results), left)
            invalid = invalid or any(r["degraded"] or r["crash"] for r in all_results)
    seconds = time.perf_counter() - t0

    invalid_reasons = []
    degraded = [r for r in all_results if r["degraded"]]
    crashed = [r for r in all_results if r["crash"]]
    if degraded:
        first = degraded[0]["warnings"][0]
        invalid_reasons.append(f"{len(degraded)} degraded battle(s): a model fell back to a baseline (first: "
                               f"{first['spec']} [{first['kind']}] {first['message']})")
    if crashed:
        invalid_reasons.append(f"{len(crashed)} crashed battle(s) (first: {crashed[0]['crash']})")
    side_reports = {}
    for role, spec in (("candidate", candidate), ("incumbent", incumbent)):
        plan = sides[spec]
        played = sorted({r["played"][spec] for r in all_results if spec in r["played"] and r["played"][spec]})
        side_reports[role] = {"spec": spec, "kind": plan["kind"], "registered_weights_hash": plan["weights_hash"],
                              "played_weights_hashes": played,
                              "played_weights_hash": played[0] if len(played) == 1 else None,
                              "weights_hash_matches": (plan["weights_hash"] is None and not played) or
                                                      played == [plan["weights_hash"]]}
        if plan["kind"] != "baseline" and not side_reports[role]["weights_hash_matches"]:
            invalid_reasons.append(f"{role} {spec} played weights {played or 'none'} instead of the registered "
                                   f"{plan['weights_hash']}")
    valid = not invalid_reasons
    match = tally.as_dict()
    match["sprt"] = {"llr": llr, "lower": lower, "upper": upper, "elo0": elo0, "elo1": elo1, "alpha": alpha,
                     "beta": beta, "decision": decision, "stopped_early": stop_pair is not None and stop_pair < n_pairs,
                     "pairs_at_decision": stop_pair, "min_pairs_before_h1_stop": policy.min_pairs,
                     "statistic": SPRT_STATISTIC}
    counted = 2 * tally.pairs
    main_played = sum(1 for r in all_results if r["key"][0] == "main")
    blockers = benchmark_blockers({"valid": valid, "invalid_reasons": invalid_reasons, "match": match}, policy)
    policy_blockers = [b for b in blockers if b["check"] == "promotion_policy"]
    passed = valid and decision == "H1" and not policy_blockers
    outcome = "-" if match["score"] is None else \
        f"{candidate} scored {match['score']:.3f} against {incumbent} (W/D/L {match['wins']}/{match['draws']}/" \
        f"{match['losses']}, Elo {match['elo']:+.0f}, 95% CI [{match['elo_ci95'][0]:+.0f}, " \
        f"{match['elo_ci95'][1]:+.0f}])"
    if not valid:
        verdict = "INVALID: " + "; ".join(invalid_reasons)
    elif decision == "H1" and not policy_blockers:
        verdict = f"PASSED: SPRT accepted H1 ({candidate} is at least {elo1:g} Elo stronger than {incumbent}, " \
                  f"LLR {llr:.3f} >= {upper:.3f}) after {tally.pairs} pairs; {outcome}"
    elif decision == "H1":
        verdict = f"NOT ELIGIBLE FOR PROMOTION: SPRT accepted H1 (elo >= {elo1:g} against H0 elo <= {elo0:g}, " \
                  f"LLR {llr:.3f} >= {upper:.3f}) after {tally.pairs} pairs, but the settings fall short of the " \
                  f"promotion policy: {'; '.join(b['message'] for b in policy_blockers)}; {outcome}"
    elif decision == "H0":
        verdict = f"FAILED: SPRT accepted H0 ({candidate} is not {elo1:g} Elo stronger than {incumbent}, " \
                  f"LLR {llr:.3f} <= {lower:.3f}) after {tally.pairs} pairs; {outcome}"
    else:
        verdict = _verdict_at_cap(match, tally.pairs, policy.min_pairs, candidate, incumbent, elo1, outcome)
    report: dict[str, Any] = {
        "schema_version": REPORT_SCHEMA_VERSION, "kind": "policy_benchmark", "sequence": None,
        "candidate": side_reports["candidate"], "incumbent": side_reports["incumbent"],
        "settings": {"n_pairs": n_pairs, "seed": seed, "elo0": elo0, "elo1": elo1, "alpha": alpha, "beta": beta,
                     "baseline_pairs": baseline_pairs, "max_workers": max_workers, "stop_early": stop_early,
                     "chunk_pairs": CHUNK_PAIRS, "pairing": "each seed twice, seats swapped (same decks, same "
                                                            "starting seat)"},
        "match": match,
        "baselines": [baseline_tallies[key].as_dict() for key in baselines_planned] if baselines_played else [],
        "baselines_skipped": None if baselines_played or not baselines_planned else
        "not played: the main match already invalidated the benchmark",
        "valid": valid, "invalid_reasons": invalid_reasons, "passed": passed, "verdict": verdict,
        "promotion_eligible": passed, "promotion_blockers": blockers, "promotion_policy": policy.as_dict(),
        "degraded_battles": len(degraded), "crashed_battles": len(crashed),
        "degraded_examples": [{"key": list(r["key"]), "seed": r["seed"], "warnings": r["warnings"]}
                              for r in degraded[:3]],
        "battles_counted": counted, "battles_played": len(all_results),
        "battles_discarded_after_decision": main_played - counted,
        "started_at": started_at, "finished_at": utc_now(), "seconds": round(seconds, 3),
        "battles_per_s": round(len(all_results) / seconds, 1) if seconds > 0 else None,
    }
    if write:
        _store(report, checkpoints_dir)
    else:
        report["markdown"] = format_markdown(report)
    return report


def elo_side_of_zero(match: dict[str, Any], min_pairs: int) -> str | None:
    """``"below"``/``"above"`` when the 95% Elo interval of ``match`` lies wholly on one side of
    zero, else None. Only with at least ``min_pairs`` pairs (the promotion policy's floor): the
    normal interval of a handful of battles (4 losses in a row: a zero-width interval at
    -1200) would otherwise "exclude zero" on no evidence."""
    ci = match.get("elo_ci95")
    if ci is None or match["pairs"] < min_pairs:
        return None
    return "below" if ci[1] < 0 else "above" if ci[0] > 0 else None


def _verdict_at_cap(match: dict[str, Any], pairs: int, min_pairs: int, candidate: str, incumbent: str,
                    elo1: float, outcome: str) -> str:
    """The verdict when the SPRT reached the pair cap undecided (the SPRT itself is unchanged):
    WORSE or BETTER when the Elo interval excludes zero (:func:`elo_side_of_zero`), else
    INCONCLUSIVE. None of them passes."""
    sprt = match["sprt"]
    undecided = f"the SPRT stayed undecided (LLR {sprt['llr']:.3f} within [{sprt['lower']:.3f}, " \
                f"{sprt['upper']:.3f}]) for all {pairs} pairs"
    side = elo_side_of_zero(match, min_pairs)
    if side == "below":
        return f"WORSE: {undecided}, but the 95% Elo interval lies wholly below zero: {candidate} is weaker than " \
               f"{incumbent}; not passed (more pairs are unlikely to change that); {outcome}"
    if side == "above":
        return f"BETTER: {undecided}; the 95% Elo interval lies wholly above zero, so {candidate} is stronger than " \
               f"{incumbent}, but not shown to be {elo1:g} Elo stronger; not passed (run more pairs for the SPRT " \
               f"to decide); {outcome}"
    why = "the 95% Elo interval includes zero" if pairs >= min_pairs else \
        f"fewer than {min_pairs} pairs, too few for the interval to say which is stronger"
    return f"INCONCLUSIVE: {undecided}, and {why}; not passed (run more pairs); {outcome}"


def _store(report: dict[str, Any], checkpoints_dir: str) -> None:
    folder = benchmarks_dir(checkpoints_dir)
    folder.mkdir(parents=True, exist_ok=True)
    cand = report["candidate"]["spec"]
    with locked(folder / "sequence"):
        previous = list_benchmarks(checkpoints_dir, cand)
        report["sequence"] = (previous[-1]["sequence"] + 1) if previous else 1
        stem = f"{_file_part(cand)}-vs-{_file_part(report['incumbent']['spec'])}-{report['sequence']}"
        path = folder / f"{stem}.json"
        report["report_path"] = str(path)
        report["markdown_path"] = str(folder / f"{stem}.md")
        report["markdown"] = format_markdown(report)
        atomic_write_bytes(folder / f"{stem}.md", report["markdown"].encode("utf-8"))
        atomic_write_json(path, report)
