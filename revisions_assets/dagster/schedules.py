"""The daily schedule: minor updates of the newest partition of featurized assets."""

from collections.abc import Sequence

import dagster as dg


def daily_featurized_schedule(
    assets: Sequence[dg.AssetsDefinition],
    partitions_def: dg.TimeWindowPartitionsDefinition,
    *,
    name: str = "featurized_daily",
    hour_of_day: int = 1,
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.STOPPED,
) -> dg.ScheduleDefinition:
    """Each day, materialize the newest complete partition of ``assets`` (minors, unless a
    code version changed: then the run itself decides major)."""
    job = dg.define_asset_job(
        name=f"{name}_job",
        selection=dg.AssetSelection.assets(*assets),
        partitions_def=partitions_def,
        description="The featurized assets, one partition.",
    )
    return dg.build_schedule_from_partitioned_job(
        job, name=name, hour_of_day=hour_of_day, default_status=default_status
    )
