"""The demo's sensors and schedules: majors on code changes, scores on upstream changes,
the newest day of features every day, a weekly vacuum (with the scores as consumers)."""

import dagster as dg

from revisions_assets.dagster import (
    code_version_sensor,
    daily_featurized_schedule,
    upstream_changes_sensor,
    vacuum_job,
    weekly_vacuum_schedule,
)

from .assets import DAILY


def build_demo_sensors(assets: dict[str, dg.AssetsDefinition]) -> list[dg.SensorDefinition]:
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
