"""The demo's Definitions: its assets, checks, sensors and schedule, and the resources,
parameterized by location, Spark resource and code versions."""

from pathlib import Path

import dagster as dg

from resources import SparkSessionResource, revisions_resources

from .assets import FLIGHTS, DemoVersions, build_demo_assets
from .automation import build_demo_schedules, build_demo_sensors
from .checks import build_demo_checks

#: the demo's datasets, inside the repository (git-ignored)
DEFAULT_BASE_URI = str(Path(__file__).resolve().parents[2] / "demo_data" / "datasets")


def build_definitions(
    base_uri: str = DEFAULT_BASE_URI,
    spark: SparkSessionResource | None = None,
    versions: DemoVersions | None = None,
) -> dg.Definitions:
    """Assets, checks, sensors, the daily schedule and resources of the demo location."""
    assets = build_demo_assets(versions or DemoVersions())
    return dg.Definitions(
        assets=[FLIGHTS, *assets.values()],
        asset_checks=build_demo_checks(assets),
        sensors=build_demo_sensors(assets),
        schedules=build_demo_schedules(assets),
        resources=dict(revisions_resources(base_uri, spark)),
        # one process, one JVM: Spark work must not be split across step processes
        executor=dg.in_process_executor,
    )
