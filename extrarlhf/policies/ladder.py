"""The policy ladder: every promotion, in order, with its Elo against its predecessor and
against the baselines, each with a 95% interval (DESIGN section 14, issue 18).

Where each figure comes from
----------------------------
* The rungs are the ``promote`` events of ``promoted_history.jsonl`` (extrarlhf.policies.promotion),
  oldest first; a promotion later undone by ``rollback_promotion`` stays on the ladder with
  ``status: "rolled_back"`` (the history is a stack: a rollback pops the latest promotion
  still on it). The other statuses are ``"current"`` (the promoted pointer) and
  ``"superseded"``.
* ``vs_predecessor`` is *recorded*, never replayed: the benchmark that justified the
  promotion (the pointer's ``benchmark`` block and the report file it names: W/D/L, score,
  Elo, its 95% interval, the SPRT's LLR, bounds and decision, the verdict). The predecessor is
  the incumbent that benchmark was played against (usually the promotion it replaced; with
  ``require_current_incumbent=False`` another reference).
* ``vs_baselines`` (``baseline:random`` and ``baseline:greedy``) is *measured*:
  ``benchmark_models(..., stop_early=False, baseline_pairs=0, write=False)`` over ``pairs``
  pairs (each deal twice, seats swapped), the same deals for every rung and both baselines.
  A measurement is cached in ``<checkpoints>/ladder.json`` under (weights_hash, opponent,
  pairs, seed, engine version, ruleset, interval statistic), so a second call replays
  nothing. A checkpoint that is no longer registered with the promoted weights (a rolled-back
  one may be overwritten) is not measured: the rung says why. ``measure=False`` plays
  nothing: the cache, else the baseline rows of the promotion's own benchmark report
  (``source: "benchmark_report"``, its ``baseline_pairs`` pairs), else null with the reason.

Cumulative Elo
--------------
``cumulative`` chains the recorded Elo differences from the anchor (the incumbent of the
first promotion, Elo 0): a rung whose predecessor is the anchor starts at 0; one whose
predecessor is an earlier rung (same name and weights) adds its Elo to that rung's
cumulative Elo. The interval is propagated conservatively by adding the interval *endpoints*
along the chain (lower bounds add, upper bounds add): it contains the true sum whenever every
link's interval contains its link, which holds with probability at least ``1 - 0.05 * k``
for ``k`` links (Bonferroni), and it is wider than the root-sum-of-squares interval that
independent errors would give. A rung benchmarked against something else (not the anchor,
not an earlier rung) has no cumulative Elo, with the reason. SPRT matches stop early, which
biases each link's estimate away from zero (optional stopping); the measured baseline Elos
are fixed-length and unbiased by that.

The ladder is written to ``<checkpoints>/ladder.json`` atomically (merged under its lock, so
two concurrent calls keep both measurements; a measurement is saved as soon as it finishes,
so a cancelled call loses nothing it finished). An empty history is a normal outcome (no
rungs, ``reason`` says why). Damaged promotion records refuse, as every promotion reader does.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

import engine

from ..checkpoints.registry import CheckpointRegistry
from ..core.clock import utc_now
from ..core.errors import InvalidArgument, NotFound, RLHFError, UnsupportedSchema, corrupt_record
from ..core.fileio import atomic_write_json, locked, writing
from ..runtime.match import check_seed
from .benchmarking import INTERVAL_STATISTIC, MAX_PAIRS, MAX_WORKERS, benchmark_models, read_report
from .promotion import HISTORY, PromotionRefused, promotion_status

LADDER_SCHEMA_VERSION = 1
LADDER_FILE = "ladder.json"
BASELINES = ("baseline:random", "baseline:greedy")
DEFAULT_PAIRS = 100  # 200 battles per baseline: about +-50 Elo near even; 3.2 s per rung (benchmarks/ladder.py)
CUMULATIVE_METHOD = ("sum of the recorded Elo differences along the predecessor chain from the anchor; interval: "
                     "endpoints added along the chain (covers the sum whenever every link's 95% interval covers its "
                     "link: probability >= 1 - 0.05 k for k links; wider than a root-sum-of-squares interval)")
_FIX_CACHE = (f"move {LADDER_FILE} aside: it only caches measurements, the next ladder call measures them again")
Progress = Callable[[int, int], None]


def ladder_path(checkpoints_dir: str | os.PathLike[str]) -> Path:
    return Path(checkpoints_dir) / LADDER_FILE


def _cache_key(weights_hash: str, opponent: str, pairs: int, seed: int) -> str:
    """The statistic is part of the key: a measurement cached with the per-battle interval
    (before the pentanomial one) is measured again rather than shown with the wrong interval."""
    return f"{weights_hash}|{opponent}|{pairs}|{seed}|{engine.ENGINE_VERSION}|{engine.RULESET}|pentanomial"


def _read_doc(path: Path) -> dict[str, Any] | None:
    """``ladder.json`` (None when there is none); a damaged file is refused
    (``corrupt_record``), another schema_version is ``unsupported_schema``."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise corrupt_record(f"not valid JSON ({exc})", path=path.absolute(), hint=_FIX_CACHE) from None
    if not isinstance(doc, dict) or doc.get("kind") != "policy_ladder":
        raise corrupt_record("not a policy ladder document", path=path.absolute(), hint=_FIX_CACHE)
    if doc.get("schema_version") != LADDER_SCHEMA_VERSION:
        raise UnsupportedSchema(f"{path}: schema_version {doc.get('schema_version')!r} is not supported (this version "
                                f"reads {LADDER_SCHEMA_VERSION}); {_FIX_CACHE}")
    measurements = doc.get("measurements")
    if not isinstance(measurements, dict) or not all(isinstance(v, dict) for v in measurements.values()):
        raise corrupt_record("is missing or not an object of measurements", path=path.absolute(),
                             field="measurements", hint=_FIX_CACHE)
    return doc


