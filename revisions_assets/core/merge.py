"""Spark plans that turn a read plan into one DataFrame.

"Latest row per entity wins" is done by Spark, never on the driver. The revisions a read
merges are scanned together: one Parquet relation over all their files per distinct
recorded schema (usually one), whatever their number, so building the plan costs the
same at any history length. Each row learns its revision from its file: the last three
segments of ``_metadata.file_path`` (``<revision>/<table>/<file>``, safe characters
only, so the URL-encoding of the root never matters) are joined to a small broadcast
table of file -> sequence and order. Rows of a compaction carry the sequence of the
revision that wrote them in a ``_revision_sequence`` column.

Two plans, for the base (the major, or a compaction) and the rows on top of it:

* ``broadcast``: one broadcast of the newer rows' ids and order; the base anti-joined with
  it, unioned with the newer rows anti-joined with the later ones among them. No shuffle
  at all: the base is read once, the newer rows twice (for the broadcast, and as rows).
* ``window``: ``row_number()`` over all rows, partitioned by the ids. Shuffles
  everything; right when the updates are as big as the base, or when some revision read
  on top of a compaction is older than rows the compaction holds (an out-of-order
  backfill).

``auto`` picks by the row counts recorded in the log.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from .hashing import ROW_HASH
from .logview import LogView
from .records import Revision, TableWrite
from .selection import ReadPlan, best_compaction, state_selection
from .storage import Storage
from .timeutil import to_micros

DELETED = "_deleted"
REVISION_COLUMNS = ("_revision", "_revision_timestamp", "_revision_sequence")
SYSTEM_COLUMNS = (DELETED, ROW_HASH, *REVISION_COLUMNS)
#: the column of compaction files naming the revision that wrote each row
SOURCE_SEQUENCE = "_revision_sequence"
_SEQ, _ORDER, _FILE, _STAMP = "__sequence", "__revision_order", "__file", "__timestamp_us"
#: the column of ``read_revisions`` rows giving the index of their revision
ORDER = _ORDER
_LATER = "__later_order"

MergeStrategy = Literal["auto", "broadcast", "window"]
#: ``auto`` broadcasts the ids of newer revisions up to this many rows
BROADCAST_MAX_ROWS = 2_000_000


@lru_cache(maxsize=256)
def parse_schema(schema_json: str) -> StructType:
    """A recorded schema as a StructType; revisions of a table mostly share one string."""
    return StructType.fromJson(json.loads(schema_json))


def read_schema(writes: Sequence[TableWrite]) -> StructType:
    """The read schema: the first write's columns, then columns added later, in order."""
    fields: dict[str, StructField] = {}
    for schema_json in dict.fromkeys(w.schema_json for w in writes):
        for f in parse_schema(schema_json).fields:
            if f.name not in fields:
                fields[f.name] = StructField(f.name, f.dataType, True)
    return StructType(list(fields.values()))


def table_schema(revisions: Sequence[Revision], table: str) -> StructType:
    """The read schema of ``table`` over ``revisions`` (given in key order)."""
    return read_schema([r.tables[table] for r in revisions])


def plan_schema(plan: ReadPlan) -> StructType:
    """The read schema of a plan: its base's columns (a compaction records the schema of
    the revisions it holds), then the columns its other revisions add."""
    writes = [r.tables[plan.table] for r in plan.direct]
    return read_schema([plan.base.write, *writes] if plan.base is not None else writes)


def state_schemas(view: LogView, table: str) -> tuple[StructType, StructType]:
    """(the governing major's schema, the current state's schema) of ``table`` at the head.

    Parses only the schemas of the base and the revisions on top of it: a compaction
    records the schema of the revisions it holds.
    """
    selection = state_selection(view.history(table), table)
    base = best_compaction(view, selection)
    direct = tuple(r for r in selection.merge if base is None or not base.contains(r))
    plan = ReadPlan(table, selection.merge, base, direct)
    return table_schema((selection.major,), table), plan_schema(plan)


#: the system columns of data files: ``_row_hash`` reads as null in files written before it
_SYSTEM_FIELDS = (
    StructField(DELETED, BooleanType(), True),
    StructField(ROW_HASH, LongType(), True),
)


