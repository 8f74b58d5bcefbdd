"""The daily schedule of a components project's featurized assets, declared in YAML.

``FeaturizedScheduleComponent`` is ``daily_featurized_schedule`` for a project whose assets
are components (``dg scaffold defs revisions_assets.dagster.FeaturizedScheduleComponent
daily``): each day, one run of the newest complete partition of the featurized assets it
names by their defs paths (default: every featurized component of the project)::

    type: revisions_assets.dagster.FeaturizedScheduleComponent
    attributes:
      assets: [my_features]
      hour_of_day: 1
"""

from dataclasses import dataclass

import dagster as dg
from dagster.components.scaffold.scaffold import ScaffoldRequest, scaffold_with

from revisions_assets.core.errors import InvalidArgumentError

from ..schedules import daily_featurized_schedule
from .assets import FeaturizedAssetComponent, component_at


class FeaturizedScheduleScaffolder(dg.Scaffolder):
    """The daily schedule of every featurized component, stopped until turned on."""

    def scaffold(self, request: ScaffoldRequest) -> None:
        dg.scaffold_component(request, {"name": "featurized_daily", "hour_of_day": 1})


@scaffold_with(FeaturizedScheduleScaffolder)
@dataclass(kw_only=True)
class FeaturizedScheduleComponent(dg.Component, dg.Resolvable):
    """Each day, the newest complete partition of featurized assets (minors, unless a
    version changed), as one run (``daily_featurized_schedule``)."""

    #: the schedule's name
    name: str = "featurized_daily"
    #: the defs paths of the featurized components it runs (default: all of the project's)
    assets: list[str] | None = None
    #: the hour of the day it runs at, in the partitions' timezone
    hour_of_day: int = 1
    #: running from the start (default: stopped until turned on in the UI)
    running: bool = False

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        if self.assets is None:
            found = context.component_tree.get_all_components(of_type=FeaturizedAssetComponent)
        else:
            found = [
                component_at(context, path, FeaturizedAssetComponent, f"schedule {self.name}")
                for path in self.assets
            ]
        if not found:
            raise InvalidArgumentError(
                f"schedule {self.name} ({context.path}/defs.yaml): the project has no "
                "FeaturizedAssetComponent to schedule"
            )
        partitions = {c.partitions for c in found}
        if len(partitions) != 1:
            raise InvalidArgumentError(
                f"schedule {self.name} ({context.path}/defs.yaml): its assets "
                f"{[c.name for c in found]} have different partitions; give each partitions "
                "definition a schedule of its own (assets: [...])"
            )
        (pdef,) = partitions
        status = dg.DefaultScheduleStatus.RUNNING if self.running else None
        schedule = daily_featurized_schedule(
            [c.asset_key() for c in found],
            pdef,  # type: ignore[arg-type]
            name=self.name,
            hour_of_day=self.hour_of_day,
            default_status=status or dg.DefaultScheduleStatus.STOPPED,
        )
        return dg.Definitions(schedules=[schedule])
