"""The daily schedule: minor updates of the newest partition of featurized assets."""

from collections.abc import Sequence

import dagster as dg


def daily_featurized_schedule(
    assets: Sequence[dg.AssetsDefinition | dg.AssetKey],
    partitions_def: dg.TimeWindowPartitionsDefinition,
    *,
    name: str = "featurized_daily",
    hour_of_day: int = 1,
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.STOPPED,
) -> dg.ScheduleDefinition:
    """Each day, materialize the newest complete partition of ``assets`` (or of the assets
    of these keys), as one run (minors, unless a code version changed: then the run itself
    decides major). A components project declares it with ``FeaturizedScheduleComponent``."""
    job = dg.define_asset_job(
        name=f"{name}_job",
        selection=dg.AssetSelection.assets(*assets),
        description="The featurized assets, one partition.",
    )

    @dg.schedule(
        name=name,
        job=job,
        cron_schedule=f"0 {hour_of_day} * * *",
        execution_timezone=partitions_def.timezone,
        default_status=default_status,
        description="Materializes the newest complete daily partition of the featurized assets.",
    )
    def _schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        keys = partitions_def.get_partition_keys(current_time=context.scheduled_execution_time)
        key = keys[-1] if keys else None
        if key is None:
            return dg.SkipReason("no complete partition yet")
        return dg.RunRequest(run_key=key, partition_key=key)

    return _schedule
