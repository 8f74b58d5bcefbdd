"""The demo's sensors and schedule: majors on code changes, scores on upstream changes,
the newest day of features every day."""

import dagster as dg

from revisions_assets.dagster import (
    code_version_sensor,
    daily_featurized_schedule,
    upstream_changes_sensor,
)

from .assets import DAILY


def build_demo_sensors(assets: dict[str, dg.AssetsDefinition]) -> list[dg.SensorDefinition]:
    return [
        code_version_sensor(list(assets.values())),
        upstream_changes_sensor([assets["plane_delay_risk"]]),
    ]


def build_demo_schedules(assets: dict[str, dg.AssetsDefinition]) -> list[dg.ScheduleDefinition]:
    return [daily_featurized_schedule([assets["plane_delay_features"]], DAILY)]
