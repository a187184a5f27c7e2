"""Checks of a session group: trace integrity (catalog digests and a replay sample) and
degraded play."""


import warnings

import dagster as dg

from extrarlhf.datasets import dataset_readiness
from extrarlhf.runtime.replay import replay_battle

from ...partitions import session_groups
from ...resources import SessionsResource
from .assets import battle_sessions

REPLAY_SAMPLE = 3


def replay_sample(battle_ids: list[str], k: int = REPLAY_SAMPLE) -> list[str]:
    """First, middle and last finished battles: cheap and spread over the series."""
    if len(battle_ids) <= k:
        return battle_ids
    picks = {battle_ids[round(i * (len(battle_ids) - 1) / (k - 1))] for i in range(k)}
    return [b for b in battle_ids if b in picks]


# Partitioned asset checks (one result per session group) are a Dagster preview feature.
warnings.filterwarnings("ignore", category=dg.PreviewWarning, message=".*partitions_def on an AssetCheckSpec.*")


@dg.asset_check(asset=battle_sessions, partitions_def=session_groups, blocking=True,
                description="Every trace file matches its catalog sha256 and a sample of battles replays "
                            "hash-for-hash on the engine.")
def trace_integrity(context: dg.AssetCheckExecutionContext, sessions: SessionsResource) -> dg.AssetCheckResult:
    group = context.partition_key
    store = sessions.store()
    readiness = dataset_readiness(group=group, sessions_dir=sessions.path, verify=True)
    failures = list(readiness["evidence"]["integrity_failures"])
    finished = [b.battle_id for b in store.battles(group, ("finished",))]
    replays = [replay_battle(store, group, b) for b in replay_sample(finished)]
    for r in replays:
        if not r["reproduces"]:
            failures.append(f"battle {r['battle_id']} does not replay: {r['first_divergence']}")
    return dg.AssetCheckResult(
        passed=not failures, severity=dg.AssetCheckSeverity.ERROR,
        metadata={"failures": dg.MetadataValue.md("\n".join(f"- {f}" for f in failures) or "none"),
                  "verified_battles": readiness["evidence"]["eligible_battles"],
                  "replayed": dg.MetadataValue.json([{k: r[k] for k in ("battle_id", "reproduces", "decisions_checked")}
                                                     for r in replays])})


@dg.asset_check(asset=battle_sessions, partitions_def=session_groups,
                description="No battle fell back to a baseline because a policy could not act (degraded). "
                            "Degraded battles are excluded from datasets anyway, so this warns.")
def no_degraded_play(context: dg.AssetCheckExecutionContext, sessions: SessionsResource) -> dg.AssetCheckResult:
    group = context.partition_key
    summary = sessions.store().compute_summary(group)
    return dg.AssetCheckResult(
        passed=summary["degraded"] == 0, severity=dg.AssetCheckSeverity.WARN,
        metadata={"degraded": summary["degraded"], "policy_warnings": summary["policy_warnings"],
                  "battles": summary["battles"]})
