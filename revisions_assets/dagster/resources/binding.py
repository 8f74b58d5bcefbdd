"""The revisions resources of a code location: one set per location, whoever binds it.

Dagster merges the Definitions of a code location (each component's, each module's) and
accepts two bindings of one resource key only when they are the same object. So the same
settings give the same objects here (``shared_resources``; a relative ``base_uri`` is
resolved against the project root first): components with ``base_uri`` and a project's
``revisions_resources(...)`` on the same location merge.

Different settings under our keys in one project cannot merge. The bindings made in this
process are remembered per project root, and a binding that differs from one a component
made (or a component's that differs from another binding) fails at once with both origins
and the fix (``ResourceConflictError``), before Dagster's merge fails with "different
resources with same key".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from revisions_assets.core.errors import RevisionsError

from .io_manager import RevisionsIOManager
from .keys import IO_MANAGER_KEY, LOCATION_KEY, SPARK_KEY
from .location import DatasetLocation, resolve_base_uri
from .spark import SparkSessionResource


class ResourceConflictError(RevisionsError, ValueError):
    """Two bindings of the revisions resources in one project disagree on a key's settings."""


@dataclass(frozen=True)
class _Settings:
    base_uri: str  # resolved
    compact_after: int | None
    spark: str  # the Spark resource's configuration as JSON ("" : the default resource)

    def differs(self, other: _Settings) -> str:
        """The first of our keys whose resources these settings and ``other`` give apart."""
        if (self.base_uri, self.compact_after) != (other.base_uri, other.compact_after):
            return LOCATION_KEY
        return SPARK_KEY

    def describe(self, key: str) -> str:
        if key == LOCATION_KEY:
            return (
                f"DatasetLocation(base_uri={self.base_uri!r}, compact_after={self.compact_after})"
            )
        return f"SparkSessionResource({self.spark or 'defaults'})"


_SHARED: dict[_Settings, Mapping[str, Any]] = {}
#: {project root: {origin: (settings, made by a component)}}
_BOUND: dict[Path, dict[str, tuple[_Settings, bool]]] = {}


def shared_resources(
    base_uri: str,
    spark: SparkSessionResource | None,
    compact_after: int | None,
    *,
    root: Path,
    origin: str,
    by_component: bool,
) -> Mapping[str, Any]:
    """The resources of one location (the same objects for the same settings), bound by
    ``origin`` in the project at ``root``; ResourceConflictError when they differ from a
    binding a component of that project made (or, for a component, from any binding)."""
    settings = _Settings(
        resolve_base_uri(base_uri, root),
        compact_after,
        json.dumps(spark.model_dump(mode="json"), sort_keys=True) if spark is not None else "",
    )
    bound = _BOUND.setdefault(root.resolve(), {})
    for other, (theirs, theirs_by_component) in bound.items():
        if other != origin and theirs != settings and (by_component or theirs_by_component):
            key = settings.differs(theirs)
            raise ResourceConflictError(
                f"resource key {key!r} is bound twice in the project at {root} with different "
                f"settings: {theirs.describe(key)} by {other}, and {settings.describe(key)} by "
                f"{origin}. A code location holds one resource per key, so Dagster cannot "
                "merge them. Give both the same settings (a relative base_uri is resolved "
                "against the project root), or bind the revisions resources once: base_uri "
                "in the components' defs.yaml, or revisions_resources(...) in the project "
                "(then drop base_uri from the components)."
            )
    bound[origin] = (settings, by_component)
    if settings not in _SHARED:
        location = DatasetLocation(base_uri=settings.base_uri, compact_after=compact_after)
        session = spark or SparkSessionResource()
        _SHARED[settings] = {
            LOCATION_KEY: location,
            SPARK_KEY: session,
            IO_MANAGER_KEY: RevisionsIOManager(location=location, spark=session),
        }
    return _SHARED[settings]
