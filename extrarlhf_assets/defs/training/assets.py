"""``v5_policy_checkpoint`` -> ``policy_benchmark`` -> ``promoted_policy``. Training builds only
on a dataset whose blocking checks passed (``v5_policy_training_ready``); promotion only on a
benchmark whose ``benchmark_passed`` passed. A gate that holds, an inconclusive benchmark or a
refused promotion is a normal outcome: the asset records why (an observation, the log) and
materializes nothing; the run succeeds. Not automated: training and promotion are decisions,
run by ``make run`` (job ``campaign_loop``) or from the UI.

``promoted_policy`` is one global pointer (``checkpoints/promoted.json``), so it is not
partitioned: it promotes the candidate benchmarked in the same run (or the one named in its
run config)."""


import dagster as dg

from extrarlhf.policies.benchmarking import benchmark_models
from extrarlhf.policies.ladder import elo_text
from extrarlhf.policies.promotion import PromotionRefused, current_incumbent, promote_checkpoint
from extrarlhf.training import train_policy

from ...metadata import (OWNERS, gate_blockers, line_chart_md, materialized_in_run, records_table, skipped,
                         upstream)
from ...partitions import PER_PARTITION_NOTE, session_groups
from ...resources import CheckpointsResource, DatasetsResource
from ..datasets.assets import V5_CHECKS


class TrainConfig(dg.Config):
    """``target="search_values"`` learns a search teacher's action values where the data has
    them (the one-hot choice elsewhere: the same weights as ``"choice"`` on data without
    search decisions)."""

    seed: int = 0
    epochs: int = 5
    imitate: str = "all"
    target: str = "search_values"
    temperature: float = 0.05
    hidden: int = 256
    hidden2: int = 128
    encoder: str = "flat"  # or "sets": the observation through per-card networks (training/model.py)
    embed: int = 64        # width of the sets encoder's per-card networks
    lr: float = 1e-3
    batch_size: int = 128
    threads: int = 1       # PyTorch threads while training


class BenchmarkConfig(dg.Config):
    """``incumbent`` empty: the promoted checkpoint, else ``baseline:random`` (the first-promotion rule)."""

    incumbent: str = ""
    n_pairs: int = 200
    baseline_pairs: int = 20
    seed: int = 0
    elo0: float = 0.0
    elo1: float = 10.0
    alpha: float = 0.05
    beta: float = 0.05
    max_workers: int = 1


class PromoteConfig(dg.Config):
    """``candidate`` empty: the checkpoint benchmarked by this run. ``require_current_incumbent``
    false accepts a benchmark against another reference than the current incumbent (e.g. a
    first promotion decided against ``baseline:random``)."""

    candidate: str = ""
    require_current_incumbent: bool = True


TAGS = {"plane": "local", "domain": "training"}
BENCHMARK_PASSED = dg.AssetCheckSpec(
    "benchmark_passed", asset="policy_benchmark", partitions_def=session_groups, blocking=True,
    description="The candidate passed its SPRT against the incumbent. Gates promotion: inconclusive or lost "
                "warns (a normal outcome), a benchmark made invalid by degraded battles is an error." + PER_PARTITION_NOTE)


BENCHMARK_COLUMNS = [("match", "string"), ("pairs", "int"), ("W/D/L", "string"), ("score", "float"),
                     ("Elo [95% CI]", "string")]


def _benchmark_rows(report: dict) -> list[dict]:
    """The main match, then each baseline match, by role (the specs are in the metadata beside)."""
    roles = {report["candidate"]["spec"]: "candidate", report["incumbent"]["spec"]: "incumbent"}

    def row(name: str, m: dict) -> dict:
        return {"match": name, "pairs": m["pairs"], "W/D/L": f"{m['wins']}/{m['draws']}/{m['losses']}",
                "score": None if m.get("score") is None else round(float(m["score"]), 3),
                "Elo [95% CI]": elo_text(m)}
    return [row("candidate vs incumbent", report["match"])] + [
        row(f"{roles.get(b['model'], b['model'])} vs {b['opponent']}", b) for b in report["baselines"]]