def read_ladder(checkpoints_dir: str | os.PathLike[str] = "checkpoints") -> dict[str, Any] | None:
    """The ladder last written to ``<checkpoints>/ladder.json`` (with its ``measurements``
    cache), or None when none was written; never plays."""
    return _read_doc(ladder_path(checkpoints_dir))


def _write(path: Path, ladder: dict[str, Any] | None, new: dict[str, dict[str, Any]]) -> None:
    """Write ``ladder`` (None: keep the ladder on disk, add measurements only) with the cache
    merged under the lock, so another call's measurements are kept."""
    with writing(path.parent, "writing the policy ladder"), locked(path):
        doc = _read_doc(path) or {"schema_version": LADDER_SCHEMA_VERSION, "kind": "policy_ladder",
                                  "measurements": {}}
        measurements = {**doc["measurements"], **new}
        atomic_write_json(path, {**(ladder or doc), "measurements": dict(sorted(measurements.items()))})


# ---------------------------------------------------------------------------- the rungs
def _status_error(status: dict[str, Any]) -> RLHFError | None:
    """The refusal for promotion records the ladder cannot be built from (None when sound)."""
    damaged = status["damaged"]
    if damaged:
        first = damaged[0]
        error = corrupt_record("; ".join(d["problem"] for d in damaged) + " (`extrarlhf check` lists every damaged "
                               "record)", path=first["path"], line=first["line"], field=first["field"],
                               hint="the policy ladder is read from the promotion records; repair them first")
        error.details["damaged"] = damaged
        return error
    if not status["consistent"]:
        reasons = [{"check": "history_consistent", "message": m} for m in status["torn"]]
        return PromotionRefused("policy ladder refused: " + "; ".join(f"[{r['check']}] {r['message']}"
                                                                     for r in reasons), reasons)
    return None


