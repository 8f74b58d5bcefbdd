"""The demo's Definitions, parameterized by location, Spark resource and code versions."""

from pathlib import Path

import dagster as dg

from resources import SparkSessionResource, revisions_resources
from revisions_assets.dagster import (
    code_version_sensor,
    daily_featurized_schedule,
    upstream_changes_sensor,
)

from .assets import DAILY, FLIGHTS, DemoVersions, build_demo_assets, build_demo_checks

#: the demo's datasets, inside the repository (git-ignored)
DEFAULT_BASE_URI = str(Path(__file__).resolve().parents[2] / "demo_data" / "datasets")


def build_definitions(
    base_uri: str = DEFAULT_BASE_URI,
    spark: SparkSessionResource | None = None,
    versions: DemoVersions | None = None,
) -> dg.Definitions:
    """Assets, checks, sensors, the daily schedule and resources of the demo location."""
    assets = build_demo_assets(versions or DemoVersions())
    revisioned = list(assets.values())
    return dg.Definitions(
        assets=[FLIGHTS, *revisioned],
        asset_checks=build_demo_checks(assets),
        sensors=[
            code_version_sensor(revisioned),
            upstream_changes_sensor([assets["plane_delay_risk"]]),
        ],
        schedules=[daily_featurized_schedule([assets["plane_delay_features"]], DAILY)],
        resources=dict(revisions_resources(base_uri, spark)),
        # one process, one JVM: Spark work must not be split across step processes
        executor=dg.in_process_executor,
    )