def checkpoint_name(group: str, run_id: str) -> str:
    return f"{group[:48]}-bc-{run_id[:8]}"


@dg.asset(
    partitions_def=session_groups,
    deps=["v5_dataset"],
    group_name="training",
    kinds={"onnx", "numpy"},
    owners=OWNERS,
    tags=TAGS,
    code_version="1",
    output_required=False,
    description="A v5 behaviour-cloning checkpoint trained on the group's V5 dataset (the version this run "
                "made, else the latest of the partition), registered with its model card.",
)
def v5_policy_checkpoint(context: dg.AssetExecutionContext, config: TrainConfig, datasets: DatasetsResource,
                         checkpoints: CheckpointsResource):
    source = upstream(context, "v5_dataset", context.partition_key)
    blockers = gate_blockers(context, source, V5_CHECKS)
    if blockers:
        yield skipped(context, blockers)
        return
    dataset_id = source.metadata["dataset_id"]
    name = checkpoint_name(context.partition_key, context.run.run_id)
    result = train_policy(dataset_id, name, config.seed, imitate=config.imitate, epochs=config.epochs,
                          hidden=config.hidden, hidden2=config.hidden2, encoder=config.encoder, embed=config.embed,
                          lr=config.lr, batch_size=config.batch_size, threads=config.threads,
                          target=config.target, temperature=config.temperature,
                          datasets_dir=datasets.path, checkpoints_dir=checkpoints.path,
                          policy=datasets.readiness_policy(),
                          progress=lambda done, total: context.log.debug(f"training {done}/{total}"))
    history = result["history"]
    final = result["final"]
    curves = {"train_loss": [h.get("train_loss") for h in history], "val_loss": [h.get("val_loss") for h in history],
              "train_top1": [h.get("train_top1") for h in history], "val_top1": [h.get("val_top1") for h in history]}
    context.log.info(f"trained {name} on {dataset_id}: {final}")
    if result["target_fallback"]:
        context.log.warning(f"target {config.target} fell back to choice: {result['target_fallback']['why']}")
    yield dg.MaterializeResult(metadata={
        # both charts in place on the asset's page, every epoch's numbers in the table below them
        "loss_chart": dg.MetadataValue.md(line_chart_md("Loss per epoch", {k: curves[k] for k in
                                                                           ("train_loss", "val_loss")})),
        "top1_chart": dg.MetadataValue.md(line_chart_md("Top-1 per epoch", {k: curves[k] for k in
                                                                            ("train_top1", "val_top1")})),
        "training_curves": records_table(
            [{"epoch": i + 1, **{k: None if v[i] is None else round(float(v[i]), 4) for k, v in curves.items()}}
             for i in range(len(history))], [("epoch", "int")] + [(k, "float") for k in curves]),
        "checkpoint": name,
        "dataset_id": dataset_id,
        **source.provenance(),
        "weights_hash": result["weights_hash"],
        "path": dg.MetadataValue.path(result["checkpoint"]["path"]),
        "card_path": dg.MetadataValue.path(result["card_path"]),
        "dagster/row_count": result["data"]["train"]["decisions"],
        "train_decisions": result["data"]["train"]["decisions"],
        "val_decisions": result["data"]["val"]["decisions"],
        "final": dg.MetadataValue.json(final),
        "hyperparameters": dg.MetadataValue.json(result["hyperparameters"]),
        "target_fallback": dg.MetadataValue.json(result["target_fallback"] or {}),
        "train_loss": float(final["train_loss"]),
        "train_top1": float(final["train_top1"]),
    })


