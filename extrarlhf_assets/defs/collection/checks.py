"""Checks of a session group, evaluated by ``battle_sessions`` on the partition it just
recorded: trace integrity (catalog digests and a replay sample; blocking, ERROR: a damaged
trace is an error) and degraded play (WARN: degraded battles are excluded from datasets anyway).

They are evaluated inside the asset's step rather than as separate check ops: a check of one
session group has no meaning without a partition, and Dagster's "Execute all" on a Checks tab
launches an unpartitioned run. A check that belongs to the asset's step is offered for
execution only together with a materialization of a partition (the UI says so)."""



import dagster as dg

from extrarlhf.datasets import dataset_readiness
from extrarlhf.runtime.replay import replay_battle
from extrarlhf.runtime.sessions import SessionStore

from ...partitions import PER_PARTITION_NOTE, expect_partitioned_checks, session_groups

REPLAY_SAMPLE = 3

expect_partitioned_checks()

TRACE_INTEGRITY = dg.AssetCheckSpec(
    "trace_integrity", asset="battle_sessions", partitions_def=session_groups, blocking=True,
    description="Every trace file matches its catalog sha256 and a sample of battles replays hash-for-hash on "
                "the engine. Blocking: no dataset is built from a group that fails it." + PER_PARTITION_NOTE)
NO_DEGRADED_PLAY = dg.AssetCheckSpec(
    "no_degraded_play", asset="battle_sessions", partitions_def=session_groups,
    description="No battle fell back to a baseline because a policy could not act (degraded). Degraded battles "
                "are excluded from datasets anyway, so this warns." + PER_PARTITION_NOTE)


def replay_sample(battle_ids: list[str], k: int = REPLAY_SAMPLE) -> list[str]:
    """First, middle and last finished battles: cheap and spread over the series."""
    if len(battle_ids) <= k:
        return battle_ids
    picks = {battle_ids[round(i * (len(battle_ids) - 1) / (k - 1))] for i in range(k)}
    return [b for b in battle_ids if b in picks]


def trace_integrity(store: SessionStore, group: str) -> dg.AssetCheckResult:
    readiness = dataset_readiness(group=group, sessions_dir=store.root, verify=True)
    failures = list(readiness["evidence"]["integrity_failures"])
    finished = [b.battle_id for b in store.battles(group, ("finished",))]
    replays = [replay_battle(store, group, b) for b in replay_sample(finished)]
    for r in replays:
        if not r["reproduces"]:
            failures.append(f"battle {r['battle_id']} does not replay: {r['first_divergence']}")
    return dg.AssetCheckResult(
        check_name=TRACE_INTEGRITY.name, passed=not failures, severity=dg.AssetCheckSeverity.ERROR,
        metadata={"failures": dg.MetadataValue.md("\n".join(f"- {f}" for f in failures) or "none"),
                  "verified_battles": readiness["evidence"]["eligible_battles"],
                  "replayed": dg.MetadataValue.json([{k: r[k] for k in ("battle_id", "reproduces", "decisions_checked")}
                                                     for r in replays])})


def no_degraded_play(summary: dict) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=NO_DEGRADED_PLAY.name, passed=summary["degraded"] == 0, severity=dg.AssetCheckSeverity.WARN,
        metadata={"degraded": summary["degraded"], "policy_warnings": summary["policy_warnings"],
                  "battles": summary["battles"]})