def _recorded(pointer: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None, str | None]:
    """(vs_predecessor from the promotion's records, the report or None, why it is missing)."""
    block = pointer.get("benchmark") or {}
    report, problem = None, None
    if block.get("report"):
        try:
            report = read_report(block["report"])
        except RLHFError as exc:
            problem = f"the benchmark report cannot be read ({exc.code}: {exc}); figures from {HISTORY}"
    else:
        problem = f"the promotion names no benchmark report; figures from {HISTORY}"
    out = {"source": "promotion_benchmark", "report": block.get("report"), "sequence": block.get("sequence"),
           "score": block.get("score"), "elo": block.get("elo"), "elo_ci95": block.get("elo_ci95"),
           "pairs": block.get("pairs"), "llr": block.get("llr"), "decision": block.get("decision"),
           "sprt": block.get("sprt"), "wins": None, "draws": None, "losses": None, "verdict": None,
           "stopped_early": None, "report_problem": problem}
    if report is not None:
        m = report["match"]
        out.update({k: m.get(k) for k in ("wins", "draws", "losses", "score", "elo", "elo_ci95", "pairs")})
        sprt = m.get("sprt") or {}
        out.update({"verdict": report.get("verdict"), "stopped_early": sprt.get("stopped_early"),
                    "sprt": {**(block.get("sprt") or {}), "lower": sprt.get("lower"), "upper": sprt.get("upper")}})
    return out, report, problem


def _rungs(events: list[dict[str, Any]], pointer: dict[str, Any] | None) -> list[dict[str, Any]]:
    rungs: list[dict[str, Any]] = []
    stack: list[int] = []  # indexes of the rungs whose promotion is still on the history's stack
    for event in events:
        if event["event"] == "rollback":
            if stack:
                undone = rungs[stack.pop()]
                undone.update(status="rolled_back", rolled_back_at=event["at"], restored=event["name"])
            continue
        p = event["pointer"]
        vs_pred, report, _ = _recorded(p)
        inc = (report or {}).get("incumbent") or {}
        previous = p.get("previous")
        pred_spec = (p.get("benchmark") or {}).get("incumbent") or inc.get("spec")
        pred_hash = inc.get("played_weights_hash")
        if pred_hash is None and previous and previous.get("name") == pred_spec:
            pred_hash = previous.get("weights_hash")
        rungs.append({"rung": len(rungs) + 1, "name": p["name"], "kind": p.get("kind"),
                      "weights_hash": p["weights_hash"], "promoted_at": p["promoted_at"], "status": "superseded",
                      "rolled_back_at": None, "restored": None, "replaced": previous,
                      "predecessor": {"spec": pred_spec, "weights_hash": pred_hash, "rung": None},
                      "vs_predecessor": vs_pred, "policy": p.get("policy")})
        stack.append(len(rungs) - 1)
    if stack and pointer is not None and rungs[stack[-1]]["name"] == pointer["name"]:
        rungs[stack[-1]]["status"] = "current"
    return rungs


def _chain(rungs: list[dict[str, Any]]) -> str | None:
    """Link each rung to its predecessor rung and add the cumulative Elo (module docstring);
    returns the anchor spec."""
    if not rungs:
        return None
    anchor = rungs[0]["predecessor"]["spec"]
    anchor_hash = rungs[0]["predecessor"]["weights_hash"]
    for i, rung in enumerate(rungs):
        pred, rec = rung["predecessor"], rung["vs_predecessor"]
        base: dict[str, Any] | None = None
        for j in range(i - 1, -1, -1):
            earlier = rungs[j]
            if earlier["name"] == pred["spec"] and pred["weights_hash"] in (None, earlier["weights_hash"]):
                pred["rung"] = earlier["rung"]
                base = earlier["cumulative"] if earlier["cumulative"]["elo"] is not None else None
                why = None if base else f"its predecessor (rung {earlier['rung']}) has no cumulative Elo"
                break
        else:
            if pred["spec"] == anchor and pred["weights_hash"] == anchor_hash:
                base, why = {"elo": 0.0, "elo_ci95": [0.0, 0.0], "links": []}, None
            else:
                why = f"benchmarked against {pred['spec']!r}, which is neither the anchor {anchor!r} nor an earlier rung"
        if base is not None and (rec["elo"] is None or rec["elo_ci95"] is None):
            base, why = None, "its promotion recorded no Elo"
        if base is None:
            rung["cumulative"] = {"anchor": anchor, "elo": None, "elo_ci95": None, "links": [], "reason": why}
            continue
        lo, hi = rec["elo_ci95"]
        rung["cumulative"] = {"anchor": anchor, "elo": base["elo"] + rec["elo"],
                              "elo_ci95": [base["elo_ci95"][0] + lo, base["elo_ci95"][1] + hi],
                              "links": base["links"] + [rung["rung"]], "reason": None}
    return anchor


