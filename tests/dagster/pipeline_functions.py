"""The computations of the tests' pipeline, without Dagster: the in-process assets
(``revisions_pipeline``) and the remote job of the Pipes tests (``pipes_job``) share them.

Events (day, entity, grp, value, deleted) are a pandas frame; the featurizer sums values per
entity over its window (an event flagged ``deleted`` turns the entity into a tombstone); the
score is total * the weight of the entity's group.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

EVENT_SCHEMA = T.StructType(
    [
        T.StructField("day", T.DateType(), False),
        T.StructField("entity", T.StringType(), False),
        T.StructField("grp", T.StringType(), False),
        T.StructField("value", T.LongType(), False),
        T.StructField("deleted", T.BooleanType(), False),
    ]
)


def window_events(
    spark: SparkSession, events: pd.DataFrame, start: dt.datetime, end: dt.datetime
) -> DataFrame:
    """The events of the days in [start, end)."""
    mask = (events["day"] >= start.date()) & (events["day"] < end.date())
    return spark.createDataFrame(events[mask], schema=EVENT_SCHEMA)


def featurize(events: DataFrame, window: Any = None) -> DataFrame:
    agg = events.groupBy("entity").agg(
        F.max("grp").alias("grp"),
        F.sum("value").alias("total"),
        F.count(F.lit(1)).alias("events"),
        F.max(F.col("deleted").cast("int")).alias("gone"),
    )
    return agg.withColumn("_deleted", F.col("gone") == 1).drop("gone")


def score(features: DataFrame, groups: DataFrame) -> DataFrame:
    return features.join(groups, "grp", "left").select(
        "entity", "grp", (F.col("total") * F.col("weight")).alias("score")
    )


def events_to_json(events: pd.DataFrame) -> list[dict[str, Any]]:
    """The events as JSON values (a Pipes extra)."""
    return [{**row, "day": row["day"].isoformat()} for row in events.to_dict("records")]


def events_from_json(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=[f.name for f in EVENT_SCHEMA.fields])
    frame["day"] = pd.to_datetime(frame["day"]).dt.date
    return frame
