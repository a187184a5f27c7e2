"""``improve_policy``: expert iteration on the L0 loop (DESIGN section 14).

A policy that imitates ``baseline:greedy`` can at best equal it. The teacher here is stronger
than what it teaches: the search actor ``search:<rollout>?sims=N`` (adapters/search.py, 0.74
against greedy). Each round is one :func:`extrarlhf.policies.pipeline.run_pipeline` call, so every
rule of the loop (readiness, the SPRT, the promotion checks) is the pipeline's own:

1. **collect** a new session group ``<prefix>-rNN`` where the teacher plays player 1 against
   ``opponent`` (the starting player is drawn per battle, so the teacher plays first and
   second). With ``dagger`` (the default), once a policy is promoted the teacher *labels* the
   incumbent's battles instead (``search:...&play=<incumbent>``, DAgger, Ross et al. 2011):
   the search runs at every decision and its values are recorded, but the incumbent's moves
   are played, so the next student learns what to do in the states a student reaches, after
   its own mistakes, which the teacher's battles never show it;
2. **materialize** one dataset (``<prefix>``, a new version per round) from *every* round's
   group so far: the data aggregates, as in DAgger/ExIt, and each student sees more of the
   teacher than the last;
3. **train** the student on the teacher's decisions only (``imitate="search"``), with the
   search's action values as soft targets (``target="search_values"``, training/data.py): measured on
   the same 1,300 battles, 0.53 against greedy with soft targets against 0.45 with the
   one-hot choice;
4. **benchmark** the student against the incumbent (the promoted policy, else the
   first-promotion rule's ``baseline:random``) with the SPRT (at most ``n_pairs``,
   :data:`ROUND_PAIRS` by default), and **promote** it when it passes.

Round sizes grow: round 1 has ``first_battles``, round 2 ``battles_per_round``, and each later
round ``growth`` times the one before, since each round re-materializes, retrains and
re-benchmarks on everything (fixed-size rounds spend a growing share of the budget on that).
Rounds go on until ``minutes`` would be overrun. A round's duration is predicted from the last
one: collecting costs its seconds per new battle, and the rest (materializing, training and
benchmarking on *every* round's battles) its seconds per battle held (:func:`round_seconds`);
a round that does not fit (with a margin, :data:`ROUND_MARGIN`) is cut to what does, and none
is started below ``first_battles`` battles; with fine-tune rounds (below) a round that does not
fit whole is not started and the rest of the budget is theirs (measured: the loop's round 4,
25,000 new battles, bought +12 Elo in 21 minutes, its fine-tune round +37 to +52 in 20-36).
``max_rounds`` caps the count. (Measured: sizing the last round by the previous round's whole
seconds per battle let a 60-minute loop start a round at minute 55 that the
fixed cost of retraining on 8,000 battles could not finish in time.) A
student that does not pass is a normal outcome: its round records the verdict and the next
round trains on more data. A second call continues the numbering and reuses the earlier
groups.

**A teacher that grows with the network** (``guide``, opt-in, issue 51): once a policy is
promoted, each round's teacher is the network-guided search over it
(``search:<incumbent>?sims=N&guide=<guide>``, adapters/guided.py: the incumbent's prior and
value), labelling the incumbent's battles with DAgger or playing them itself without; round 1,
with nothing promoted, keeps the greedy-rollout teacher. Not measured in a whole loop yet
(docs/training.md measures the guided search alone and one round of its students).

**Fine-tune rounds** (``finetune_minutes`` > 0): imitation stops below its teacher (measured
here: the search scores 0.76 against greedy, its students about 0.6), so the last
``finetune_minutes`` of the budget go to policy-gradient rounds instead
(:func:`extrarlhf.policies.pipeline.run_finetune`): each fine-tunes with PPO against
``baseline:greedy`` for up to ``finetune_round_minutes`` on battles the native core steps
(extrarlhf/training/ppo.py), registers the best-evaluated network as ``<prefix>-rNN``, and
benchmarks it against the incumbent with the same SPRT and promotion rules. The first starts
from the incumbent, each later one from the round before's network whether or not it was
promoted: one PPO run in checkpointed pieces, so a gain too small for one round's SPRT can
grow into one the next round's detects. (Measured, docs/training.md: neither restarting every
round from the incumbent nor the chain got past the first fine-tune's promotion in the 60-minute
loop; three more rounds were H0 either way.) Each fine-tune round keeps
:data:`FINETUNE_CONTEST_SECONDS` for its benchmark, and that benchmark's SPRT may play only the
pairs that fit in what the fine-tune leaves of the budget, at the last benchmark's seconds per
pair (:func:`contest_pairs`): an SPRT between two nearly equal networks can need thousands of
pairs (3,713 in a measured loop that overran its 60 minutes by the time they took), and capped
it stops undecided, which is not a promotion. A round shorter than
:data:`MIN_FINETUNE_MINUTES` is not started. A fine-tune
round has a checkpoint and no session group; :func:`last_round` numbers a second call's
rounds after both.

``progress(stage, done, total)`` reports each round's stages (the pipeline's, prefixed
``"rNN "``), ``sprt_progress`` the running SPRT of each benchmark, ``round_done(round)``
each finished round.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, Callable

from adapters.search import DEFAULT_GUIDED_TURNS, GUIDES, search_spec

from ..core.errors import Cancelled, InvalidArgument
from ..core.names import check_name
from ..datasets.paths import check_positive_int
from ..runtime.actors import resolve_actor
from ..runtime.sessions import SessionStore
from .pipeline import PipelineProgress, SprtProgress, run_finetune, run_pipeline
from .promotion import DEFAULT_INCUMBENT, current_incumbent

DEFAULT_SIMS = 32
TEMPERATURE = 0.05
# The SPRT's cap per round. A student-vs-student pair costs about 10 ms here (1,000 pairs: 9-11 s),
# so a cap of 1,000 saved seconds and cost promotions: a 60-minute loop's last student, +21 Elo
# [+6, +36] over the incumbent and 0.617 against greedy, stopped undecided at LLR 2.66 of 2.94.
ROUND_PAIRS = 10_000
FINETUNE_ROUND_MINUTES = 8.0
# A fine-tune round shorter than this (from the round before's network) moves it too little for
# its benchmark to be worth the seconds: a 1.7-minute last round (48 updates) measured H0 after
# 3,713 pairs and overran a 60-minute loop.
MIN_FINETUNE_MINUTES = 3.0
FINETUNE_CONTEST_SECONDS = 90.0  # kept at the end of every fine-tune round for its benchmark
FINETUNE_EXPORT_SECONDS = 15.0   # a fine-tune's first evaluation, export and verification
# An imitation round is started only if ROUND_MARGIN times its predicted seconds fit: the prediction
# is linear in the battles held, and a 60-minute loop's round 5 (30,468 new battles, 70,468 held),
# predicted to fit the 23 minutes left, was still training 26 minutes later.
ROUND_MARGIN = 1.3
MIN_ROUND_PAIRS = 200            # a round's SPRT capped below this could not decide anything
_ROUND = re.compile(r"-r(\d{2,})$")


def round_groups(sessions_dir: str | os.PathLike[str], prefix: str) -> list[str]:
    """The groups of earlier rounds of ``prefix`` on disk, in round order."""
    store = SessionStore(sessions_dir)
    found = []
    for group in store.list_groups() if store.root.exists() else []:
        match = _ROUND.search(group)
        if match and group[:match.start()] == prefix:
            found.append((int(match.group(1)), group))
    return [g for _, g in sorted(found)]


def round_seconds(cost: tuple[float, float], held: int, battles: int) -> float:
    """Predicted seconds of a round adding ``battles`` to ``held``: ``cost`` is (seconds per new
    battle collected, seconds per battle held for the rest of the round)."""
    per_new, per_held = cost
    return per_new * battles + per_held * (held + battles)


def battles_that_fit(cost: tuple[float, float], held: int, battles: int, seconds: float) -> int:
    """``battles``, or fewer when :data:`ROUND_MARGIN` times the round's predicted seconds
    (:func:`round_seconds`) would not fit in ``seconds`` (0 or less: nothing fits)."""
    if ROUND_MARGIN * round_seconds(cost, held, battles) <= seconds:
        return battles
    return int((seconds / ROUND_MARGIN - cost[1] * held) / (cost[0] + cost[1]))


def benchmark_pair_seconds(result: dict[str, Any]) -> float | None:
    """Seconds per main pair of a pipeline run's benchmark (its baseline battles counted in: a
    cautious figure), or None when it had none."""
    bench, seconds = result["stages"].get("benchmark"), result["seconds"].get("benchmark")
    pairs = (bench or {}).get("match", {}).get("pairs")
    return seconds / pairs if seconds and pairs else None


def contest_pairs(seconds: float, pair_seconds: float | None, n_pairs: int, margin: float = 1.25) -> int:
    """The most pairs a benchmark may play in ``seconds`` at ``pair_seconds`` each (with a
    ``margin``), at most ``n_pairs``; ``n_pairs`` when no pair has been timed yet."""
    if pair_seconds is None:
        return n_pairs
    return max(0, min(n_pairs, int(seconds / (pair_seconds * margin))))


def improve_policy(prefix: str = "exit", *, minutes: float = 60.0, max_rounds: int = 50, first_battles: int = 150,
                   battles_per_round: int = 300, growth: float = 2.0, sims: int = DEFAULT_SIMS, rollout: str = "baseline:greedy",
                   opponent: str = "baseline:greedy", seed: int = 0, epochs: int = 6,
                   temperature: float = TEMPERATURE, dagger: bool = True, n_pairs: int = ROUND_PAIRS,
                   baseline_pairs: int = 20,
                   finetune_minutes: float = 0.0, finetune_round_minutes: float = FINETUNE_ROUND_MINUTES,
                   finetune_options: dict[str, Any] | None = None, train_options: dict[str, Any] | None = None,
                   max_workers: int = 2, sessions_dir: str | os.PathLike[str] = "sessions",
                   datasets_dir: str | os.PathLike[str] = "datasets",
                   checkpoints_dir: str | os.PathLike[str] = "checkpoints",
                   progress: PipelineProgress | None = None, sprt_progress: SprtProgress | None = None,
                   round_done: Callable[[dict[str, Any]], None] | None = None,
                   cancel: Callable[[], bool] | None = None, guide: str | None = None) -> dict[str, Any]:
    """Run expert-iteration rounds (module docstring); returns ``{"prefix", "teacher", "rounds",
    "promotions", "promoted", "incumbent", "seconds", "imitation_stopped", "stop_reason"}`` (why the
    imitation rounds stopped, why the loop did) where each round has its
    group, battles, the student's name, training top-1, benchmark verdict and whether it was
    promoted."""
    check_name(prefix, "prefix")
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not minutes > 0:
        raise InvalidArgument(f"minutes must be a positive number, got {minutes!r}")
    if isinstance(growth, bool) or not isinstance(growth, (int, float)) or not 1.0 <= growth <= 10.0:
        raise InvalidArgument(f"growth must be a number in [1, 10], got {growth!r}")
    if isinstance(finetune_minutes, bool) or not isinstance(finetune_minutes, (int, float)) \
            or not 0 <= finetune_minutes <= minutes:
        raise InvalidArgument(f"finetune_minutes must be a number in [0, minutes], got {finetune_minutes!r}")
    if isinstance(finetune_round_minutes, bool) or not isinstance(finetune_round_minutes, (int, float)) \
            or not finetune_round_minutes > 0:
        raise InvalidArgument(f"finetune_round_minutes must be a positive number, got {finetune_round_minutes!r}")
    for name, value in (("max_rounds", max_rounds), ("first_battles", first_battles),
                        ("battles_per_round", battles_per_round), ("epochs", epochs), ("n_pairs", n_pairs),
                        ("max_workers", max_workers)):
        check_positive_int(value, name)
    if not isinstance(dagger, bool):
        raise InvalidArgument(f"dagger must be true or false, got {dagger!r}")
    if guide is not None and guide not in GUIDES:
        raise InvalidArgument(f"guide must be one of {', '.join(GUIDES)} (or None: greedy-rollout teachers only), "
                              f"got {guide!r}")
    teacher = search_spec(rollout, sims)
    resolve_actor(teacher, "teacher", checkpoints_dir)  # a bad rollout spec fails here, before anything is played
    earlier = round_groups(sessions_dir, prefix)
    start_round = last_round(prefix, earlier, checkpoints_dir) + 1
    started = time.perf_counter()
    budget = 60.0 * minutes
    imitation_budget = budget - 60.0 * finetune_minutes
    rounds: list[dict[str, Any]] = []
    groups = list(earlier)
    stop_reason = f"max_rounds ({max_rounds}) reached"
    cost: tuple[float, float] | None = None  # (collect s per new battle, rest s per battle this call added)
    held = 0
    pair_seconds: float | None = None  # of the last benchmark: caps the fine-tune rounds' SPRT to their time
    for k in range(start_round, start_round + max_rounds):
        battles = first_battles if k == 1 else int(battles_per_round * growth ** (k - 2))
        elapsed = time.perf_counter() - started
        if cost is not None:
            fits = battles_that_fit(cost, held, battles, imitation_budget - elapsed)
            if fits < battles and finetune_minutes > 0:
                stop_reason = (f"time budget: {minutes:g} min, {elapsed / 60:.1f} used; the next imitation round "
                               f"({battles} battles) would not fit whole, so the rest goes to the fine-tune rounds")
                break
            if fits < first_battles:
                stop_reason = (f"time budget: {minutes:g} min, {elapsed / 60:.1f} used; a round of "
                               f"{first_battles} battles (about "
                               f"{ROUND_MARGIN * round_seconds(cost, held, first_battles) / 60:.1f} min) would not fit")
                break
            battles = fits
        group = f"{prefix}-r{k:02d}"
        incumbent = current_incumbent(checkpoints_dir)
        collector = search_spec(rollout, sims, incumbent) if dagger and incumbent != DEFAULT_INCUMBENT else teacher
        if guide is not None and incumbent != DEFAULT_INCUMBENT:  # the teacher grows with the network
            collector = search_spec(incumbent, sims, incumbent if dagger else None, guide, DEFAULT_GUIDED_TURNS)

        def stage(name: str, done: int, total: int, tag: str = f"r{k:02d}") -> None:
            if progress is not None:
                progress(f"{tag} {name}", done, total)

        t0 = time.perf_counter()
        result = run_pipeline(
            group, group, n_battles=battles, p1_model=collector, opponent=opponent, seed=seed + k,
            dataset=prefix, extra_groups=groups, imitate="search", epochs=epochs,
            train_options={"target": "search_values", "temperature": temperature, **(train_options or {})}, n_pairs=n_pairs,
            baseline_pairs=baseline_pairs, max_workers=max_workers, sessions_dir=sessions_dir,
            datasets_dir=datasets_dir, checkpoints_dir=checkpoints_dir, progress=stage,
            sprt_progress=sprt_progress, cancel=cancel)
        seconds = time.perf_counter() - t0
        collect = result["seconds"].get("collect", 0.0)
        held += battles
        cost = (collect / battles, max(seconds - collect, 0.0) / held)
        pair_seconds = benchmark_pair_seconds(result) or pair_seconds
        groups.append(group)
        stages = result["stages"]
        entry: dict[str, Any] = {"round": k, "kind": "imitation", "group": group, "battles": battles,
                                 "collector": collector,
                                 "groups_trained_on": len(groups),
                                 "incumbent": incumbent, "student": group, "seconds": round(seconds, 1),
                                 "promoted": result["promoted"], "stopped_at": result["stopped_at"]}
        if "train" in stages:
            t = stages["train"]
            entry["train"] = {"decisions": t["data"]["train"]["imitated_with_choice"],
                              "val_top1": t["final"].get("val_top1"), "weights_hash": t["weights_hash"]}
        _record(rounds, entry, result, round_done, cancel)
    imitation_stopped = stop_reason
    if finetune_minutes > 0 and not stop_reason.startswith("max_rounds"):
        stop_reason = _finetune_rounds(
            rounds, prefix, start_round + len(rounds), start_round + max_rounds, started, budget,
            finetune_round_minutes, dict(finetune_options or {}), seed=seed, n_pairs=n_pairs,
            pair_seconds=pair_seconds,
            baseline_pairs=baseline_pairs, max_workers=max_workers, checkpoints_dir=checkpoints_dir,
            progress=progress, sprt_progress=sprt_progress, round_done=round_done, cancel=cancel)
    promotions = [r["student"] for r in rounds if r["promoted"]]
    return {"prefix": prefix, "teacher": teacher, "opponent": opponent, "rounds": rounds, "promotions": promotions,
            "promoted": promotions[-1] if promotions else None, "incumbent": current_incumbent(checkpoints_dir),
            "seconds": round(time.perf_counter() - started, 1), "imitation_stopped": imitation_stopped,
            "stop_reason": stop_reason}


def last_round(prefix: str, groups: list[str], checkpoints_dir: str | os.PathLike[str]) -> int:
    """The highest round number of ``prefix`` so far: its groups' and its checkpoints' (a
    fine-tune round has a checkpoint and no group); 0 when none."""
    from ..checkpoints.registry import CheckpointRegistry

    numbers = [0]
    for name in [*groups, *CheckpointRegistry(checkpoints_dir).specs()]:
        match = _ROUND.search(name)
        if match and name[:match.start()] == prefix:
            numbers.append(int(match.group(1)))
    return max(numbers)


def _outcome(entry: dict[str, Any], result: dict[str, Any]) -> None:
    """A round's benchmark and promotion, from its pipeline summary, into ``entry``."""
    stages = result["stages"]
    if "benchmark" in stages:
        b = stages["benchmark"]
        entry["benchmark"] = {"verdict": b["verdict"], "passed": b["passed"], "incumbent": b["incumbent"],
                              **b["match"], "baselines": b["baselines"]}
    if not result["promoted"]:
        p = stages.get("promote", {})
        entry["not_promoted"] = result.get("reason") or p.get("refused") or p.get("skipped")


