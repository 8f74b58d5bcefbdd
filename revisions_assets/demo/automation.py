"""The demo's automation and schedules: the automation sensor of the revisions log (majors on
code changes, scores on upstream changes), the newest day of features every day, a weekly
vacuum (with the scores as consumers), and next to the automation sensor the sensor that
reports commits made outside Dagster (engine commits, purges, compactions, vacuums). The two
hand-written sensors are the documented alternative for deployments that cannot evaluate
conditions in the code server (``build_demo_log_sensors``): the same reading of the log, not
both at once."""

import dagster as dg

from revisions_assets.dagster import (
    code_version_sensor,
    daily_featurized_schedule,
    outside_commits_sensor,
    revisions_automation_sensor,
    upstream_changes_sensor,
    vacuum_job,
    weekly_vacuum_schedule,
)

from .assets import DAILY


def build_demo_sensors(assets: dict[str, dg.AssetsDefinition]) -> list[dg.SensorDefinition]:
    """One automation-condition sensor: every revisioned asset carries ``revisions_automation()``
    (the log's requests, not while in progress, not before the inputs' blocking checks passed).
    What the components bring; the outside-commits sensor is ``build_outside_sensors``."""
    return [demo_automation_sensor(assets)]


def build_outside_sensors(assets: dict[str, dg.AssetsDefinition]) -> list[dg.SensorDefinition]:
    """Next to the automation sensor, the sensor of commits made outside Dagster."""
    return [outside_commits_sensor(list(assets.values()))]


def demo_automation_sensor(
    assets: dict[str, dg.AssetsDefinition],
) -> dg.AutomationConditionSensorDefinition:
    return revisions_automation_sensor(list(assets.values()))


def build_demo_log_sensors(
    assets: dict[str, dg.AssetsDefinition],
) -> list[dg.SensorDefinition]:
    """The alternative: the code-version and upstream-changes sensors (same requests)."""
    return [
        code_version_sensor(list(assets.values())),
        upstream_changes_sensor([assets["plane_delay_risk"]]),
    ]


def build_demo_schedules(assets: dict[str, dg.AssetsDefinition]) -> list[dg.ScheduleDefinition]:
    return [
        daily_featurized_schedule([assets["plane_delay_features"]], DAILY),
        weekly_vacuum_schedule(build_demo_vacuum_job(assets)),
    ]


def build_demo_vacuum_job(assets: dict[str, dg.AssetsDefinition]) -> dg.JobDefinition:
    """Vacuum every demo dataset; the scores' positions protect what they still need."""
    return vacuum_job(list(assets.values()))