# ---------------------------------------------------------------------------- measuring
def _figures(match: dict[str, Any]) -> dict[str, Any]:
    return {k: match.get(k) for k in ("pairs", "wins", "draws", "losses", "score", "elo", "elo_ci95")}


def _from_report(report_path: str | None, name: str, opponent: str) -> dict[str, Any] | None:
    """The promotion report's own (informative) row of ``name`` against ``opponent``."""
    if not report_path:
        return None
    try:
        report = read_report(report_path)
    except RLHFError:
        return None
    for row in report.get("baselines") or []:
        if row.get("model") == name and row.get("opponent") == opponent and row.get("pairs"):
            return {**_figures(row), "source": "benchmark_report", "seed": report["settings"].get("seed")}
    return None


def _unmeasurable(registry: CheckpointRegistry, rung: dict[str, Any]) -> str | None:
    """Why the rung's promoted weights cannot be played now (None when they can)."""
    try:
        info = registry.inspect(rung["name"])
    except NotFound:
        return f"{rung['name']!r} is no longer registered"
    if info["weights_hash"] != rung["weights_hash"]:
        return (f"{rung['name']!r} is now registered with other weights ({info['weights_hash'][:16]}...) than the "
                f"promoted ones ({rung['weights_hash'][:16]}...)")
    if not info["file_present"] or not info["file_intact"]:
        return f"the model file of {rung['name']!r} is missing or changed since registration ({info['path']})"
    return None


def _measure(name: str, weights_hash: str, opponent: str, *, pairs: int, seed: int, max_workers: int,
             checkpoints_dir: Path, progress: Progress | None, cancel: Callable[[], bool] | None
             ) -> dict[str, Any]:
    t0 = time.perf_counter()
    report = benchmark_models(name, opponent, n_pairs=pairs, seed=seed, stop_early=False, baseline_pairs=0,
                              write=False, max_workers=max_workers, checkpoints_dir=checkpoints_dir,
                              progress=progress, cancel=cancel)
    played = report["candidate"]["played_weights_hashes"]
    problems = list(report["invalid_reasons"])
    if played != [weights_hash]:
        problems.append(f"played weights {[h[:16] for h in played]} instead of the promoted {weights_hash[:16]}...")
    return {**_figures(report["match"]), "name": name, "weights_hash": weights_hash, "opponent": opponent,
            "seed": seed, "engine_version": engine.ENGINE_VERSION, "ruleset": engine.RULESET,
            "pairing": report["settings"]["pairing"], "measured_at": utc_now(),
            "seconds": round(time.perf_counter() - t0, 3), "valid": not problems, "invalid_reasons": problems}


def _check_pairs(pairs: Any) -> int:
    if isinstance(pairs, bool) or not isinstance(pairs, int) or not 1 <= pairs <= MAX_PAIRS:
        raise InvalidArgument(f"pairs must be an integer in 1..{MAX_PAIRS}, got {pairs!r}")
    return pairs