@dg.asset(
    partitions_def=session_groups,
    deps=[v5_policy_checkpoint],
    group_name="training",
    kinds={"python"},
    owners=OWNERS,
    tags=TAGS,
    code_version="1",
    check_specs=[BENCHMARK_PASSED],
    description="Candidate vs incumbent on paired seeds (sides swapped): W/D/L, Elo with 95% CI, SPRT, baselines.",
)
def policy_benchmark(context: dg.AssetExecutionContext, config: BenchmarkConfig,
                     checkpoints: CheckpointsResource) -> dg.MaterializeResult:
    source = upstream(context, "v5_policy_checkpoint", context.partition_key)
    candidate = source.metadata["checkpoint"]
    incumbent = config.incumbent or current_incumbent(checkpoints.path)
    report = benchmark_models(candidate, incumbent, n_pairs=config.n_pairs, seed=config.seed, elo0=config.elo0,
                              elo1=config.elo1, alpha=config.alpha, beta=config.beta,
                              baseline_pairs=config.baseline_pairs, max_workers=config.max_workers,
                              checkpoints_dir=checkpoints.path,
                              progress=lambda done, total: context.log.debug(f"benchmark {done}/{total}"))
    m = report["match"]
    table = open(report["markdown_path"], encoding="utf-8").read()
    passed = bool(report["passed"])
    context.log.info(f"{candidate} vs {incumbent}: {report['verdict']}")
    return dg.MaterializeResult(
        metadata={
            "benchmark_table": records_table(_benchmark_rows(report), BENCHMARK_COLUMNS),  # in place, first
            "candidate": candidate, "incumbent": incumbent,
            "passed": passed, "valid": bool(report["valid"]), "verdict": report["verdict"],
            "wins": m["wins"], "draws": m["draws"], "losses": m["losses"], "pairs": m["pairs"],
            "score": float(m["score"]), "elo": float(m["elo"]) if m["elo"] is not None else 0.0,
            "elo_ci95": dg.MetadataValue.json(m["elo_ci95"]),
            "sprt": dg.MetadataValue.json(m["sprt"]),
            "dagster/row_count": report["battles_played"],
            "report_path": dg.MetadataValue.path(report["report_path"]),
            "benchmark_report": dg.MetadataValue.md(table),  # the whole report, behind "[Show Markdown]"
            **source.provenance(),
        },
        check_results=[dg.AssetCheckResult(
            check_name="benchmark_passed", passed=passed,
            severity=dg.AssetCheckSeverity.WARN if report["valid"] else dg.AssetCheckSeverity.ERROR,
            metadata={"verdict": report["verdict"],
                      "invalid_reasons": dg.MetadataValue.json(report["invalid_reasons"])})],
    )


@dg.asset(
    deps=[policy_benchmark],
    group_name="training",
    kinds={"json"},
    owners=OWNERS,
    tags=TAGS,
    code_version="1",
    output_required=False,
    description="The promoted-checkpoint pointer (`checkpoints/promoted.json`, one for the whole registry), "
                "moved to the candidate once its benchmark passed and the promotion rules accept it.",
)
def promoted_policy(context: dg.AssetExecutionContext, config: PromoteConfig, checkpoints: CheckpointsResource):
    if config.candidate:
        candidate, bench = config.candidate, {}
    else:
        source = materialized_in_run(context, "policy_benchmark")
        if source is None:
            yield skipped(context, ["this run did not benchmark a candidate: run policy_benchmark in the same run, "
                                    "or name the checkpoint in the run config (ops.promoted_policy.config.candidate)"])
            return
        blockers = gate_blockers(context, source, [BENCHMARK_PASSED])
        if blockers:
            yield skipped(context, blockers)
            return
        candidate, bench = source.metadata["candidate"], source.metadata
    try:
        promoted = promote_checkpoint(candidate, checkpoints_dir=checkpoints.path,
                                      require_current_incumbent=config.require_current_incumbent)
    except PromotionRefused as refusal:
        yield skipped(context, [f"promotion of {candidate} refused: [{r['check']}] {r['message']}"
                                for r in refusal.reasons])
        return
    pointer = promoted["promoted"]
    previous = promoted.get("previous") or {}
    context.log.info(f"promoted {candidate} (previous: {previous.get('name')})")
    yield dg.MaterializeResult(metadata={
        "promoted": candidate, "previous": previous.get("name") or "none",
        "weights_hash": pointer.get("weights_hash", ""),
        "incumbent_beaten": pointer["benchmark"]["incumbent"], "verdict": bench.get("verdict", ""),
        "pointer": dg.MetadataValue.json(pointer),
        "path": dg.MetadataValue.path(str(checkpoints.path / "promoted.json")),
    })

