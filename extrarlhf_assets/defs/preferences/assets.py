"""``preference_dataset`` -> ``reward_model``, one partition per preference pool, and the sensor
that turns pools on disk into partitions.

Each asset calls the core (extrarlhf.preferences), which writes and validates the files.
``preference_dataset`` keeps its version while the pool's judgments are unchanged (the core's
reuse). ``preference_ready`` (blocking, WARN) gates the reward model: a pool with too few
judgments, states or judges is a normal "not yet" (the reward model records why and is not
built), never a failure. ``reward_model_above_chance`` (WARN) says whether the whole 95%
interval of the held-out accuracy lies above one half. ``judges_trusted`` (WARN) says whether any
judge of the pool is flagged (gold at chance, or agreeing with nobody: the core's judge-quality
report, its table and Krippendorff's alpha as metadata); flagged judges are left out of the
dataset. ``preference_leaderboard`` rates the specs of the pool's ``A vs B`` sources
(Bradley-Terry with bootstrap intervals) and, with ``leaderboard_games``, compares them with the
engine's own order; it is skipped for a pool with no such source."""

import dagster as dg

from extrarlhf.core.errors import InvalidArgument
from extrarlhf.preferences import list_pools, materialize_preference_dataset, train_reward_model
from extrarlhf.preferences.leaderboard import preference_leaderboard
from extrarlhf.preferences.selection import judge_quality

from ...metadata import OWNERS, TRANSIENT_RETRY, bar_chart_md, gate_blockers, skipped, upstream
from ...partitions import PER_PARTITION_NOTE, expect_partitioned_checks
from ...resources import CheckpointsResource, DatasetsResource, PreferencesResource

expect_partitioned_checks()

PREFERENCE_POOLS = "preference_pools"
preference_pools = dg.DynamicPartitionsDefinition(name=PREFERENCE_POOLS)
TAGS = {"plane": "local", "domain": "preferences"}
PREFERENCE_READY = dg.AssetCheckSpec(
    "preference_ready", asset="preference_dataset", partitions_def=preference_pools, blocking=True,
    description="Enough non-tie judgments, distinct states and distinct judges to fit a reward model (warns: "
                "not ready means the pool needs more judging)." + PER_PARTITION_NOTE)
JUDGES_TRUSTED = dg.AssetCheckSpec(
    "judges_trusted", asset="preference_dataset", partitions_def=preference_pools,
    description="No judge of the pool is flagged by the gold tasks (accuracy interval below min_gold_accuracy) or "
                "by agreement (agrees with none of the judges it shares tasks with); warns, naming each flagged "
                "judge's pseudonym and reason (flagged judges are left out of the dataset)." + PER_PARTITION_NOTE)
ABOVE_CHANCE = dg.AssetCheckSpec(
    "reward_model_above_chance", asset="reward_model", partitions_def=preference_pools,
    description="The reward model's held-out accuracy has its whole 95% interval above 0.5." + PER_PARTITION_NOTE)


def _bullets(items: list[str]) -> dg.MetadataValue:
    return dg.MetadataValue.md("\n".join(f"- {b}" for b in items) or "none")


@dg.asset(
    partitions_def=preference_pools, group_name="preferences", kinds={"parquet"}, owners=OWNERS, tags=TAGS,
    code_version="2", retry_policy=TRANSIENT_RETRY, check_specs=[PREFERENCE_READY, JUDGES_TRUSTED],
    description="A pool's judgments as a versioned preference dataset (`datasets/prefs-<pool>/vN`, battle-grouped "
                "train/val/test); unchanged judgments keep their version.")