def policy_ladder(checkpoints_dir: str | os.PathLike[str] = "checkpoints", *, pairs: int = DEFAULT_PAIRS,
                  seed: int = 0, max_workers: int = 1, measure: bool = True, write: bool = True,
                  progress: Progress | None = None, cancel: Callable[[], bool] | None = None) -> dict[str, Any]:
    """The ladder of every promotion in ``checkpoints_dir`` (module docstring).

    Returns ``{"schema_version", "kind": "policy_ladder", "checkpoints_dir", "path", "empty",
    "reason", "anchor", "current", "rungs", "settings", "provenance", "cumulative_method",
    "measured", "cached", "battles_played", "seconds", "generated_at"}``; each rung is
    ``{"rung", "name", "kind", "weights_hash", "promoted_at", "status", "rolled_back_at",
    "restored", "replaced", "predecessor": {"spec", "weights_hash", "rung"}, "vs_predecessor":
    {"elo", "elo_ci95", "score", "wins", "draws", "losses", "pairs", "llr", "decision", "sprt",
    "verdict", "stopped_early", "report", "sequence", "source", "report_problem"},
    "vs_baselines": {"baseline:random": {...}, "baseline:greedy": {...}}, "cumulative":
    {"anchor", "elo", "elo_ci95", "links", "reason"}, "policy"}``; a baseline entry holds
    ``pairs, wins, draws, losses, score, elo, elo_ci95, seed, source`` (``measured``,
    ``cache``, ``benchmark_report`` or null) and ``reason`` (null for ``measured`` and ``cache``;
    otherwise why this call did not measure it). ``progress(done,
    total)`` counts battles of the measurements this call plays; ``cancel()`` true stops at
    the next chunk (``cancelled``; finished measurements are kept). ``write=False`` writes
    nothing. Deterministic for a seed (the figures; not the timestamps)."""
    root = Path(os.path.abspath(checkpoints_dir))
    pairs, seed = _check_pairs(pairs), check_seed(seed)
    for flag, value in (("measure", measure), ("write", write)):
        if not isinstance(value, bool):
            raise InvalidArgument(f"{flag} must be true or false, got {value!r}")
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or not 1 <= max_workers <= MAX_WORKERS:
        raise InvalidArgument(f"max_workers must be an integer in 1..{MAX_WORKERS}, got {max_workers!r}")
    t0 = time.perf_counter()
    status = promotion_status(root)
    error = _status_error(status)
    if error is not None:
        raise error
    path = ladder_path(root)
    cache = (_read_doc(path) or {"measurements": {}})["measurements"]
    rungs = _rungs(status["history"], status["promoted"])
    anchor = _chain(rungs)
    registry = CheckpointRegistry(root)
    new: dict[str, dict[str, Any]] = {}
    todo: list[tuple[dict[str, Any], str, str]] = []
    for rung in rungs:
        rung["vs_baselines"] = {}
        blocked = None
        for opponent in BASELINES:
            key = _cache_key(rung["weights_hash"], opponent, pairs, seed)
            if key in cache:
                rung["vs_baselines"][opponent] = {**_figures(cache[key]), "seed": seed, "source": "cache",
                                                  "reason": None}
                continue
            if measure:
                blocked = blocked if blocked is not None else (_unmeasurable(registry, rung) or "")
                if not blocked:
                    todo.append((rung, opponent, key))
                    continue
            why = f"not measured: {blocked}" if blocked else "not measured (measure=False)"
            found = _from_report(rung["vs_predecessor"]["report"], rung["name"], opponent)
            rung["vs_baselines"][opponent] = {**found, "reason": f"{why}; the promotion report's {found['pairs']} "
                                                                 f"pair(s) instead"} if found else {
                **dict.fromkeys(("pairs", "wins", "draws", "losses", "score", "elo", "elo_ci95", "seed")),
                "source": None, "reason": f"{why}, and the promotion's report has no row against it"}
    total, done = 2 * pairs * len(todo), 0
    battles = 0
    for rung, opponent, key in todo:
        def tick(d: int, _t: int, base: int = done) -> None:
            if progress is not None:
                progress(base + d, total)

        result = _measure(rung["name"], rung["weights_hash"], opponent, pairs=pairs, seed=seed,
                          max_workers=max_workers, checkpoints_dir=root, progress=tick, cancel=cancel)
        done += 2 * pairs
        battles += 2 * pairs
        if result["valid"]:
            new[key] = result
            rung["vs_baselines"][opponent] = {**_figures(result), "seed": seed, "source": "measured",
                                              "reason": None}
        else:  # never cached: a degraded battle may be fixed (the file restored)
            rung["vs_baselines"][opponent] = {
                **dict.fromkeys(("pairs", "wins", "draws", "losses", "score", "elo", "elo_ci95")), "seed": seed,
                "source": None, "reason": "measurement invalid: " + "; ".join(result["invalid_reasons"])}
        if write and result["valid"]:  # saved at once: a cancelled call keeps what it finished
            _write(path, None, {key: result})
    ordered = [{k: r[k] for k in ("rung", "name", "kind", "weights_hash", "promoted_at", "status", "rolled_back_at",
                                  "restored", "replaced", "predecessor", "vs_predecessor", "vs_baselines",
                                  "cumulative", "policy")} for r in rungs]
    current = status["promoted"]["name"] if status["promoted"] else None
    ladder = {"schema_version": LADDER_SCHEMA_VERSION, "kind": "policy_ladder", "checkpoints_dir": str(root),
              "path": str(path) if write and root.is_dir() else None, "empty": not rungs,
              "reason": None if rungs else f"nothing has been promoted yet ({root / HISTORY} records no promotion); "
                                           f"the incumbent is {status['incumbent']}",
              "anchor": anchor, "current": current, "rungs": ordered,
              "settings": {"pairs": pairs, "seed": seed, "max_workers": max_workers, "measure": measure,
                           "opponents": list(BASELINES)},
              "provenance": {"engine_version": engine.ENGINE_VERSION, "ruleset": engine.RULESET,
                             "pairing": "each deal twice, seats swapped (same decks, same starting seat)",
                             "statistic": f"logistic Elo of the score, 95% interval: {INTERVAL_STATISTIC} "
                                          f"(extrarlhf.policies.benchmarking)",
                             "vs_predecessor": "recorded by the promotion's benchmark (never replayed)"},
              "cumulative_method": CUMULATIVE_METHOD, "measured": len(new), "cached": sum(
                  1 for r in rungs for b in r["vs_baselines"].values() if b["source"] == "cache"),
              "battles_played": battles, "seconds": round(time.perf_counter() - t0, 3), "generated_at": utc_now()}
    if write and root.is_dir():
        _write(path, ladder, {})
    return ladder