def file_key(path: str) -> str:
    """``<revision>/<table>/<file>``: how a data file is recognized in ``_metadata``."""
    return "/".join(path.split("/")[-3:])


def _conform(schema: StructType, own: StructType) -> list[Column]:
    present = set(own.fieldNames())
    return [
        F.col(f.name) if f.name in present else F.lit(None).cast(f.dataType).alias(f.name)
        for f in schema.fields
    ]


class _Scanner:
    """Scans files of a plan into rows of the read schema + ``_deleted`` + ``_row_hash``
    (null in files written before hashes) + the producing sequence, and when asked
    (``annotate``) the revision's order, name and timestamp."""

    def __init__(self, spark: SparkSession, storage: Storage, plan: ReadPlan, schema: StructType):
        self.spark = spark
        self.storage = storage
        self.plan = plan
        self.schema = schema
        self.rank = {r.sequence: n for n, r in enumerate(plan.merge)}

    def _about(self, revision: Revision) -> tuple:
        """(sequence, order, name, timestamp in µs) of a revision of the merge."""
        order = self.rank.get(revision.sequence, -1)
        return (revision.sequence, order, revision.name, to_micros(revision.timestamp))

    def _uris(self, revisions: Sequence[Revision]) -> list[str]:
        table = self.plan.table
        return [self.storage.spark_uri(f) for r in revisions for f in r.tables[table].files]

    def revisions(self, revisions: Sequence[Revision], annotate: bool) -> DataFrame:
        """The rows of data revisions (tombstones included), one relation per schema."""
        table = self.plan.table
        groups: dict[str, list[Revision]] = {}
        for r in revisions:
            groups.setdefault(r.tables[table].schema_json, []).append(r)
        single = len(revisions) == 1
        names = [*self.schema.fieldNames(), DELETED, ROW_HASH] + ([] if single else [_FILE])
        rows = None
        for schema_json, members in groups.items():
            uris = self._uris(members)
            if not uris:
                continue
            own = parse_schema(schema_json)
            df = self.spark.read.schema(StructType([*own.fields, *_SYSTEM_FIELDS])).parquet(*uris)
            columns = [
                *_conform(self.schema, own),
                F.coalesce(F.col(DELETED), F.lit(False)),
                F.col(ROW_HASH),
            ]
            if not single:
                columns.append(F.substring_index(F.col("_metadata.file_path"), "/", -3))
            df = df.select(*columns).toDF(*names)
            rows = df if rows is None else rows.unionByName(df)
        if rows is None:
            fields = [*self.schema.fields, *_SYSTEM_FIELDS]
            fields += [] if single else [StructField(_FILE, StringType())]
            rows = self.spark.createDataFrame([], StructType(fields))
        if single:
            seq, order, name, stamp = self._about(revisions[0])
            rows = rows.withColumn(_SEQ, F.lit(seq).cast("long"))
            if not annotate:
                return rows
            return rows.withColumns(
                {
                    _ORDER: F.lit(order).cast("long"),
                    "_revision": F.lit(name),
                    _STAMP: F.lit(stamp).cast("long"),
                }
            )
        lookup = self._lookup(
            [
                (file_key(f), *(self._about(r) if annotate else (r.sequence,)))
                for r in revisions
                for f in r.tables[table].files
            ],
            [_FILE, _SEQ, *([_ORDER, "_revision", _STAMP] if annotate else [])],
        )
        return rows.join(F.broadcast(lookup), on=_FILE).drop(_FILE)

    def _lookup(self, rows: list[tuple], names: list[str]) -> DataFrame:
        """A small table built on the driver, as a local relation: no Python worker runs to
        read it (a list of tuples would become an RDD of pickled rows)."""
        types = {_FILE: "string", _SEQ: "bigint", _ORDER: "bigint", "_revision": "string"}
        schema = StructType.fromDDL(", ".join(f"{n} {types.get(n, 'bigint')}" for n in names))
        return self.spark.createDataFrame(pd.DataFrame(rows, columns=names), schema)

    def compaction(self, annotate: bool) -> DataFrame:
        """The rows of the plan's base compaction, tombstones included."""
        base = self.plan.base
        assert base is not None
        own = parse_schema(base.write.schema_json)
        uris = [self.storage.spark_uri(f) for f in base.write.files]
        if uris:
            fields = [*own.fields, *_SYSTEM_FIELDS, StructField(SOURCE_SEQUENCE, LongType(), True)]
            df = self.spark.read.schema(StructType(fields)).parquet(*uris)
            rows = df.select(
                *_conform(self.schema, own),
                F.coalesce(F.col(DELETED), F.lit(False)).alias(DELETED),
                F.col(ROW_HASH),
                F.col(SOURCE_SEQUENCE).alias(_SEQ),
            )
        else:
            fields = [*self.schema.fields, *_SYSTEM_FIELDS, StructField(_SEQ, LongType())]
            rows = self.spark.createDataFrame([], StructType(fields))
        if not annotate:
            return rows
        lookup = self._lookup(
            [self._about(r) for r in self.plan.merge], [_SEQ, _ORDER, "_revision", _STAMP]
        )
        # rows older than the plan's merge (the state part of a change read) never win
        # against the merge's rows for the ids the read reports: order -1
        rows = rows.join(F.broadcast(lookup), on=_SEQ, how="left")
        return rows.withColumn(_ORDER, F.coalesce(F.col(_ORDER), F.lit(-1).cast("long")))

    def ids_of(self, revisions: Sequence[Revision], ids: Sequence[str]) -> DataFrame:
        """The distinct ids written by ``revisions``: one relation over their files."""
        id_schema = StructType([self.schema[c] for c in ids])
        uris = self._uris(revisions)
        if not uris:
            return self.spark.createDataFrame([], id_schema)
        return self.spark.read.schema(id_schema).parquet(*uris).distinct()


