"""``battle_sessions``: one partition per session group. Collecting plays battles with the
core's ``run_series`` (resuming the group); ``n_battles: 0`` only records a group that is
already on disk (made by the CLI, the MCP server or another run)."""


import hashlib
from pathlib import Path

import dagster as dg

from extrarlhf.runtime.series import run_series

from ...metadata import OWNERS, TRANSIENT_RETRY, bar_chart_md
from ...partitions import session_groups
from ...resources import CheckpointsResource, SessionsResource
from .checks import NO_DEGRADED_PLAY, TRACE_INTEGRITY, no_degraded_play, trace_integrity

CATALOG_COLUMNS = [  # (name, type, description) of one catalog.jsonl line (DESIGN section 6)
    ("battle_id", "string", "battle folder name, unique in the group"),
    ("index", "int", "position of the battle in the series"),
    ("status", "string", "finished, unfinished or crashed"),
    ("seed", "int", "engine seed of the battle (replays it)"),
    ("battle_tag", "string", "kind of players: rl-vs-bot, human-vs-bot, model-vs-model..."),
    ("codename", "string", "public codename of the P1 policy"),
    ("winner", "int", "0 draw, 1 P1, 2 P2"),
    ("turns", "int", "turns played"),
    ("decisions", "int", "decisions recorded in the V5 trace"),
    ("degraded", "bool", "a policy could not act and a baseline played for it"),
    ("policy_warnings", "int", "warnings raised by the policies (timeouts, fallbacks)"),
    ("omniscient_peeks", "int", "times a policy saw hidden information (excluded from datasets)"),
    ("weights_hashes", "list[string]", "weights_hash of every model that played"),
    ("deck_ids", "list[string]", "deck of each side"),
    ("files", "map[file, sha256]", "digest of every trace file (checked by trace_integrity)"),
]


class CampaignConfig(dg.Config):
    """Run config of a collection run. ``n_battles`` 0 records the group as it is on disk."""

    n_battles: int = 0
    p1_model: str = "baseline:greedy"
    opponent: str = "baseline:greedy"
    seed: int = 0
    max_workers: int = 1


def catalog_digest(group_dir) -> str:
    """sha256 of a group's catalog: changes whenever a battle starts or finishes."""
    path = Path(group_dir) / "catalog.jsonl"
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def session_metadata(summary: dict, group_dir: str) -> dict:
    results = summary["results"]
    readiness = summary.get("readiness") or {}
    blockers = readiness.get("v5_policy_blockers") or []
    return {
        "dagster/row_count": summary["battles"],
        "dagster/column_schema": dg.TableSchema(columns=[dg.TableColumn(n, t, description=d)
                                                         for n, t, d in CATALOG_COLUMNS]),
        "path": dg.MetadataValue.path(group_dir),
        "battles": summary["battles"],
        "by_status": dg.MetadataValue.json(summary["by_status"]),
        "p1_wins": results["p1_wins"], "draws": results["draws"], "p2_wins": results["p2_wins"],
        "decisions": summary["decisions"],
        "degraded": summary["degraded"],
        "policy_warnings": summary["policy_warnings"],
        "eligible_battles": summary["eligible_battles"],
        "v5_policy_training_ready": bool(readiness.get("v5_policy_training_ready")),
        "readiness_blockers": dg.MetadataValue.md("\n".join(f"- {b}" for b in blockers) or "none"),
        "results_chart": dg.MetadataValue.md(bar_chart_md("P1 results (W/D/L)", [
            ("P1 wins", results["p1_wins"], "#16a34a"), ("draws", results["draws"], "#a3a3a3"),
            ("P1 losses", results["p2_wins"], "#dc2626"), ("degraded", summary["degraded"], "#f59e0b")])),
    }


@dg.asset(
    partitions_def=session_groups,
    group_name="collection",
    pool="collection_cpu",
    kinds={"python", "jsonl"},
    owners=OWNERS,
    tags={"plane": "local", "domain": "collection"},
    code_version="1",  # bump when what a recording writes or reports changes
    # an exception inside the live step (a transient I/O error) is retried here; a killed worker is
    # not an exception: the run fails and the daemon's run retry (deploy/dagster.yaml) resumes the series
    retry_policy=TRANSIENT_RETRY,
    check_specs=[TRACE_INTEGRITY, NO_DEGRADED_PLAY],
    description="A session group of headless battles (manifest, summary, catalog, V5 traces) under the sessions "
                "dir; its checks (trace integrity, degraded play) are evaluated on every recording.",
)
def battle_sessions(context: dg.AssetExecutionContext, config: CampaignConfig, sessions: SessionsResource,
                    checkpoints: CheckpointsResource) -> dg.MaterializeResult:
    group = context.partition_key
    store = sessions.store()
    collected = None
    if config.n_battles > 0:
        context.log.info(f"collecting {config.n_battles} battles into {group!r}: {config.p1_model} vs {config.opponent}")
        collected = run_series(sessions.path, group, config.n_battles, p1_model=config.p1_model,
                               opponent=config.opponent, seed=config.seed, max_workers=config.max_workers,
                               checkpoints_dir=checkpoints.path,
                               progress=lambda done, total: context.log.debug(f"battles {done}/{total}"))
        summary = collected["summary"]
    else:
        if group not in store.list_groups():
            raise dg.Failure(f"session group {group!r} is not on disk under {sessions.path}; "
                             "set n_battles > 0 in the run config to collect it", allow_retries=False)
        summary = store.write_summary(group)
    meta = session_metadata(summary, str(store.group_dir(group)))
    meta["catalog_sha256"] = catalog_digest(store.group_dir(group))
    manifest = store.read_manifest(group)
    meta["configuration"] = dg.MetadataValue.json(manifest.get("configuration") or {})
    if collected is not None:
        meta.update({"ran": collected["ran"], "skipped": collected["skipped"],
                     "battles_per_s": collected["battles_per_s"] or 0.0})
    return dg.MaterializeResult(metadata=meta, check_results=[trace_integrity(store, group), no_degraded_play(summary)])
