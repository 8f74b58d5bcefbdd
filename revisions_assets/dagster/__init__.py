"""The Dagster layer: revisioned featurized, reference and scoring assets, their checks,
automation (a condition and its sensor, or two sensors) and schedule, and the resources
they run on (``revisions_resources``: the IO manager, the dataset location, the Spark
session; ``revisions_assets.dagster.resources``), and featurized and scoring assets whose
Spark runs remotely (``pipes=True``, ``RevisionJob``). Needs the ``dagster`` extra."""

from ..core.extras import needs_extra

with needs_extra("revisions_assets.dagster", "dagster"):
    from ..core.runs.run_slice import RunSlice
    from .automation import (
        RevisionsGapCondition,
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
        FeaturizedScheduleComponent,
        ReferenceAssetComponent,
        RevisionsResourcesComponent,
        ScoringAssetComponent,
        UnknownComponentError,
    )
    from .factory import AssetOptions, RevisionRunConfig
    from .featurized import featurized_asset, reference_asset
    from .maintenance import VacuumConfig, vacuum_job, weekly_vacuum_schedule
    from .outside_commits import outside_commits_sensor
    from .pending import TAG_PENDING, pending_majors
    from .pipes import RemoteJobError, RevisionJob
    from .resources import (
        IO_MANAGER_KEY,
        LOCATION_KEY,
        SPARK_KEY,
        TAG_FORCE_COMPACTION,
        TAG_FORCE_MAJOR,
        DatasetLocation,
        DatasetSlice,
        ResourceConflictError,
        RevisionsIOManager,
        SparkSessionResource,
        UpstreamChanges,
        project_root,
        revisions_resources,
    )
    from .schedules import daily_featurized_schedule
    from .scoring import Reference, ScoringInputsError, scoring_asset
    from .sensors import code_version_sensor, upstream_changes_sensor
    from .source_version import SourceVersion
    from .training import training_set_asset
    from .unmaterialized import TAG_REFUSED

__all__ = [
    "IO_MANAGER_KEY",
    "LOCATION_KEY",
    "SPARK_KEY",
    "TAG_FORCE_COMPACTION",
    "TAG_FORCE_MAJOR",
    "TAG_PENDING",
    "TAG_REFUSED",
    "AssetOptions",
    "DatasetLocation",
    "DatasetSlice",
    "FeaturizedAssetComponent",
    "FeaturizedScheduleComponent",
    "Reference",
    "ReferenceAssetComponent",
    "RemoteJobError",
    "ResourceConflictError",
    "RevisionsResourcesComponent",
    "RevisionJob",
    "RevisionRunConfig",
    "RevisionsGapCondition",
    "RevisionsIOManager",
    "RevisionsLogCondition",
    "RunSlice",
    "ScoringAssetComponent",
    "ScoringInputsError",
    "SourceVersion",
    "SparkSessionResource",
    "UnknownComponentError",
    "UpstreamChanges",
    "VacuumConfig",
    "automation_tick",
    "backfill_runs",
    "code_version_sensor",
    "daily_featurized_schedule",
    "featurized_asset",
    "outside_commits_sensor",
    "pending_majors",
    "project_root",
    "reference_asset",
    "revision_checks",
    "revisions_automation",
    "revisions_automation_sensor",
    "revisions_log_condition",
    "revisions_resources",
    "runs_with",
    "scoring_asset",
    "training_set_asset",
    "upstream_changes_sensor",
    "vacuum_job",
    "weekly_vacuum_schedule",
]
