"""The revisions resources of a components project, declared once in YAML.

``RevisionsResourcesComponent`` says where the project's datasets live and which Spark every
revisioned asset of the project runs on (``dg scaffold defs
revisions_assets.dagster.RevisionsResourcesComponent revisions``)::

    type: revisions_assets.dagster.RevisionsResourcesComponent
    attributes:
      base_uri: datasets
      spark_config:
        spark.sql.shuffle.partitions: "4"

It binds ``revisions_io_manager``, ``revisions_location`` and ``revisions_spark`` for the
project. The asset components find it in the defs folder and run on it: their own
``base_uri``, when they keep the scaffold's, must name the same location
(``ResourceConflictError`` otherwise, naming both). Without it, an asset component with a
``base_uri`` binds the resources itself on the default Spark settings, and one without
leaves them to the project (``revisions_resources(...)`` in Python).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster.components.scaffold.scaffold import ScaffoldRequest, scaffold_with

from revisions_assets.core.dataset import DEFAULT_COMPACT_AFTER

from ..resources.binding import ResourceConflictError, shared_resources
from ..resources.location import resolve_base_uri
from ..resources.spark import SparkSessionResource


class RevisionsResourcesScaffolder(dg.Scaffolder):
    """The project's resources: its datasets under ``datasets/``, Spark's shuffle sized for a
    small machine."""

    def scaffold(self, request: ScaffoldRequest) -> None:
        dg.scaffold_component(
            request,
            {
                "base_uri": "datasets",
                "spark_config": {"spark.sql.shuffle.partitions": "4"},
            },
        )


@scaffold_with(RevisionsResourcesScaffolder)
@dataclass(kw_only=True)
class RevisionsResourcesComponent(dg.Component, dg.Resolvable):
    """The revisions resources of the project (``revisions_resources``): the datasets'
    location and the Spark session of every revisioned asset, in one ``defs.yaml``."""

    #: the datasets' location: a path (relative: to the project root), file://… or s3://…
    base_uri: str
    #: compact a table after a commit that leaves more revisions than this on its base
    compact_after: int | None = DEFAULT_COMPACT_AFTER
    #: Spark settings of the runs' sessions (``spark.sql.shuffle.partitions``, memory, …)
    spark_config: dict[str, Any] | None = None
    #: Spark master URL (default: ``SPARK_MASTER`` or ``local[*]``)
    master: str | None = None
    #: Spark Connect URL (default: ``SPARK_REMOTE``; wins over master)
    remote: str | None = None
    app_name: str = "revisions-assets"
    #: Spark's own log at ERROR in the sessions the runs start (false: Spark's defaults)
    quiet_logs: bool = True

    def spark(self) -> SparkSessionResource:
        return SparkSessionResource(
            spark_config={k: str(v) for k, v in (self.spark_config or {}).items()},
            master=self.master,
            remote=self.remote,
            app_name=self.app_name,
            quiet_logs=self.quiet_logs,
        )

    def resources(self, context: dg.ComponentLoadContext) -> Mapping[str, Any]:
        """The resources it binds (the same objects on every call)."""
        return shared_resources(
            self.base_uri,
            self.spark(),
            self.compact_after,
            root=context.project_root,
            origin=f"the RevisionsResourcesComponent of the project ({self.base_uri!r})",
            by_component=True,
        )

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        return dg.Definitions(resources=self.resources(context))


def project_resources(
    context: dg.ComponentLoadContext, component: str, base_uri: str | None
) -> tuple[Mapping[str, Any] | None, bool]:
    """The revisions resources the asset component ``component`` (its ``base_uri``) runs on,
    and whether it binds them itself: the project's ``RevisionsResourcesComponent``'s, else
    its own ``base_uri``'s (default Spark settings), else None (the project binds them)."""
    found = context.component_tree.get_all_components(of_type=RevisionsResourcesComponent)
    if found:
        project = found[0]
        root = context.project_root
        if base_uri is not None and resolve_base_uri(base_uri, root) != resolve_base_uri(
            project.base_uri, root
        ):
            raise ResourceConflictError(
                f"component {component} ({context.path}/defs.yaml) has base_uri {base_uri!r}, "
                f"but the project's RevisionsResourcesComponent binds {project.base_uri!r}: "
                "a code location holds one location of datasets. Drop base_uri from the "
                "component (it runs on the project's resources) or give both the same."
            )
        return project.resources(context), False
    if base_uri is None:
        return None, False
    return (
        shared_resources(
            base_uri,
            None,
            DEFAULT_COMPACT_AFTER,
            root=context.project_root,
            origin=f"component {component} ({context.path}/defs.yaml base_uri)",
            by_component=True,
        ),
        True,
    )
