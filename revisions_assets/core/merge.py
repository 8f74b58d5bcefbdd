"""Spark plans that turn a selection of revisions into one DataFrame.

"Latest row per entity wins" is done by Spark, never on the driver. Two plans:

* ``broadcast``: the oldest revision (usually the big major) anti-joined with a
  broadcast of the newer revisions' ids, unioned with the newer revisions
  deduplicated among themselves. Reads the major once, no shuffle of it:
  about the cost of a plain read when the updates are small.
* ``window``: ``row_number()`` over the union of all revisions, partitioned by
  the ids. Shuffles everything; right when the updates are as big as the base.

``auto`` picks by the row counts recorded in the log.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructField, StructType

from .records import Revision
from .storage import Storage

DELETED = "_deleted"
ORDER = "__revision_order"
REVISION_COLUMNS = ("_revision", "_revision_timestamp", "_revision_sequence")
SYSTEM_COLUMNS = (DELETED, *REVISION_COLUMNS)

MergeStrategy = Literal["auto", "broadcast", "window"]
#: ``auto`` broadcasts the ids of newer revisions up to this many rows
BROADCAST_MAX_ROWS = 2_000_000


@lru_cache(maxsize=256)
def parse_schema(schema_json: str) -> StructType:
    """A recorded schema as a StructType; revisions of a table mostly share one string."""
    return StructType.fromJson(json.loads(schema_json))


def table_schema(revisions: Sequence[Revision], table: str) -> StructType:
    """The read schema: the oldest revision's columns, then columns added later, in order."""
    fields: dict[str, StructField] = {}
    for schema_json in dict.fromkeys(r.tables[table].schema_json for r in revisions):
        for f in parse_schema(schema_json).fields:
            if f.name not in fields:
                fields[f.name] = StructField(f.name, f.dataType, True)
    return StructType(list(fields.values()))


def read_revision(
    spark: SparkSession, storage: Storage, revision: Revision, table: str, schema: StructType
) -> DataFrame:
    """The rows a revision wrote to ``table`` (tombstones included), in ``schema`` + _deleted."""
    write = revision.tables[table]
    own = parse_schema(write.schema_json)
    file_schema = StructType([*own.fields, StructField(DELETED, BooleanType(), True)])
    if write.files:
        df = spark.read.schema(file_schema).parquet(*[storage.spark_uri(f) for f in write.files])
    else:
        df = spark.createDataFrame([], file_schema)
    present = set(own.fieldNames())
    columns = [
        F.col(f.name) if f.name in present else F.lit(None).cast(f.dataType).alias(f.name)
        for f in schema.fields
    ]
    return df.select(*columns, F.coalesce(F.col(DELETED), F.lit(False)).alias(DELETED))


def read_revisions(
    spark: SparkSession, storage: Storage, table: str, revisions: Sequence[Revision]
) -> DataFrame:
    """Every row ``revisions`` wrote to ``table`` (tombstones flagged), in one DataFrame.

    Rows are in the read schema of ``revisions`` plus ``_deleted`` and ``ORDER``: the index
    of the row's revision in ``revisions``, for plans that rank or window rows by revision.
    """
    schema = table_schema(revisions, table)
    return _union(
        [
            read_revision(spark, storage, revision, table, schema).withColumn(ORDER, F.lit(i))
            for i, revision in enumerate(revisions)
        ]
    )


def _with_revision_columns(df: DataFrame, revision: Revision) -> DataFrame:
    return df.withColumns(
        {
            "_revision": F.lit(revision.name),
            "_revision_timestamp": F.lit(revision.timestamp).cast("timestamp"),
            "_revision_sequence": F.lit(revision.sequence).cast("long"),
        }
    )


def _latest_per_entity(df: DataFrame, ids: Sequence[str]) -> DataFrame:
    rank = F.row_number().over(Window.partitionBy(*ids).orderBy(F.col(ORDER).desc()))
    return df.withColumn("__rank", rank).where(F.col("__rank") == 1).drop("__rank")


def _union(frames: Sequence[DataFrame]) -> DataFrame:
    out = frames[0]
    for df in frames[1:]:
        out = out.unionByName(df)
    return out


def choose_strategy(revisions: Sequence[Revision], table: str, strategy: MergeStrategy) -> str:
    if strategy != "auto" or len(revisions) == 1:
        return strategy
    base = revisions[0].tables[table].rows
    newer = sum(r.tables[table].rows for r in revisions[1:])
    return "broadcast" if newer <= min(BROADCAST_MAX_ROWS, max(base, 1)) else "window"


def merge_revisions(
    spark: SparkSession,
    storage: Storage,
    table: str,
    revisions: Sequence[Revision],
    *,
    keep_deleted: bool = False,
    with_revision: bool = False,
    only_ids_of: Sequence[Revision] | None = None,
    strategy: MergeStrategy = "auto",
) -> DataFrame:
    """The latest row per entity over ``revisions`` (given in key order, oldest first).

    ``keep_deleted``: keep tombstone rows (flagged ``_deleted``) instead of dropping them.
    ``only_ids_of``: report only the entities some of these revisions wrote (semi-join).
    """
    ids = list(revisions[0].tables[table].id_columns)
    schema = table_schema(revisions, table)
    frames = []
    for order, revision in enumerate(revisions):
        df = read_revision(spark, storage, revision, table, schema)
        if with_revision:
            df = _with_revision_columns(df, revision)
        frames.append(df.withColumn(ORDER, F.lit(order)))

    plan = choose_strategy(revisions, table, strategy)
    if len(frames) == 1:
        merged = frames[0]
    elif plan == "broadcast":
        newer = _union(frames[1:])
        # repeated ids are harmless to an anti-join: no dedup needed on the broadcast side
        base = frames[0].join(F.broadcast(newer.select(*ids)), on=ids, how="left_anti")
        merged = base.unionByName(_latest_per_entity(newer, ids) if len(frames) > 2 else newer)
    else:
        merged = _latest_per_entity(_union(frames), ids)
    merged = merged.drop(ORDER)

    if only_ids_of is not None:
        touched = _union([read_revision(spark, storage, r, table, schema) for r in only_ids_of])
        touched_ids = touched.select(*ids).distinct()
        window_rows = sum(r.tables[table].rows for r in only_ids_of)
        if window_rows <= BROADCAST_MAX_ROWS:
            touched_ids = F.broadcast(touched_ids)
        merged = merged.join(touched_ids, on=ids, how="left_semi")

    if keep_deleted:
        return merged
    if any(r.tables[table].tombstones for r in revisions):
        merged = merged.where(~F.col(DELETED))
    return merged.drop(DELETED)


def blank_deletions(df: DataFrame, ids: Sequence[str]) -> DataFrame:
    """Deletion rows carry only their ids: other columns are null where ``_deleted``."""
    keep = set(ids) | set(SYSTEM_COLUMNS)
    columns: list[Column] = [
        F.col(c) if c in keep else F.when(F.col(DELETED), F.lit(None)).otherwise(F.col(c)).alias(c)
        for c in df.columns
    ]
    return df.select(*columns)
