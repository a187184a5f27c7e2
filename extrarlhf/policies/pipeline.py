"""``run_pipeline``: the L0 loop in one call -- collect -> materialize -> readiness -> train ->
benchmark against the incumbent -> promote.

Each stage calls the public core function that does that job alone (``run_series``,
``materialize_v5_dataset``, ``dataset_readiness``, ``train_policy``, ``benchmark_models``,
``promote_checkpoint``), so the pipeline adds sequencing and a summary, never other rules.
Gates stop the loop without raising: a dataset that is not V5-ready stops it at
``readiness`` (with the blockers); a benchmark that did not pass leaves the candidate
registered but not promoted, and the summary carries the promotion refusal with every
reason. Real errors (bad arguments, integrity failures) raise as usual.

``promotion_policy`` (a :class:`extrarlhf.policies.promotion.PromotionPolicy`, default: its defaults)
is handed to both ``benchmark_models`` and ``promote_checkpoint``; it is a core-API argument
only (the MCP ``run_pipeline`` tool never sets it).

``progress(stage, done, total)`` is called as each stage advances; ``stage`` is one of
:data:`STAGES`. ``sprt_progress(state)`` gets the benchmark's running SPRT after each chunk
of pairs (``benchmark_models``).

``extra_groups`` adds earlier session groups to the materialized dataset (the improvement
loop trains each round on every round's battles, improve.py).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from ..checkpoints.promoted import DEFAULT_INCUMBENT
from ..checkpoints.registry import CheckpointRegistry
from ..core.errors import Cancelled, InvalidArgument, RLHFError
from ..core.names import check_name
from ..runtime.series import run_series
from .benchmarking import SprtProgress, benchmark_models
from .promotion import PromotionPolicy, PromotionRefused, current_incumbent, promote_checkpoint

STAGES = ("collect", "materialize", "readiness", "train", "benchmark", "promote")
FINETUNE_STAGES = ("finetune", "benchmark", "promote")  # run_finetune's
PipelineProgress = Callable[[str, int, int], None]


def run_pipeline(group: str, name: str, *, n_battles: int = 300, p1_model: str = "baseline:greedy",
                 opponent: str = "baseline:greedy", seed: int = 0, dataset: str | None = None,
                 extra_groups: list[str] | None = None,
                 imitate: str = "all", epochs: int = 5, train_options: dict[str, Any] | None = None,
                 incumbent: str | None = None, n_pairs: int = 200, baseline_pairs: int = 20, elo0: float = 0.0,
                 elo1: float = 10.0, alpha: float = 0.05, beta: float = 0.05, promote: bool = True,
                 require_current_incumbent: bool = True, max_workers: int = 1,
                 readiness_policy: dict[str, int] | None = None,
                 promotion_policy: PromotionPolicy | None = None,
                 sessions_dir: str | os.PathLike[str] = "sessions", datasets_dir: str | os.PathLike[str] = "datasets",
                 checkpoints_dir: str | os.PathLike[str] = "checkpoints",
                 progress: PipelineProgress | None = None, sprt_progress: SprtProgress | None = None,
                 cancel: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Run the loop for session ``group`` (created or resumed) and train checkpoint ``name``;
    returns ``{"completed", "stopped_at", "promoted", "stages": {stage: result}, "seconds"}``.

    ``dataset`` names the materialized dataset (default: the group's name; each run adds a
    version). ``incumbent`` defaults to the promoted checkpoint, else ``baseline:random`` (the
    first-promotion rule, promotion.py).
    ``train_options`` passes further ``train_policy`` hyper-parameters (hidden, lr, ...)."""
    from ..datasets import dataset_readiness, materialize_v5_dataset
    from ..training import train_policy

    check_name(group, "group")
    check_name(name, "checkpoint")
    extra = [g for g in extra_groups or [] if g != group]
    for other in extra:
        check_name(other, "group")
    promotion_policy = PromotionPolicy.coerce(promotion_policy)
    dataset_name = dataset if dataset is not None else group
    if not isinstance(promote, bool):
        raise InvalidArgument(f"promote must be true or false, got {promote!r}")
    options = dict(train_options or {})
    reserved = {"dataset", "name", "seed", "imitate", "epochs", "datasets_dir", "checkpoints_dir", "policy",
                "progress"} & set(options)
    if reserved:
        raise InvalidArgument(f"train_options may not set {sorted(reserved)} (they are pipeline arguments)")
    checkpoints_dir = os.path.abspath(checkpoints_dir)
    if name in CheckpointRegistry(checkpoints_dir).specs():  # fail before collecting, not after
        raise RLHFError(f"checkpoint {name!r} already exists; give the pipeline a new checkpoint name",
                        "already_exists")
    run = _Run({"group": group, "name": name}, progress)
    summary, stages, report, timed = run.summary, run.stages, run.report, run.timed

    collected = timed("collect", lambda: run_series(
        sessions_dir, group, n_battles, p1_model=p1_model, opponent=opponent, seed=seed, max_workers=max_workers,
        progress=report("collect"), checkpoints_dir=checkpoints_dir, cancel=cancel))
    if collected["cancelled"]:
        raise Cancelled(f"the pipeline was cancelled while collecting {group} ({collected['ran']} battles played; "
                        f"the group resumes on the next run)")
    stages["collect"] = {k: collected[k] for k in ("group", "ran", "skipped", "n_battles", "battles_per_s")}
    stages["collect"]["summary"] = {k: collected["summary"].get(k) for k in ("battles", "by_status", "results",
                                                                             "decisions", "degraded",
                                                                             "policy_warnings", "weights_hashes")}

    materialized = timed("materialize", lambda: materialize_v5_dataset(
        [*extra, group], dataset_name, sessions_dir=sessions_dir, datasets_dir=datasets_dir, policy=readiness_policy,
        progress=report("materialize"), cancel=cancel))
    dataset_id = materialized["dataset_id"]
    stages["materialize"] = {k: materialized.get(k) for k in ("dataset_id", "path", "row_counts", "exclusions")}

    readiness = timed("readiness", lambda: dataset_readiness(dataset=dataset_id, datasets_dir=datasets_dir,
                                                             policy=readiness_policy))
    stages["readiness"] = {"dataset_id": dataset_id, "v5_policy_training_ready": readiness["v5_policy_training_ready"],
                           "v5_policy_blockers": readiness["v5_policy_blockers"], "evidence": readiness["evidence"]}
    report("readiness")(1, 1)
    if not readiness["v5_policy_training_ready"]:
        summary["stopped_at"] = "readiness"
        summary["reason"] = "dataset not ready for V5 policy training: " + "; ".join(readiness["v5_policy_blockers"])
        return summary

    trained = timed("train", lambda: train_policy(
        dataset_id, name, seed, imitate=imitate, epochs=epochs, datasets_dir=datasets_dir,
        checkpoints_dir=checkpoints_dir, policy=readiness_policy, progress=report("train"), **options))
    stages["train"] = {k: trained[k] for k in ("name", "weights_hash", "card_path", "dataset_id", "final", "data",
                                               "seconds", "decisions_per_s_per_epoch", "target_fallback")}

    against = incumbent if incumbent is not None else current_incumbent(checkpoints_dir)
    return _contest(run, name, against, n_pairs=n_pairs, seed=seed, elo0=elo0, elo1=elo1, alpha=alpha, beta=beta,
                    baseline_pairs=baseline_pairs, max_workers=max_workers, checkpoints_dir=checkpoints_dir,
                    sprt_progress=sprt_progress, promotion_policy=promotion_policy, cancel=cancel, promote=promote,
                    require_current_incumbent=require_current_incumbent)


