"""``battle_sessions``: one partition per session group. Collecting plays battles with the
core's ``run_series`` (resuming the group); ``n_battles: 0`` only records a group that is
already on disk (made by the CLI, the MCP server or another run)."""


import hashlib
from pathlib import Path

import dagster as dg

from extrarlhf.runtime.series import run_series

from ...metadata import bar_chart_md
from ...partitions import session_groups
from ...resources import CheckpointsResource, SessionsResource

CATALOG_COLUMNS = [
    ("battle_id", "string"), ("index", "int"), ("status", "string"), ("seed", "int"), ("battle_tag", "string"),
    ("codename", "string"), ("winner", "int (0 draw, 1 p1, 2 p2)"), ("turns", "int"), ("decisions", "int"),
    ("degraded", "bool"), ("policy_warnings", "int"), ("omniscient_peeks", "int"), ("weights_hashes", "list[string]"),
    ("deck_ids", "list[string]"), ("files", "map[file, sha256]"),
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
        "dagster/column_schema": dg.TableSchema(columns=[dg.TableColumn(n, t) for n, t in CATALOG_COLUMNS]),
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
    kinds={"python", "jsonl"},
    description="A session group of headless battles (manifest, summary, catalog, V5 traces) under the sessions dir.",
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
                             "set n_battles > 0 in the run config to collect it")
        summary = store.write_summary(group)
    meta = session_metadata(summary, str(store.group_dir(group)))
    meta["catalog_sha256"] = catalog_digest(store.group_dir(group))
    manifest = store.read_manifest(group)
    meta["configuration"] = dg.MetadataValue.json(manifest.get("configuration") or {})
    if collected is not None:
        meta.update({"ran": collected["ran"], "skipped": collected["skipped"],
                     "battles_per_s": collected["battles_per_s"] or 0.0})
    return dg.MaterializeResult(metadata=meta)