def preference_dataset(context: dg.AssetExecutionContext, preferences: PreferencesResource,
                       datasets: DatasetsResource) -> dg.MaterializeResult:
    pool = context.partition_key
    result = materialize_preference_dataset(pool, datasets_dir=datasets.path, preferences_dir=preferences.path,
                                            policy=preferences.policy())
    ready, rows, evidence = result["preference_ready"], result["rows"], result["evidence"]
    quality = judge_quality(pool, preferences_dir=preferences.path, policy=preferences.policy())
    flagged = [f"{j['judge']} ({j['kind']}): {j['reason']}" for j in quality["judges"] if j["flagged"]]
    context.log.info(f"{pool}: {'kept' if result['reused'] else 'published'} {result['dataset_id']} {rows}")
    return dg.MaterializeResult(
        metadata={
            "rows_chart": dg.MetadataValue.md(bar_chart_md("Judgments per split", [
                (k, rows[k], c) for k, c in zip(("train", "val", "test"), ("#16a34a", "#2563eb", "#9333ea"))])),
            "dataset_id": result["dataset_id"], "reused": result["reused"],
            "path": dg.MetadataValue.path(result["path"]), "dagster/row_count": sum(rows.values()),
            "judgments": evidence["judgments"], "decisive_judgments": evidence["decisive_judgments"],
            "states": evidence["states"], "judges": evidence["judges"],
            "skipped_judgments": result["skipped_judgments"],
            "left_out": dg.MetadataValue.json(result["left_out"] or {}),
            "krippendorff_alpha": dg.MetadataValue.json(quality["krippendorff_alpha"])},
        check_results=[dg.AssetCheckResult(
            check_name=PREFERENCE_READY.name, passed=bool(ready["ready"]), severity=dg.AssetCheckSeverity.WARN,
            metadata={"dataset_id": result["dataset_id"], "blockers": _bullets(ready["blockers"]),
                      "evidence": dg.MetadataValue.json(ready["evidence"]),
                      "policy": dg.MetadataValue.json(ready["policy"])}),
            dg.AssetCheckResult(
                check_name=JUDGES_TRUSTED.name, passed=not flagged, severity=dg.AssetCheckSeverity.WARN,
                metadata={"flagged": _bullets(flagged), "judges": dg.MetadataValue.md(_judges_md(quality)),
                          "krippendorff_alpha": dg.MetadataValue.json(quality["krippendorff_alpha"])})])


def _judges_md(quality: dict) -> str:
    lines = ["| judge | kind | judgments | gold right | gold 95% | agreement | flagged |", "|---|---|---|---|---|---|---|"]
    for j in quality["judges"]:
        ci = "-" if j["gold_ci95"] is None else f"[{j['gold_ci95'][0]:.2f}, {j['gold_ci95'][1]:.2f}]"
        lines.append(f"| `{j['judge']}` | {j['kind']} | {j['judgments']} | {j['gold_right']}/{j['gold_answered']} | "
                     f"{ci} | {j['agreement']} | {'yes' if j['flagged'] else 'no'} |")
    return "\n".join(lines)


# A one-asset multi_asset with can_subset: only then may a step that skips (pool not ready) emit
# neither the materialization nor its check's result.
@dg.multi_asset(
    name="reward_model", partitions_def=preference_pools, can_subset=True, check_specs=[ABOVE_CHANCE],
    specs=[dg.AssetSpec("reward_model", deps=[preference_dataset], group_name="preferences", kinds={"onnx"},
                        owners=OWNERS, tags=TAGS, code_version="1", skippable=True,
                        description="Bradley-Terry reward model of the pool's preference dataset, registered as "
                                    "checkpoint `rm-<pool>` (action_onnx, model card with held-out accuracy).")])
