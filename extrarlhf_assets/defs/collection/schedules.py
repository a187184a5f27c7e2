"""``nightly_campaign``: a campaign of headless battles every night into a fresh group
``nightly-YYYY-MM-DD`` (added as a partition); datasets follow by automation. Stopped by
default: it spends CPU every night, so an operator turns it on (UI or ``dagster schedule start``).
Size and players come from RLHF_NIGHTLY_BATTLES / RLHF_NIGHTLY_P1_MODEL / RLHF_NIGHTLY_OPPONENT."""


import os

import dagster as dg

from ...partitions import session_groups
from .assets import battle_sessions


@dg.schedule(
    name="nightly_campaign",
    cron_schedule="0 2 * * *",
    target=dg.AssetSelection.assets(battle_sessions),
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Collect a nightly campaign into a new session group partition.",
)
def nightly_campaign(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    day = context.scheduled_execution_time.strftime("%Y-%m-%d")
    group = f"nightly-{day}"
    context.instance.add_dynamic_partitions(session_groups.name, [group])
    config = {"n_battles": int(os.environ.get("RLHF_NIGHTLY_BATTLES", "200")),
              "p1_model": os.environ.get("RLHF_NIGHTLY_P1_MODEL", "baseline:greedy"),
              "opponent": os.environ.get("RLHF_NIGHTLY_OPPONENT", "baseline:greedy"),
              "seed": int(day.replace("-", ""))}
    return dg.RunRequest(run_key=group, partition_key=group,
                         run_config=dg.RunConfig(ops={"battle_sessions": {"config": config}}),
                         tags={"extrarlhf/source": "nightly_campaign"})
