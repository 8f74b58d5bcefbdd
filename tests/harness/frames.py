"""Small Spark DataFrames built on the driver, for the tests and the processes they start."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType


def frame(spark: SparkSession, rows: Sequence[tuple], schema: str | StructType) -> DataFrame:
    """A tiny DataFrame with an explicit schema (so empty frames keep their types).

    Built from an Arrow table: a local relation. A frame from a Python list is an RDD of
    pickled rows, and every action on it starts Python workers (about 65 ms an action on 2
    cores; the first also starts their daemon). Instants are UTC, the sessions' time zone."""
    struct = StructType.fromDDL(schema) if isinstance(schema, str) else schema
    arrow = to_arrow_schema(struct, timezone="UTC")
    columns = zip(*rows, strict=True) if rows else ([] for _ in struct.fields)
    arrays = [pa.array(list(values), type=f.type) for values, f in zip(columns, arrow, strict=True)]
    return spark.createDataFrame(pa.Table.from_arrays(arrays, schema=arrow), struct)