def reward_model(context: dg.AssetExecutionContext, preferences: PreferencesResource, datasets: DatasetsResource,
                 checkpoints: CheckpointsResource):
    pool = context.partition_key
    source = upstream(context, "preference_dataset", pool)
    blockers = gate_blockers(context, source, [PREFERENCE_READY])
    if blockers:
        yield skipped(context, blockers)
        return
    result = train_reward_model(source.metadata["dataset_id"], f"rm-{pool}", datasets_dir=datasets.path,
                                checkpoints_dir=checkpoints.path, overwrite=True, policy=preferences.policy())
    test, (low, high) = result["final"]["test"], result["final"]["test_accuracy_ci95"]
    yield dg.MaterializeResult(
        asset_key="reward_model",
        metadata={
            "accuracy_chart": dg.MetadataValue.md(bar_chart_md("Held-out accuracy (95% interval)", [
                ("low", low, "#93c5fd"), ("accuracy", test["accuracy"], "#2563eb"), ("high", high, "#93c5fd")])),
            "checkpoint": result["name"], "weights_hash": result["weights_hash"],
            "card": dg.MetadataValue.path(result["card_path"]), "dataset_id": result["dataset_id"],
            "test_accuracy": test["accuracy"], "test_pairs": test["pairs"],
            "test_accuracy_ci95": dg.MetadataValue.json([low, high]),
            "pairs": dg.MetadataValue.json(result["pairs"]), **source.provenance()},
        check_results=[dg.AssetCheckResult(
            asset_key="reward_model", check_name=ABOVE_CHANCE.name, passed=low > 0.5, severity=dg.AssetCheckSeverity.WARN,
            metadata={"accuracy": test["accuracy"], "ci95": dg.MetadataValue.json([low, high]),
                      "pairs": test["pairs"]})])


@dg.multi_asset(
    name="preference_leaderboard", partitions_def=preference_pools, can_subset=True,
    specs=[dg.AssetSpec("preference_leaderboard", deps=[preference_dataset], group_name="preferences",
                        kinds={"python"}, owners=OWNERS, tags=TAGS, code_version="1", skippable=True,
                        description="Bradley-Terry ratings of the specs of the pool's 'A vs B' sources from the kept "
                                    "judgments, with bootstrap 95% intervals, beside the engine's order of the same "
                                    "specs (leaderboard_games battle pairs per spec pair).")])
def preference_leaderboard_asset(context: dg.AssetExecutionContext, preferences: PreferencesResource,
                                 checkpoints: CheckpointsResource):
    pool = context.partition_key
    try:
        board = preference_leaderboard(pool, games=preferences.leaderboard_games, preferences_dir=preferences.path,
                                       checkpoints_dir=checkpoints.path, policy=preferences.policy())
    except InvalidArgument as exc:  # no 'A vs B' source: nothing to rank, a normal outcome
        yield skipped(context, [str(exc)])
        return
    engine = board["engine"] or {}
    yield dg.MaterializeResult(
        asset_key="preference_leaderboard",
        metadata={
            "ratings": dg.MetadataValue.md("\n".join(
                ["| spec | rating | 95% interval | judgments |", "|---|---|---|---|"]
                + [f"| `{r['spec']}` | {r['rating']} | [{r['ci95'][0]}, {r['ci95'][1]}] | {r['judgments']} |"
                   for r in board["ratings"]])),
            "order": dg.MetadataValue.json(board["order"]), "judgments": board["judgments"],
            "engine_order": dg.MetadataValue.json(engine.get("order")),
            "same_order_as_engine": engine.get("same_order"), "kendall_tau": engine.get("kendall_tau")})


@dg.sensor(name="preference_pools_sensor", minimum_interval_seconds=60,
           default_status=dg.DefaultSensorStatus.RUNNING,
           description="Adds a partition for every preference pool on disk (it requests no run: the datasets and "
                       "reward models are built from the UI when a pool has been judged).")
def preference_pools_sensor(context: dg.SensorEvaluationContext,
                            preferences: PreferencesResource) -> dg.SensorResult | dg.SkipReason:
    known = set(context.instance.get_dynamic_partitions(PREFERENCE_POOLS))
    new = sorted(p["pool"] for p in list_pools(preferences.path) if p["pool"] not in known)
    if not new:
        return dg.SkipReason(f"no new preference pool in {preferences.path}")
    return dg.SensorResult(dynamic_partitions_requests=[preference_pools.build_add_request(new)])
