"""``automation``: the sensor that evaluates the assets' automation conditions, running out of
the box (Dagster's implicit default sensor starts stopped, so a collected group would be
recorded and no dataset would follow).

It launches plain runs, not backfills (``emit_backfills=False``): a gated asset that skips
with a reason is a normal outcome, and a backfill would count its missing materialization
as failed (``COMPLETED_FAILED``) although every run succeeded."""

import dagster as dg

automation_sensor = dg.AutomationConditionSensorDefinition(
    "automation_sensor",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    emit_backfills=False,
    minimum_interval_seconds=30,
    description="Evaluates the automation conditions (datasets follow recorded session groups once their "
                "blocking checks passed) and launches one run per request.",
)