class _Run:
    """A pipeline run's summary, its stages' results and seconds, and its progress reports."""

    def __init__(self, head: dict[str, Any], progress: PipelineProgress | None) -> None:
        self.stages: dict[str, Any] = {}
        self.seconds: dict[str, float] = {}
        self.summary: dict[str, Any] = {**head, "completed": False, "stopped_at": None, "promoted": False,
                                        "stages": self.stages, "seconds": self.seconds}
        self.progress = progress

    def report(self, stage: str) -> Callable[[int, int], None]:
        def call(done: int, total: int) -> None:
            if self.progress is not None:
                self.progress(stage, done, total)
        return call

    def timed(self, stage: str, fn: Callable[[], Any]) -> Any:
        self.report(stage)(0, 1)
        t0 = time.perf_counter()
        out = fn()
        self.seconds[stage] = round(time.perf_counter() - t0, 3)
        return out


def _contest(run: _Run, name: str, against: str, *, n_pairs: int, seed: int, elo0: float, elo1: float, alpha: float,
             beta: float, baseline_pairs: int, max_workers: int, checkpoints_dir: str | os.PathLike[str],
             sprt_progress: SprtProgress | None, promotion_policy: PromotionPolicy, cancel: Callable[[], bool] | None,
             promote: bool, require_current_incumbent: bool) -> dict[str, Any]:
    """The benchmark and promote stages: candidate ``name`` against ``against``."""
    summary, stages, report, timed = run.summary, run.stages, run.report, run.timed
    bench = timed("benchmark", lambda: benchmark_models(
        name, against, n_pairs=n_pairs, seed=seed, elo0=elo0, elo1=elo1, alpha=alpha, beta=beta,
        baseline_pairs=baseline_pairs, max_workers=max_workers, checkpoints_dir=checkpoints_dir,
        progress=report("benchmark"), sprt_progress=sprt_progress, policy=promotion_policy, cancel=cancel))
    stages["benchmark"] = {k: bench[k] for k in ("sequence", "report_path", "markdown_path", "valid", "passed",
                                                 "verdict", "invalid_reasons", "promotion_eligible",
                                                 "promotion_blockers", "battles_played", "battles_per_s")}
    stages["benchmark"]["incumbent"] = against
    # the check the L0 skill names (skills/extra-rlhf-l0-pipeline): the candidate played its registered weights
    stages["benchmark"]["candidate"] = {k: bench["candidate"][k] for k in ("spec", "registered_weights_hash",
                                                                           "played_weights_hash",
                                                                           "weights_hash_matches")}
    stages["benchmark"]["match"] = {k: bench["match"][k] for k in ("pairs", "wins", "draws", "losses", "score",
                                                                   "elo", "elo_ci95", "sprt")}
    stages["benchmark"]["baselines"] = [{k: b[k] for k in ("model", "opponent", "pairs", "wins", "draws", "losses",
                                                            "win_rate", "score")} for b in bench["baselines"]]

    if not promote:
        stages["promote"] = {"promoted": False, "skipped": "promote=false"}
        summary["completed"] = True
        return summary
    try:
        promoted = timed("promote", lambda: promote_checkpoint(
            name, checkpoints_dir=checkpoints_dir, require_current_incumbent=require_current_incumbent,
            policy=promotion_policy))
        stages["promote"] = {"promoted": True, "pointer": promoted["promoted"],
                             "previous": (promoted["previous"] or {}).get("name"),
                             "means": promotion_meaning(name, against, stages["benchmark"])}
        summary["promoted"] = True
    except PromotionRefused as refusal:
        stages["promote"] = {"promoted": False, "refused": str(refusal), "reasons": refusal.reasons}
    report("promote")(1, 1)
    summary["completed"] = True
    return summary


