"""The demo's Definitions: its assets, checks, sensors and schedule, and the resources.

The default code location declares the assets as components in ``defs/``
(``load_definitions``): each brings its checks, the first the automation sensor, all the
in-process executor. ``build_definitions`` builds the same assets with the factories, with
the code versions as arguments (the demo's script and the tests deploy one release after
another in one process), and adds those around them itself. Either way the resources are
bound in Python, so the Definitions go through ``pending_majors``: an asset whose major is
due shows it from the load on.
"""

from pathlib import Path

import dagster as dg

from revisions_assets.dagster import SparkSessionResource, pending_majors, revisions_resources

from .assets import FLIGHTS, DemoVersions, build_demo_assets
from .automation import build_demo_schedules, build_demo_sensors, build_outside_sensors
from .checks import build_demo_checks


def load_definitions(base_uri: str, spark: SparkSessionResource | None = None) -> dg.Definitions:
    """The demo location as its components declare it (``defs/``, loaded with
    ``dg.load_from_defs_folder``: the assets, their checks, the automation sensor, the
    executor), with the flights source, the schedules and the resources: its datasets under
    ``base_uri`` (a path or ``s3://`` URI), run on ``spark``."""
    declared = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
    assets = {
        a.key.path[-1]: a for a in declared.assets or () if isinstance(a, dg.AssetsDefinition)
    }
    return pending_majors(dg.Definitions.merge(declared, _around(assets, base_uri, spark)))


def build_definitions(
    base_uri: str,
    spark: SparkSessionResource | None = None,
    versions: DemoVersions | None = None,
) -> dg.Definitions:
    """The demo location with its assets built by the factories at ``versions``, and what
    the components would bring: the checks, the automation sensor, the executor."""
    assets = build_demo_assets(versions or DemoVersions())
    built = dg.Definitions(
        assets=list(assets.values()),
        asset_checks=build_demo_checks(assets),
        sensors=build_demo_sensors(assets),
        # one process, one JVM: Spark work must not be split across step processes
        executor=dg.in_process_executor,
    )
    return pending_majors(dg.Definitions.merge(built, _around(assets, base_uri, spark)))


def _around(
    assets: dict[str, dg.AssetsDefinition], base_uri: str, spark: SparkSessionResource | None
) -> dg.Definitions:
    """What the demo adds around its revisioned assets either way: the flights source, the
    schedules, the sensor of commits made outside Dagster and the resources."""
    return dg.Definitions(
        assets=[FLIGHTS],
        schedules=build_demo_schedules(assets),
        sensors=build_outside_sensors(assets),
        resources=dict(revisions_resources(base_uri, spark)),
    )
