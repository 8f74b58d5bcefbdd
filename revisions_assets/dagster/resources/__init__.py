"""The Dagster resources of revisions-assets: the revision IO manager (a thin dispatcher to its
parts: the resolver from a run's context to its ``RunSlice``, the loader, the committer, the
materialization), the dataset location, the Spark session, under the keys of ``keys.py``."""

import sys
from collections.abc import Mapping
from typing import Any

from revisions_assets.core.dataset import DEFAULT_COMPACT_AFTER

from .address import NotRevisionedAssetError, Role, TableAddress, UpstreamRef
from .binding import ResourceConflictError, shared_resources
from .committer import NothingToConsumeError, UnexpectedOutputError
from .io_manager import RevisionsIOManager
from .keys import IO_MANAGER_KEY, LOCATION_KEY, SPARK_KEY
from .location import DatasetLocation, project_root
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
    "ResourceConflictError",
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
    "project_root",
    "revisions_resources",
]


def revisions_resources(
    base_uri: str,
    spark: SparkSessionResource | None = None,
    *,
    compact_after: int | None = DEFAULT_COMPACT_AFTER,
) -> Mapping[str, Any]:
    """The resources every revisioned asset, check and sensor needs, under their keys
    (``revisions_io_manager``, ``revisions_location``, ``revisions_spark``).

    A relative ``base_uri`` is resolved against the project root (``project_root``), as a
    component's ``base_uri`` is; the same settings give the same resource objects, so these
    and the resources of components on the same location merge into one code location
    (different settings fail with ``ResourceConflictError``). ``compact_after``: the
    location's compaction policy (see ``DatasetLocation``)."""
    caller = sys._getframe(1)
    return shared_resources(
        base_uri,
        spark,
        compact_after,
        root=project_root(),
        origin=f"revisions_resources({base_uri!r}) at "
        f"{caller.f_code.co_filename}:{caller.f_lineno}",
        by_component=False,
    )
