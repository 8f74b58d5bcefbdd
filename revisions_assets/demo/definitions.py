"""The demo's Definitions: its assets, checks, sensors and schedule, and the resources.

The default code location declares the assets as components in ``defs/``
(``load_definitions``); ``build_definitions`` builds the same assets with the factories,
with the code versions as arguments (the demo's script and the tests deploy one release
after another in one process).
"""

from collections.abc import Mapping
from pathlib import Path

import dagster as dg

from revisions_assets.dagster import SparkSessionResource, revisions_resources

from .assets import FLIGHTS, DemoVersions, build_demo_assets
from .automation import build_demo_schedules, build_demo_sensors
from .checks import build_demo_checks


def load_definitions(base_uri: str, spark: SparkSessionResource | None = None) -> dg.Definitions:
    """The demo location as its components declare it (``defs/``, loaded with
    ``dg.load_from_defs_folder``), with its checks, automation and resources: its datasets
    under ``base_uri`` (a path or ``s3://`` URI), run on ``spark``."""
    declared = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
    assets = {
        a.key.path[-1]: a for a in declared.assets or () if isinstance(a, dg.AssetsDefinition)
    }
    return dg.Definitions.merge(declared, _around(assets, base_uri, spark))


def build_definitions(
    base_uri: str,
    spark: SparkSessionResource | None = None,
    versions: DemoVersions | None = None,
) -> dg.Definitions:
    """The demo location with its assets built by the factories at ``versions``."""
    assets = build_demo_assets(versions or DemoVersions())
    return dg.Definitions.merge(
        dg.Definitions(assets=list(assets.values())), _around(assets, base_uri, spark)
    )


def _around(
    assets: Mapping[str, dg.AssetsDefinition], base_uri: str, spark: SparkSessionResource | None
) -> dg.Definitions:
    """Everything of the location but its revisioned assets: the flights source, the checks,
    sensors, schedules, resources and the executor."""
    return dg.Definitions(
        assets=[FLIGHTS],
        asset_checks=build_demo_checks(assets),
        sensors=build_demo_sensors(assets),
        schedules=build_demo_schedules(assets),
        resources=dict(revisions_resources(base_uri, spark)),
        # one process, one JVM: Spark work must not be split across step processes
        executor=dg.in_process_executor,
    )
