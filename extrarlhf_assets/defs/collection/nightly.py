"""``nightly_campaign``: a campaign of headless battles every night (02:00 UTC) into a fresh
group ``nightly-YYYY-MM-DD``; datasets follow by automation. Stopped by default: it spends CPU
every night, so an operator turns it on (UI or ``dagster sensor start nightly_campaign``).
Size and players come from RLHF_NIGHTLY_BATTLES / RLHF_NIGHTLY_P1_MODEL / RLHF_NIGHTLY_OPPONENT.

It is a *sensor* that checks every 10 minutes, not a cron schedule: a night's group is a new
dynamic partition, and in Dagster 1.13 only a sensor hands Dagster a partition together with
its run request (``SensorResult.dynamic_partitions_requests``; a schedule returns run requests
or a skip, nothing else, and ``ScheduleDefinition.evaluate_tick`` resolves its requests with
no partition requests). The daemon adds the partition on a real tick; a preview ("Test
sensor", GraphQL ``sensorDryRun``) shows the answer and adds nothing. (A schedule would have to
add the partition itself while it is evaluated, so its "Preview tick result" once left a
partition behind that no run ever filled.)

Turned on, it starts with the *next* night: the first tick after being started records the
night that has passed in the cursor and requests nothing, so switching it on in the evening
never runs last night's campaign on the spot. To collect that night anyway, set
RLHF_NIGHTLY_CATCH_UP=1 in the daemon's environment before turning it on, or set the cursor of
the running sensor to an earlier day (UI "Set cursor", ``dagster sensor cursor nightly_campaign
--set YYYY-MM-DD``): the next tick then requests the latest night. The cursor is the last night
requested (or skipped on start), so each night is requested at most once."""


import datetime as _dt
import os

import dagster as dg

from ...partitions import session_groups
from .assets import battle_sessions

NIGHT_HOUR_UTC = 2
CATCH_UP_ENV = "RLHF_NIGHTLY_CATCH_UP"


def latest_night(now: _dt.datetime) -> _dt.datetime:
    """The latest 02:00 UTC at or before ``now`` (an aware datetime)."""
    now = now.astimezone(_dt.timezone.utc)
    night = now.replace(hour=NIGHT_HOUR_UTC, minute=0, second=0, microsecond=0)
    return night if night <= now else night - _dt.timedelta(days=1)


def nightly_request(now: _dt.datetime, cursor: str | None, known: set[str], *, first_tick: bool = False,
                    catch_up: bool = False) -> dg.SensorResult | dg.SkipReason:
    """What the tick at ``now`` asks for, given the last night requested (``cursor``), the known
    partitions, whether it is the first tick since the sensor was turned on and whether the
    operator asked to catch up on the night that has passed."""
    night = latest_night(now)
    day = night.strftime("%Y-%m-%d")
    group = f"nightly-{day}"
    upcoming = f"nightly-{(night + _dt.timedelta(days=1)):%Y-%m-%d} at {NIGHT_HOUR_UTC:02d}:00 UTC"
    if cursor == day:
        return dg.SkipReason(f"{group} is handled (requested, or passed before the sensor was turned on); "
                             f"the next night is {upcoming}")
    if first_tick and not catch_up:
        return dg.SensorResult(cursor=day, skip_reason=dg.SkipReason(
            f"turned on after the night of {day}: the first campaign is {upcoming}; to collect {group} now, "
            f"set {CATCH_UP_ENV}=1 before turning the sensor on, or once it is on set its cursor to an earlier day"))
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
    description=(
        "Every night at 02:00 UTC: collects a campaign of headless battles into a new session group "
        "`nightly-YYYY-MM-DD` (battles and players: RLHF_NIGHTLY_BATTLES, RLHF_NIGHTLY_P1_MODEL, "
        "RLHF_NIGHTLY_OPPONENT). A sensor checked every 10 minutes rather than a cron schedule because each "
        "night is a new dynamic partition, and only a sensor can hand Dagster the partition with its run "
        "request. Turned on, it starts with the next 02:00 UTC night (the night already passed is not run); "
        f"to collect that one too, set {CATCH_UP_ENV}=1 in the daemon's environment before turning it on, or "
        "once it is on set its cursor (the last night requested, YYYY-MM-DD) to an earlier day."),
)
def nightly_campaign(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    return nightly_request(_dt.datetime.now(_dt.timezone.utc), context.cursor,
                           set(context.instance.get_dynamic_partitions(session_groups.name)),
                           first_tick=context.is_first_tick_since_sensor_start,
                           catch_up=os.environ.get(CATCH_UP_ENV, "") not in ("", "0"))