def _record(rounds: list[dict[str, Any]], entry: dict[str, Any], result: dict[str, Any],
            round_done: Callable[[dict[str, Any]], None] | None, cancel: Callable[[], bool] | None) -> None:
    """A finished round: its outcome into ``entry``, appended, reported; a cancel stops the loop here."""
    _outcome(entry, result)
    rounds.append(entry)
    if round_done is not None:
        round_done(entry)
    if cancel is not None and cancel():
        raise Cancelled(f"improvement cancelled after round {entry['round']}")


def _finetune_rounds(rounds: list[dict[str, Any]], prefix: str, first: int, stop: int, started: float,
                     budget: float, round_minutes: float, options: dict[str, Any], *, seed: int, n_pairs: int,
                     pair_seconds: float | None, baseline_pairs: int, max_workers: int,
                     checkpoints_dir: str | os.PathLike[str],
                     progress: PipelineProgress | None, sprt_progress: SprtProgress | None,
                     round_done: Callable[[dict[str, Any]], None] | None,
                     cancel: Callable[[], bool] | None) -> str:
    """Policy-gradient rounds until ``budget`` (module docstring); returns the stop reason."""
    student = None  # the last fine-tune round's network, promoted or not: the next round goes on from it
    for k in range(first, stop):
        left = budget - (time.perf_counter() - started)
        minutes = min(round_minutes, (left - FINETUNE_CONTEST_SECONDS - FINETUNE_EXPORT_SECONDS) / 60.0)
        # the round's SPRT may play only the pairs that fit in what the fine-tune leaves of the budget
        pairs = contest_pairs(left - 60.0 * minutes - FINETUNE_EXPORT_SECONDS, pair_seconds, n_pairs)
        if minutes < MIN_FINETUNE_MINUTES or pairs < MIN_ROUND_PAIRS:
            return (f"time budget: {budget / 60:g} min, {(budget - left) / 60:.1f} used; a fine-tune round of "
                    f"{MIN_FINETUNE_MINUTES:g} min and its benchmark ({MIN_ROUND_PAIRS} pairs or more, "
                    f"{FINETUNE_CONTEST_SECONDS:.0f} s kept) would not fit")
        incumbent = current_incumbent(checkpoints_dir)
        if incumbent == DEFAULT_INCUMBENT:
            return "nothing promoted to fine-tune (the imitation rounds promoted no policy)"
        name, base = f"{prefix}-r{k:02d}", student or incumbent

        def stage(label: str, done: int, total: int, tag: str = f"r{k:02d}") -> None:
            if progress is not None:
                progress(f"{tag} {label}", done, total)

        t0 = time.perf_counter()
        result = run_finetune(base, name, incumbent=incumbent, minutes=minutes, seed=seed + k,
                              finetune_options=options,
                              n_pairs=pairs, baseline_pairs=baseline_pairs, max_workers=max_workers,
                              checkpoints_dir=checkpoints_dir, progress=stage, sprt_progress=sprt_progress,
                              cancel=cancel)
        seconds = time.perf_counter() - t0
        pair_seconds = benchmark_pair_seconds(result) or pair_seconds
        tuned = result["stages"]["finetune"]
        student = name
        entry: dict[str, Any] = {"round": k, "kind": "finetune", "base": base, "incumbent": incumbent,
                                 "student": name, "minutes": round(minutes, 2), "max_pairs": pairs,
                                 "seconds": round(seconds, 1),
                                 "promoted": result["promoted"], "stopped_at": result["stopped_at"],
                                 "finetune": {key: tuned[key] for key in ("updates", "start", "best", "improved",
                                                                          "weights_hash")}}
        _record(rounds, entry, result, round_done, cancel)
    return "max_rounds reached (imitation and fine-tune rounds)"
