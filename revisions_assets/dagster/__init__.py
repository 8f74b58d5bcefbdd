"""The Dagster layer: revisioned featurized, reference and scoring assets, their checks,
automation (a condition and its sensor, or two sensors) and schedule. The IO manager and
resources live in the top-level ``resources``."""

from resources import TAG_FORCE_COMPACTION, TAG_FORCE_MAJOR, DatasetSlice, UpstreamChanges

from .automation import (
    RevisionsLogCondition,
    automation_tick,
    backfill_runs,
    revisions_automation,
    revisions_automation_sensor,
    revisions_log_condition,
)
from .checks import revision_checks, runs_with
from .components import (
    FeaturizedAssetComponent,
    ReferenceAssetComponent,
    ScoringAssetComponent,
)
from .factory import RevisionRunConfig
from .featurized import featurized_asset, reference_asset
from .maintenance import VacuumConfig, vacuum_job, weekly_vacuum_schedule
from .schedules import daily_featurized_schedule
from .scoring import Reference, ScoringInputsError, scoring_asset
from .sensors import code_version_sensor, upstream_changes_sensor
from .training import training_set_asset

__all__ = [
    "TAG_FORCE_COMPACTION",
    "TAG_FORCE_MAJOR",
    "DatasetSlice",
    "FeaturizedAssetComponent",
    "Reference",
    "ReferenceAssetComponent",
    "RevisionRunConfig",
    "RevisionsLogCondition",
    "ScoringAssetComponent",
    "ScoringInputsError",
    "UpstreamChanges",
    "automation_tick",
    "backfill_runs",
    "code_version_sensor",
    "daily_featurized_schedule",
    "featurized_asset",
    "reference_asset",
    "revision_checks",
    "revisions_automation",
    "revisions_automation_sensor",
    "revisions_log_condition",
    "runs_with",
    "scoring_asset",
    "training_set_asset",
    "upstream_changes_sensor",
    "vacuum_job",
    "VacuumConfig",
    "weekly_vacuum_schedule",
]
