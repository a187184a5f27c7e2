"""``preference_dataset`` -> ``reward_model``, one partition per preference pool, and the sensor
that turns pools on disk into partitions.

Each asset calls the core (extrarlhf.preferences), which writes and validates the files.
``preference_dataset`` keeps its version while the pool's judgments are unchanged (the core's
reuse). ``preference_ready`` (blocking, WARN) gates the reward model: a pool with too few
judgments, states or judges is a normal "not yet" (the reward model records why and is not
built), never a failure. ``reward_model_above_chance`` (WARN) says whether the whole 95%
interval of the held-out accuracy lies above one half."""

import dagster as dg

from extrarlhf.preferences import list_pools, materialize_preference_dataset, train_reward_model

from ...metadata import OWNERS, TRANSIENT_RETRY, bar_chart_md, gate_blockers, skipped, upstream
from ...partitions import expect_partitioned_checks
from ...resources import CheckpointsResource, DatasetsResource, PreferencesResource

expect_partitioned_checks()

PREFERENCE_POOLS = "preference_pools"
preference_pools = dg.DynamicPartitionsDefinition(name=PREFERENCE_POOLS)
TAGS = {"plane": "local", "domain": "preferences"}
PREFERENCE_READY = dg.AssetCheckSpec(
    "preference_ready", asset="preference_dataset", partitions_def=preference_pools, blocking=True,
    description="Enough non-tie judgments, distinct states and distinct judges to fit a reward model (warns: "
                "not ready means the pool needs more judging).")
ABOVE_CHANCE = dg.AssetCheckSpec(
    "reward_model_above_chance", asset="reward_model", partitions_def=preference_pools,
    description="The reward model's held-out accuracy has its whole 95% interval above 0.5.")


def _bullets(items: list[str]) -> dg.MetadataValue:
    return dg.MetadataValue.md("\n".join(f"- {b}" for b in items) or "none")


@dg.asset(
    partitions_def=preference_pools, group_name="preferences", kinds={"parquet"}, owners=OWNERS, tags=TAGS,
    code_version="1", retry_policy=TRANSIENT_RETRY, check_specs=[PREFERENCE_READY],
    description="A pool's judgments as a versioned preference dataset (`datasets/prefs-<pool>/vN`, battle-grouped "
                "train/val/test); unchanged judgments keep their version.")
def preference_dataset(context: dg.AssetExecutionContext, preferences: PreferencesResource,
                       datasets: DatasetsResource) -> dg.MaterializeResult:
    pool = context.partition_key
    result = materialize_preference_dataset(pool, datasets_dir=datasets.path, preferences_dir=preferences.path,
                                            policy=preferences.policy())
    ready, rows, evidence = result["preference_ready"], result["rows"], result["evidence"]
    context.log.info(f"{pool}: {'kept' if result['reused'] else 'published'} {result['dataset_id']} {rows}")
    return dg.MaterializeResult(
        metadata={
            "rows_chart": dg.MetadataValue.md(bar_chart_md("Judgments per split", [
                (k, rows[k], c) for k, c in zip(("train", "val", "test"), ("#16a34a", "#2563eb", "#9333ea"))])),
            "dataset_id": result["dataset_id"], "reused": result["reused"],
            "path": dg.MetadataValue.path(result["path"]), "dagster/row_count": sum(rows.values()),
            "judgments": evidence["judgments"], "decisive_judgments": evidence["decisive_judgments"],
            "states": evidence["states"], "judges": evidence["judges"],
            "skipped_judgments": result["skipped_judgments"]},
        check_results=[dg.AssetCheckResult(
            check_name=PREFERENCE_READY.name, passed=bool(ready["ready"]), severity=dg.AssetCheckSeverity.WARN,
            metadata={"dataset_id": result["dataset_id"], "blockers": _bullets(ready["blockers"]),
                      "evidence": dg.MetadataValue.json(ready["evidence"]),
                      "policy": dg.MetadataValue.json(ready["policy"])})])


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
