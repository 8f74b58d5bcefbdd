"""The demo's asset checks: the revisions layer's checks, with pandera schemas."""

import dagster as dg
import pandera.pyspark as pa
from pyspark.sql import types as T

from revisions_assets.dagster import revision_checks


class DelayFeaturesSchema(pa.DataFrameModel):
    """Schema of plane_delay_features (checked with pandera on Spark)."""

    tailnum: T.StringType() = pa.Field(nullable=False)
    carrier: T.StringType() = pa.Field(nullable=False)
    last_flight_date: T.DateType() = pa.Field(nullable=False)
    flights_28d: T.LongType() = pa.Field(ge=1)
    late_arrival_share_28d: T.DoubleType() = pa.Field(ge=0.0, le=1.0, nullable=True)


class DelayRiskSchema(pa.DataFrameModel):
    """Schema of plane_delay_risk."""

    tailnum: T.StringType() = pa.Field(nullable=False)
    risk: T.DoubleType() = pa.Field(ge=0.0, le=1.0)
    risk_band: T.StringType() = pa.Field(isin=["low", "medium", "high"])


def build_demo_checks(assets: dict[str, dg.AssetsDefinition]) -> list[dg.AssetChecksDefinition]:
    """The checks of every demo asset (schemas on the features and the scores)."""
    return [
        *revision_checks(assets["plane_delay_features"], schema=DelayFeaturesSchema),
        *revision_checks(assets["planes"]),
        *revision_checks(assets["airlines"]),
        *revision_checks(assets["plane_delay_risk"], schema=DelayRiskSchema, max_lag_revisions=3),
    ]


def is_partitioned(check: dg.AssetChecksDefinition) -> bool:
    """Partitioned checks run with the asset's runs; the others on the whole table."""
    return any(spec.partitions_def is not None for spec in check.check_specs)
