"""Checks of ``v5_dataset``, evaluated by the asset on the version it just published (see
collection/checks.py for why checks of a partition live in the asset's step).

- ``v5_dataset_valid`` (blocking, ERROR): the files re-validate. A dataset that does not is
  an error.
- ``v5_policy_training_ready`` (blocking, WARN): enough verified, non-degraded battles and
  decisions for behaviour cloning. "Not yet" is a normal outcome: the run succeeds, every
  asset downstream of ``v5_dataset`` skips with the blockers (metadata.gate_blockers), and
  automation does not request them until a later version passes.
"""



import dagster as dg

from ...partitions import PER_PARTITION_NOTE, expect_partitioned_checks, session_groups

expect_partitioned_checks()

V5_POLICY_TRAINING_READY = dg.AssetCheckSpec(
    "v5_policy_training_ready", asset="v5_dataset", partitions_def=session_groups, blocking=True,
    description="V5 policy training readiness: enough verified, non-degraded battles and decisions. Gates "
                "everything downstream of the dataset (warns: not ready is a normal outcome)." + PER_PARTITION_NOTE)
V5_DATASET_VALID = dg.AssetCheckSpec(
    "v5_dataset_valid", asset="v5_dataset", partitions_def=session_groups, blocking=True,
    description="The dataset re-validates: file hashes, row counts, schemas and invariants." + PER_PARTITION_NOTE)


def _bullets(items: list[str]) -> dg.MetadataValue:
    return dg.MetadataValue.md("\n".join(f"- {b}" for b in items) or "none")


def v5_policy_training_ready(dataset_id: str, readiness: dict) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=V5_POLICY_TRAINING_READY.name, passed=bool(readiness["v5_policy_training_ready"]),
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"dataset_id": dataset_id, "blockers": _bullets(readiness["v5_policy_blockers"]),
                  "evidence": dg.MetadataValue.json(readiness["evidence"]),
                  "policy": dg.MetadataValue.json(readiness["policy"])})


def v5_dataset_valid(report: dict) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=V5_DATASET_VALID.name, passed=bool(report.get("valid")), severity=dg.AssetCheckSeverity.ERROR,
        metadata={"dataset_id": report["dataset_id"],
                  "failures": _bullets([f"[{f['code']}] {f['message']}" for f in report.get("failures") or []]),
                  "report": dg.MetadataValue.json(report)})
