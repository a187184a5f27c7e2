"""``session_groups_sensor``: finished session groups on disk become partitions and runs.

A group is *finished* when its catalog has no unfinished battle and has not changed for
``settle_seconds`` (a series still writing it is left alone). Groups made outside Dagster
(the CLI, the MCP server's ``run_series`` / ``start_battle``...) and groups that grew are
recorded by a ``battle_sessions`` run with ``n_battles: 0`` (record, never play); datasets
then follow through declarative automation. The run key is the catalog digest, so a group
is requested once per content; a group whose latest materialization already has that
digest (a Dagster collection run) is not requested again.

Cost per tick: the cursor keeps, per group, the catalog's ``(mtime_ns, size)`` when it was
last read and what was found (its digest, or that it was still unfinished). A tick stats
every catalog and reads, hashes and looks up in the instance only the catalogs whose stat
changed, so unchanged groups cost one ``stat`` each however many there are. At most
``max_runs_per_tick`` runs are requested per tick (oldest changes first); the groups left
over are not marked seen and are picked up by the next ticks.
"""


import json
import os
import time
from typing import Any

import dagster as dg

from extrarlhf.core.errors import RLHFError

from ...partitions import session_groups
from ...resources import SessionsResource
from .assets import battle_sessions, catalog_digest


def _changed_catalogs(sessions: SessionsResource, seen: dict[str, Any], now: float) -> list[tuple[int, str, dict]]:
    """(mtime_ns, group, stat) of every settled catalog whose stat differs from the cursor's."""
    changed = []
    try:
        entries = list(os.scandir(sessions.path))
    except FileNotFoundError:
        return []
    for entry in entries:
        if not entry.is_dir() or entry.name.startswith("."):
            continue
        try:
            st = os.stat(os.path.join(entry.path, "catalog.jsonl"))
        except OSError:
            continue
        stat = {"m": st.st_mtime_ns, "s": st.st_size}
        previous = seen.get(entry.name)
        if isinstance(previous, dict) and previous.get("m") == stat["m"] and previous.get("s") == stat["s"]:
            continue
        if now - st.st_mtime < sessions.settle_seconds:
            continue  # still being written: looked at again once it settles
        changed.append((st.st_mtime_ns, entry.name, stat))
    return sorted(changed)


def _finished_digest(sessions: SessionsResource, group: str) -> str | None:
    """The catalog digest of a finished group, None while a battle is unfinished or the group is unreadable."""
    store = sessions.store()
    try:
        if not (store.group_dir(group) / "manifest.json").is_file():
            return None
        entries = store.read_catalog(group)
    except RLHFError:  # a damaged group (or a bad name) is reported by `check`, never recorded as finished
        return None
    if not entries or any(e["status"] == "unfinished" for e in entries):
        return None
    return catalog_digest(store.group_dir(group))


def _recorded_digest(context: dg.SensorEvaluationContext, group: str) -> str | None:
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=battle_sessions.key, asset_partitions=[group]), limit=1).records
    if not records:
        return None
    value = records[0].asset_materialization.metadata.get("catalog_sha256")
    return getattr(value, "value", value)


@dg.sensor(
    name="session_groups_sensor",
    target=dg.AssetSelection.assets(battle_sessions),
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Turns newly finished session groups on disk (including MCP-made ones) into partitions and runs; "
                "reads only catalogs that changed since the last tick, at most max_runs_per_tick runs per tick.",
)
def session_groups_sensor(context: dg.SensorEvaluationContext, sessions: SessionsResource) -> dg.SensorResult:
    seen: dict[str, Any] = json.loads(context.cursor) if context.cursor else {}
    requests: list[dg.RunRequest] = []
    for _, group, stat in _changed_catalogs(sessions, seen, time.time()):
        if len(requests) >= sessions.max_runs_per_tick:
            break  # left unseen: the next tick takes it
        digest = _finished_digest(sessions, group)
        previous = seen.get(group)
        before = previous.get("d") if isinstance(previous, dict) else previous  # older cursors: {group: digest}
        seen[group] = {**stat, "d": digest}
        if digest is None or before == digest:
            continue
        if _recorded_digest(context, group) == digest:
            continue
        requests.append(dg.RunRequest(
            run_key=f"{group}:{digest[:16]}", partition_key=group,
            run_config=dg.RunConfig(ops={"battle_sessions": {"config": {"n_battles": 0}}}),
            tags={"extrarlhf/source": "session_groups_sensor"}))
    new_partitions = []
    if requests:
        known = set(context.instance.get_dynamic_partitions(session_groups.name))
        new_partitions = sorted({r.partition_key for r in requests} - known)
    return dg.SensorResult(
        run_requests=requests, cursor=json.dumps(seen, sort_keys=True, separators=(",", ":")),
        dynamic_partitions_requests=[session_groups.build_add_request(new_partitions)] if new_partitions else [])