def format_markdown(ladder: dict[str, Any]) -> str:
    """The ladder as a markdown table (one row per rung)."""
    if ladder["empty"]:
        return f"**Empty ladder**: {ladder['reason']}\n"
    lines = [f"Anchor: `{ladder['anchor']}` (cumulative Elo 0); baselines over {ladder['settings']['pairs']} pairs, "
             f"seed {ladder['settings']['seed']}.", "",
             "| rung | name | status | predecessor | Elo vs predecessor [95% CI] | SPRT | cumulative [CI] | "
             "vs random [CI] | vs greedy [CI] |", "|---:|---|---|---|---|---|---|---|---|"]
    for r in ladder["rungs"]:
        pred = r["predecessor"]
        who = pred["spec"] + (f" (rung {pred['rung']})" if pred["rung"] else "")
        base = r["vs_baselines"]
        lines.append(f"| {r['rung']} | {r['name']} | {r['status']} | {who} | {elo_text(r['vs_predecessor'])} | "
                     f"{r['vs_predecessor']['decision'] or '-'} | {elo_text(r['cumulative'])} | "
                     f"{elo_text(base['baseline:random'])} | {elo_text(base['baseline:greedy'])} |")
    notes = [f"- rung {r['rung']} {opp}: {b['reason']}" for r in ladder["rungs"]
             for opp, b in r["vs_baselines"].items() if b["reason"]]
    notes += [f"- rung {r['rung']} cumulative: {r['cumulative']['reason']}" for r in ladder["rungs"]
              if r["cumulative"]["reason"]]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def elo_text(figure: dict[str, Any]) -> str:
    """``+123 [+80, +170]`` for a figure with ``elo`` and ``elo_ci95`` (``-`` when missing)."""
    if figure.get("elo") is None:
        return "-"
    ci = figure.get("elo_ci95")
    return f"{figure['elo']:+.0f}" + (f" [{ci[0]:+.0f}, {ci[1]:+.0f}]" if ci else "")