def read_revisions(
    spark: SparkSession, storage: Storage, table: str, revisions: Sequence[Revision]
) -> DataFrame:
    """Every row ``revisions`` wrote to ``table`` (tombstones flagged), in one scan.

    Rows are in the read schema of ``revisions`` plus ``_deleted`` and ``ORDER``: the index
    of the row's revision in ``revisions``, for plans that rank or window rows by revision.
    """
    plan = ReadPlan(table, merge=tuple(revisions), base=None, direct=tuple(revisions))
    rows = _Scanner(spark, storage, plan, table_schema(revisions, table)).revisions(
        revisions, annotate=True
    )
    return rows.drop(_SEQ, "_revision", _STAMP).withColumn(ORDER, F.col(ORDER).cast("int"))


def revision_value(values: Sequence[object], data_type: DataType) -> Column:
    """A value of each ``read_revisions`` row's revision: ``values[ORDER]``, as an array
    literal (a small per-revision table without a join)."""
    array = F.array(*[F.lit(v).cast(data_type) for v in values])
    return F.element_at(array, F.col(ORDER) + 1)


def choose_strategy(revisions: Sequence[Revision], table: str, strategy: MergeStrategy) -> str:
    """The plan for merging ``revisions`` (key order) when the first one is the base."""
    if strategy != "auto" or len(revisions) == 1:
        return strategy
    base = revisions[0].tables[table].rows
    return _by_rows(base, sum(r.tables[table].rows for r in revisions[1:]))


def _by_rows(base_rows: int, newer_rows: int) -> str:
    return "broadcast" if newer_rows <= min(BROADCAST_MAX_ROWS, max(base_rows, 1)) else "window"


def _base_write(plan: ReadPlan) -> TableWrite:
    return plan.base.write if plan.base is not None else plan.direct[0].tables[plan.table]


def merge_kind(plan: ReadPlan, strategy: MergeStrategy = "auto") -> str:
    """``single`` (nothing on top of the base), ``broadcast`` or ``window`` for a plan."""
    newer = plan.direct if plan.base is not None else plan.direct[1:]
    if not newer:
        return "single"
    if not plan.base_is_prefix:
        return "window"
    if strategy != "auto":
        return strategy
    return _by_rows(_base_write(plan).rows, sum(r.tables[plan.table].rows for r in newer))


