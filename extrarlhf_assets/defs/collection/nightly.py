"""``nightly_campaign``: a campaign of headless battles every night (02:00 UTC) into a fresh
group ``nightly-YYYY-MM-DD``; datasets follow by automation. Stopped by default: it spends CPU
every night, so an operator turns it on (UI or ``dagster sensor start nightly_campaign``).
Size and players come from RLHF_NIGHTLY_BATTLES / RLHF_NIGHTLY_P1_MODEL / RLHF_NIGHTLY_OPPONENT.

It is a cron-driven *sensor*, not a schedule: a night's group is a new dynamic partition, and
only a sensor can hand Dagster the partition together with its run request. The daemon adds
it on a real tick; a preview ("Test sensor", GraphQL ``sensorDryRun``) shows the request and
adds nothing. (A schedule has to add the partition itself while it is evaluated, so its
"Preview tick result" left a partition behind that no run ever filled.) Once turned on, the
first tick requests the latest night that has passed; the cursor remembers the last night
requested, so each night is requested once."""


import datetime as _dt
import os

import dagster as dg

from ...partitions import session_groups
from .assets import battle_sessions

NIGHT_HOUR_UTC = 2


def latest_night(now: _dt.datetime) -> _dt.datetime:
    """The latest 02:00 UTC at or before ``now`` (an aware datetime)."""
    now = now.astimezone(_dt.timezone.utc)
    night = now.replace(hour=NIGHT_HOUR_UTC, minute=0, second=0, microsecond=0)
    return night if night <= now else night - _dt.timedelta(days=1)


def nightly_request(now: _dt.datetime, cursor: str | None, known: set[str]) -> dg.SensorResult | dg.SkipReason:
    """What the tick at ``now`` asks for, given the last night requested and the known partitions."""
    day = latest_night(now).strftime("%Y-%m-%d")
    group = f"nightly-{day}"
    if cursor == day:
        return dg.SkipReason(f"{group} was requested already; the next night starts at "
                             f"{NIGHT_HOUR_UTC:02d}:00 UTC")
    config = {"n_battles": int(os.environ.get("RLHF_NIGHTLY_BATTLES", "200")),
              "p1_model": os.environ.get("RLHF_NIGHTLY_P1_MODEL", "baseline:greedy"),
              "opponent": os.environ.get("RLHF_NIGHTLY_OPPONENT", "baseline:greedy"),
              "seed": int(day.replace("-", ""))}
    request = dg.RunRequest(run_key=group, partition_key=group,
                            run_config=dg.RunConfig(ops={"battle_sessions": {"config": config}}),
                            tags={"extrarlhf/source": "nightly_campaign"})
    return dg.SensorResult(
        run_requests=[request], cursor=day,
        dynamic_partitions_requests=[] if group in known else [session_groups.build_add_request([group])])


@dg.sensor(
    name="nightly_campaign",
    target=dg.AssetSelection.assets(battle_sessions),
    minimum_interval_seconds=600,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Collect a nightly campaign (02:00 UTC) into a new session group partition.",
)
def nightly_campaign(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    return nightly_request(_dt.datetime.now(_dt.timezone.utc), context.cursor,
                           set(context.instance.get_dynamic_partitions(session_groups.name)))
