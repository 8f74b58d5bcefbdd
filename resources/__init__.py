"""Dagster resources: the revision IO manager, the dataset location, the Spark session."""

from collections.abc import Mapping
from typing import Any

from .io_manager import RevisionsIOManager
from .keys import IO_MANAGER_KEY, LOCATION_KEY, SPARK_KEY
from .location import DatasetLocation
from .spark import SparkSessionResource
from .values import RevisionWrite, UpstreamChanges

__all__ = [
    "IO_MANAGER_KEY",
    "LOCATION_KEY",
    "SPARK_KEY",
    "DatasetLocation",
    "RevisionWrite",
    "RevisionsIOManager",
    "SparkSessionResource",
    "UpstreamChanges",
    "revisions_resources",
]


def revisions_resources(
    base_uri: str, spark: SparkSessionResource | None = None
) -> Mapping[str, Any]:
    """The resources every revisioned asset, check and sensor needs, under their default keys."""
    location = DatasetLocation(base_uri=base_uri)
    spark = spark or SparkSessionResource()
    return {
        LOCATION_KEY: location,
        SPARK_KEY: spark,
        IO_MANAGER_KEY: RevisionsIOManager(location=location, spark=spark),
    }