def _latest_per_entity(df: DataFrame, ids: Sequence[str]) -> DataFrame:
    rank = F.row_number().over(Window.partitionBy(*ids).orderBy(F.col(_ORDER).desc()))
    return df.withColumn("__rank", rank).where(F.col("__rank") == 1).drop("__rank")


def merge_plan(
    spark: SparkSession,
    storage: Storage,
    plan: ReadPlan,
    *,
    keep_deleted: bool = False,
    with_revision: bool = False,
    with_sequence: bool = False,
    with_hash: bool = False,
    strategy: MergeStrategy = "auto",
) -> DataFrame:
    """The latest row per entity over a read plan.

    ``keep_deleted``: keep tombstone rows (flagged ``_deleted``) instead of dropping them.
    ``with_revision``: add the name, timestamp and sequence of each row's revision.
    ``with_sequence``: add only ``_revision_sequence`` (what a compaction writes).
    ``with_hash``: add ``_row_hash`` (``core/hashing.py``; null where not recorded).
    """
    table = plan.table
    first = _base_write(plan)
    ids = list(first.id_columns)
    schema = plan_schema(plan)
    scan = _Scanner(spark, storage, plan, schema)
    newer = plan.direct if plan.base is not None else plan.direct[1:]
    kind = merge_kind(plan, strategy)

    annotate_base = with_revision or kind == "window"
    annotate_newer = with_revision or kind == "window" or len(newer) > 1
    if plan.base is not None:
        base = scan.compaction(annotate_base)
    else:
        base = scan.revisions(plan.direct[:1], annotate_base)
    if kind == "single":
        merged = base
    elif kind == "broadcast":
        rows = scan.revisions(newer, annotate_newer)
        # one broadcast of the newer rows' ids (and order): the base rows they replace and
        # the newer rows a later one replaces drop out by anti-joins, with no shuffle
        keys = rows.select(
            *[F.col(c).alias(f"__key_{c}") for c in ids],
            *([F.col(_ORDER).alias(_LATER)] if len(newer) > 1 else []),
        )
        keys = F.broadcast(keys)
        same = [base[c] == keys[f"__key_{c}"] for c in ids]
        kept = base.join(keys, on=same, how="left_anti")
        top = rows
        if len(newer) > 1:
            replaced = [rows[c] == keys[f"__key_{c}"] for c in ids]
            top = rows.join(keys, on=[*replaced, rows[_ORDER] < keys[_LATER]], how="left_anti")
        merged = kept.unionByName(top, allowMissingColumns=True)
    else:
        rows = scan.revisions(newer, True)
        merged = _latest_per_entity(base.unionByName(rows), ids)

    if plan.only_ids_of is not None:
        touched = scan.ids_of(plan.only_ids_of, ids)
        if sum(r.tables[table].rows for r in plan.only_ids_of) <= BROADCAST_MAX_ROWS:
            touched = F.broadcast(touched)
        merged = merged.join(touched, on=ids, how="left_semi")

    tombstones = first.tombstones + sum(r.tables[table].tombstones for r in plan.direct)
    if not keep_deleted and tombstones:
        merged = merged.where(~F.col(DELETED))
    system = [DELETED] if keep_deleted else []
    if with_hash:
        system.append(ROW_HASH)
    if with_revision:
        merged = merged.withColumns(
            {
                "_revision_timestamp": F.timestamp_micros(F.col(_STAMP)),
                "_revision_sequence": F.col(_SEQ),
            }
        )
        system += list(REVISION_COLUMNS)
    elif with_sequence:
        merged = merged.withColumn(SOURCE_SEQUENCE, F.col(_SEQ))
        system.append(SOURCE_SEQUENCE)
    return merged.select(*schema.fieldNames(), *system)


def blank_deletions(df: DataFrame, ids: Sequence[str]) -> DataFrame:
    """Deletion rows carry only their ids: other columns are null where ``_deleted``."""
    keep = set(ids) | set(SYSTEM_COLUMNS)
    columns: list[Column] = [
        F.col(c) if c in keep else F.when(F.col(DELETED), F.lit(None)).otherwise(F.col(c)).alias(c)
        for c in df.columns
    ]
    return df.select(*columns)
