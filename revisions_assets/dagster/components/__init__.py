"""Components of revisioned assets: the factories, declared from YAML (``defs.yaml``), and
what a components project declares once beside them (its resources, its schedule).

- ``assets.py``: ``FeaturizedAssetComponent``, ``ReferenceAssetComponent``,
  ``ScoringAssetComponent`` (each brings its asset's checks, the automation sensor and the
  in-process executor);
- ``resources.py``: ``RevisionsResourcesComponent``, the datasets' location and the Spark
  session of every revisioned asset of the project;
- ``schedule.py``: ``FeaturizedScheduleComponent``, the daily schedule of featurized
  assets.

They are registered through the ``dagster_dg_cli.registry_modules`` entry point, so ``dg
list components`` lists them and ``dg scaffold defs revisions_assets.dagster.<Component>
<path>`` writes a working ``defs.yaml`` (and the Python functions it names).
"""

from .assets import (
    FeaturizedAssetComponent,
    ReferenceAssetComponent,
    ScoringAssetComponent,
    UnknownComponentError,
)
from .resources import RevisionsResourcesComponent
from .schedule import FeaturizedScheduleComponent

__all__ = [
    "FeaturizedAssetComponent",
    "FeaturizedScheduleComponent",
    "ReferenceAssetComponent",
    "RevisionsResourcesComponent",
    "ScoringAssetComponent",
    "UnknownComponentError",
]
