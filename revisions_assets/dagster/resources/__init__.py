"""The Dagster resources of revisions-assets: the revision IO manager (the one resolver from a
run's context to a ``DatasetSlice``), the dataset location, the Spark session."""

from collections.abc import Mapping
from typing import Any

from revisions_assets.core.dataset import DEFAULT_COMPACT_AFTER

from .address import NotRevisionedAssetError, Role, TableAddress, UpstreamRef
from .io_manager import NothingToConsumeError, RevisionsIOManager, UnexpectedOutputError
from .keys import IO_MANAGER_KEY, LOCATION_KEY, SPARK_KEY
from .location import DatasetLocation
from .slice import (
    TAG_FORCE_COMPACTION,
    TAG_FORCE_MAJOR,
    TAG_UPSTREAM_HEADS,
    DatasetSlice,
    InvalidRunTagError,
    ScoringRangeError,
    UpstreamNotReadyError,
    UpstreamSlice,
)
from .spark import SparkSessionResource
from .values import UpstreamChanges

__all__ = [
    "IO_MANAGER_KEY",
    "LOCATION_KEY",
    "SPARK_KEY",
    "TAG_FORCE_COMPACTION",
    "TAG_FORCE_MAJOR",
    "TAG_UPSTREAM_HEADS",
    "DatasetLocation",
    "DatasetSlice",
    "InvalidRunTagError",
    "NotRevisionedAssetError",
    "NothingToConsumeError",
    "RevisionsIOManager",
    "Role",
    "ScoringRangeError",
    "SparkSessionResource",
    "TableAddress",
    "UnexpectedOutputError",
    "UpstreamChanges",
    "UpstreamNotReadyError",
    "UpstreamRef",
    "UpstreamSlice",
    "revisions_resources",
]


def revisions_resources(
    base_uri: str,
    spark: SparkSessionResource | None = None,
    *,
    compact_after: int | None = DEFAULT_COMPACT_AFTER,
) -> Mapping[str, Any]:
    """The resources every revisioned asset, check and sensor needs, under their default keys.
    ``compact_after``: the location's compaction policy (see ``DatasetLocation``)."""
    location = DatasetLocation(base_uri=base_uri, compact_after=compact_after)
    spark = spark or SparkSessionResource()
    return {
        LOCATION_KEY: location,
        SPARK_KEY: spark,
        IO_MANAGER_KEY: RevisionsIOManager(location=location, spark=spark),
    }