def promotion_meaning(name: str, incumbent: str, benchmark: dict[str, Any]) -> str:
    """What a promotion says about strength, in one sentence an agent cannot misread: it beat the
    incumbent, which on a first promotion is ``baseline:random``, not greedy; the baseline scores
    say how it fares against each baseline. The benchmark also plays the incumbent against each
    baseline (its reference rows): those are named as the incumbent's, never as the candidate's."""
    match = benchmark["match"]
    said = f"{name} beat the incumbent {incumbent} (score {match['score']:.2f} over {match['pairs']} pairs)"
    if incumbent == DEFAULT_INCUMBENT:
        said += "; this is the first promotion, so the bar was the random baseline"
    rows = benchmark["baselines"]
    own = [b for b in rows if b["model"] == name]
    reference = [b for b in rows if b["model"] != name]
    if own:
        said += "; it scores " + ", ".join(f"{b['score']:.2f} against {b['opponent']} ({b['pairs']} pairs)"
                                           for b in own)
    weaker = [b["opponent"] for b in own if b["score"] < 0.5]
    if weaker:
        said += f": it does not beat {', '.join(weaker)}"
    for model in dict.fromkeys(b["model"] for b in reference):
        said += f"; for reference, the incumbent {model} scores " + ", ".join(
            f"{b['score']:.2f} against {b['opponent']} ({b['pairs']} pairs)" for b in reference if b["model"] == model)
    return said


def run_finetune(base: str, name: str, *, minutes: float = 10.0, seed: int = 0,
                 finetune_options: dict[str, Any] | None = None, n_pairs: int = 200, baseline_pairs: int = 20,
                 elo0: float = 0.0, elo1: float = 10.0, alpha: float = 0.05, beta: float = 0.05,
                 promote: bool = True, max_workers: int = 1, promotion_policy: PromotionPolicy | None = None,
                 incumbent: str | None = None,
                 checkpoints_dir: str | os.PathLike[str] = "checkpoints", progress: PipelineProgress | None = None,
                 sprt_progress: SprtProgress | None = None,
                 cancel: Callable[[], bool] | None = None) -> dict[str, Any]:
    """The loop's other way to a candidate: fine-tune checkpoint ``base`` with policy gradient
    (``finetune_policy``) into ``name``, then benchmark it against ``incumbent`` (default
    ``base``) and promote it when it passes, as :func:`run_pipeline` does; stages ``finetune``,
    ``benchmark``, ``promote``."""
    from ..training.finetune import finetune_policy

    check_name(name, "checkpoint")
    if not isinstance(promote, bool):
        raise InvalidArgument(f"promote must be true or false, got {promote!r}")
    promotion_policy = PromotionPolicy.coerce(promotion_policy)
    checkpoints_dir = os.path.abspath(checkpoints_dir)
    against = base if incumbent is None else incumbent
    run = _Run({"base": base, "name": name, "incumbent": against}, progress)
    tuned = run.timed("finetune", lambda: finetune_policy(
        base, name, seed, minutes=minutes, checkpoints_dir=checkpoints_dir,
        progress=lambda done, _figures: run.report("finetune")(done, 0), **(finetune_options or {})))
    run.stages["finetune"] = {k: tuned[k] for k in ("name", "weights_hash", "card_path", "base", "start", "best",
                                                    "improved", "updates", "seconds")}
    if cancel is not None and cancel():
        raise Cancelled(f"the fine-tune of {base} into {name} was cancelled before its benchmark")
    return _contest(run, name, against, n_pairs=n_pairs, seed=seed, elo0=elo0, elo1=elo1, alpha=alpha, beta=beta,
                    baseline_pairs=baseline_pairs, max_workers=max_workers, checkpoints_dir=checkpoints_dir,
                    sprt_progress=sprt_progress, promotion_policy=promotion_policy, cancel=cancel, promote=promote,
                    require_current_incumbent=True)
