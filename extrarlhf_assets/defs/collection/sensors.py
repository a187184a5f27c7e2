"""``session_groups_sensor``: finished session groups on disk become partitions and runs.

A group is *finished* when its catalog has no unfinished battle and has not changed for
``settle_seconds`` (a series still writing it is left alone). Groups made outside Dagster
(the CLI, the MCP server's ``run_series`` / ``start_battle``...) and groups that grew are
recorded by a ``battle_sessions`` run with ``n_battles: 0`` (record, never play); datasets
then follow through declarative automation. The run key is the catalog digest, so a group
is requested once per content; a group whose latest materialization already has that
digest (a Dagster collection run) is not requested again.
"""


import json
import time

import dagster as dg

from extrarlhf.errors import RLHFError

from ...metadata import upstream_metadata
from ...partitions import session_groups
from ...resources import SessionsResource
from .assets import battle_sessions, catalog_digest


def finished_groups(sessions: SessionsResource, now: float | None = None) -> dict[str, str]:
    """{group: catalog sha256} of every finished, settled group on disk."""
    now = time.time() if now is None else now
    store = sessions.store()
    out = {}
    for group in store.list_groups():
        catalog = store.group_dir(group) / "catalog.jsonl"
        if not catalog.exists() or now - catalog.stat().st_mtime < sessions.settle_seconds:
            continue
        try:
            entries = store.read_catalog(group)
        except RLHFError:  # a damaged group is reported by `check`, never recorded as finished
            continue
        if not entries or any(e["status"] == "unfinished" for e in entries):
            continue
        out[group] = catalog_digest(store.group_dir(group))
    return out


def _recorded_digest(context: dg.SensorEvaluationContext, group: str) -> str | None:
    try:
        return upstream_metadata(context, "battle_sessions", group).get("catalog_sha256")
    except dg.Failure:
        return None


@dg.sensor(
    name="session_groups_sensor",
    target=dg.AssetSelection.assets(battle_sessions),
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Turns newly finished session groups on disk (including MCP-made ones) into partitions and runs.",
)
def session_groups_sensor(context: dg.SensorEvaluationContext, sessions: SessionsResource) -> dg.SensorResult:
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    current = finished_groups(sessions)
    known = set(context.instance.get_dynamic_partitions(session_groups.name))
    new_partitions = sorted(g for g in current if g not in known)
    requests = []
    for group, digest in sorted(current.items()):
        if seen.get(group) == digest or _recorded_digest(context, group) == digest:
            continue
        requests.append(dg.RunRequest(
            run_key=f"{group}:{digest[:16]}", partition_key=group,
            run_config=dg.RunConfig(ops={"battle_sessions": {"config": {"n_battles": 0}}}),
            tags={"extrarlhf/source": "session_groups_sensor"}))
    seen.update(current)
    return dg.SensorResult(
        run_requests=requests, cursor=json.dumps(seen, sort_keys=True),
        dynamic_partitions_requests=[session_groups.build_add_request(new_partitions)] if new_partitions else [])
