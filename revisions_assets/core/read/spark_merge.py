"""Spark plans that turn a read plan into one DataFrame.

"Latest row per entity wins" is done by Spark, never on the driver. The revisions a read
merges are scanned together: one Parquet relation over all the files whose columns have
the read types (missing columns read as null; files of an older type are conformed in a
relation of their own), whatever their number, so building the plan costs the same at any
history length. Each row learns its revision from its file: the last three segments of
``_metadata.file_path`` (``<revision>/<table>/<file>``, safe characters only, so the
URL-encoding of the root never matters) are looked up in a map literal of file ->
sequence and order (a small broadcast table when there are many files). Rows of a
compaction carry the sequence of the revision that wrote them in a ``_revision_sequence``
column.

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
from collections.abc import Callable, Sequence
from functools import lru_cache, partial
from typing import Literal
from urllib.parse import quote, unquote

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

from ..columns import DELETED, REVISION_COLUMNS, ROW_HASH, SOURCE_SEQUENCE
from ..errors import NoMajorRevisionError
from ..log.records import Revision, TableWrite
from ..log.view import Compaction, LogView
from ..sqltext import quoted, sql_literal
from ..storage.base import Storage
from ..timeutil import to_micros
from .selection import ReadPlan, head_plan, head_state

SYSTEM_COLUMNS = (DELETED, ROW_HASH, *REVISION_COLUMNS)
_SEQ, _ORDER, _STAMP = "__sequence", "__revision_order", "__timestamp_us"
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
    return view.memo(("state_schemas", table), lambda: _state_schemas(view, table))


def _state_schemas(view: LogView, table: str) -> tuple[StructType, StructType]:
    major = head_state(view, table).major
    return table_schema((major,), table), plan_schema(head_plan(view, table))


def current_schema(view: LogView, table: str) -> StructType:
    """The schema a read of ``table`` at the head returns (its latest major plus the columns
    later revisions added); a table with no major yet: the schema its revisions wrote."""
    try:
        return state_schemas(view, table)[1]
    except NoMajorRevisionError:
        return table_schema(view.history(table), table)


#: the system columns of data files: ``_row_hash`` reads as null in files written before it
_SYSTEM_FIELDS = (
    StructField(DELETED, BooleanType(), True),
    StructField(ROW_HASH, LongType(), True),
)


#: what java.net.URI leaves unquoted in a path, besides letters and digits
_URI_PATH_SAFE = "/_-!.~'()*,;:$&+=@"


def file_key(path: str) -> str:
    """``<revision>/<table>/<file>``: how a data file is recognized."""
    return "/".join(path.split("/")[-3:])


def _reported_uri(uri: str) -> str:
    """``uri`` (a ``spark_uri``) as Spark reports it in ``_metadata.file_path``: Hadoop
    drops the empty authority of ``file:///…`` and quotes what a URI path cannot hold."""
    if uri.startswith("file:///"):
        return "file:" + quote(uri.removeprefix("file://"), safe=_URI_PATH_SAFE)
    return uri


def spark_file_key(path: str) -> str:
    """The ``file_key`` of a path as Spark reports it (``_metadata.file_path``,
    ``inputFiles()``): a URI, so URL-encoded."""
    return file_key(unquote(path))


def _conform(schema: StructType, own: StructType) -> list[Column]:
    present = set(own.fieldNames())
    return [
        F.col(f.name) if f.name in present else F.lit(None).cast(f.dataType).alias(f.name)
        for f in schema.fields
    ]


def _agrees(own: StructType, schema: StructType) -> bool:
    """Whether files of ``own`` read under ``schema`` as they are: every column they hold
    has the read type (the Parquet reader fills the columns they lack with nulls)."""
    return all(f.dataType == schema[f.name].dataType for f in own.fields if f.name in schema.names)


#: up to this many keys, a row's revision is looked up in a map literal (a linear probe per
#: row, no join); above, a broadcast join with a small table
MAP_MAX_KEYS = 64

#: the revision annotations, in the order of ``_Scanner._about``'s values
_ABOUT_FIELDS = (_SEQ, _ORDER, "_revision", _STAMP)


def _with_exprs(df: DataFrame, exprs: dict[str, str]) -> DataFrame:
    """``df`` with columns computed by SQL expressions: one call, not one per column."""
    if not exprs:
        return df
    return df.selectExpr("*", *[f"{e} AS {quoted(n)}" for n, e in exprs.items()])


class _Scanner:
    """Scans files of a plan into rows of the read schema + ``_deleted`` + ``_row_hash``
    (null in files written before hashes) + the producing sequence, and when asked
    (``annotate``) the revision's order, name and timestamp.

    Building the plan stays cheap: files whose columns have the read types are read as
    one relation under the read schema (missing columns read as null), annotations are SQL
    expressions, so a read costs about a hundred calls into the JVM whatever its width."""

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

    def _read(self, revisions: Sequence[Revision], exprs: dict[str, str]) -> DataFrame:
        """The files of ``revisions`` in the read schema + the system columns (files of
        another column type are conformed to it) + columns computed by the SQL ``exprs``,
        which may use ``_metadata`` (it resolves only on a relation of files). One select
        per relation: every DataFrame call is an analysis of the plan on the driver."""
        table = self.plan.table
        fitting: list[Revision] = []
        others: dict[str, list[Revision]] = {}
        for r in revisions:
            schema_json = r.tables[table].schema_json
            if _agrees(parse_schema(schema_json), self.schema):
                fitting.append(r)
            else:
                others.setdefault(schema_json, []).append(r)
        # files written before tombstones were flagged hold no _deleted column
        system = [f"coalesce({DELETED}, false) AS {DELETED}", quoted(ROW_HASH)]
        system += [f"{e} AS {quoted(n)}" for n, e in exprs.items()]
        full = StructType([*self.schema.fields, *_SYSTEM_FIELDS])
        columns = [*map(quoted, self.schema.fieldNames()), *system]
        parts = []
        if fitting and (uris := self._uris(fitting)):
            parts.append(self.spark.read.schema(full).parquet(*uris).selectExpr(*columns))
        for schema_json, members in others.items():
            if uris := self._uris(members):
                own = parse_schema(schema_json)
                df = self.spark.read.schema(StructType([*own.fields, *_SYSTEM_FIELDS]))
                own_columns = [*_conform(self.schema, own), *map(F.expr, system)]
                parts.append(df.parquet(*uris).select(*own_columns))
        if not parts:
            # no file: an empty relation whose _metadata.file_path resolves like a scan's
            metadata = StructField(
                "_metadata", StructType([StructField("file_path", StringType())])
            )
            empty = self.spark.createDataFrame([], StructType([*full.fields, metadata]))
            return empty.selectExpr(*columns)
        rows = parts[0]
        for part in parts[1:]:
            rows = rows.unionByName(part)
        return rows

    def _annotated(
        self,
        read: Callable[[dict[str, str]], DataFrame],
        lookups: Sequence[tuple[str, dict]],
        names: Sequence[str],
    ) -> DataFrame:
        """The rows ``read`` gives (called with SQL expressions of further columns) with
        the columns ``names`` (of ``_ABOUT_FIELDS``) of each row's revision.

        ``lookups``: (SQL key expression, {key value: ``_about`` tuple}) pairs, tried in
        turn (a cheap key first, a sure one last; a later key is computed only where the
        earlier ones miss): map literals when small, else a broadcast join with a local
        relation holding every key (an ``IN`` list of the earlier keys picks the key)."""
        fields = [(c, i) for i, c in enumerate(_ABOUT_FIELDS) if c in names]
        if len(lookups[-1][1]) <= MAP_MAX_KEYS:
            # one map of scalars per column: a map of structs repeated in every column
            # cost the analyzer a fifth of the read's plan-building time (10 minors)
            def value(i: int) -> str:
                found = [
                    "element_at(map("
                    + ", ".join(f"{sql_literal(k)}, {sql_literal(a[i])}" for k, a in keyed.items())
                    + f"), {key})"
                    for key, keyed in lookups
                ]
                return found[0] if len(found) == 1 else f"coalesce({', '.join(found)})"

            return read({c: value(i) for c, i in fields})
        # one join on the first key that knows the row's value: the lookup holds every key
        key, keyed = lookups[-1]
        for earlier, known in reversed(lookups[:-1]):
            listed = ", ".join(map(sql_literal, known))
            key = f"CASE WHEN {earlier} IN ({listed}) THEN {earlier} ELSE {key} END"
            keyed = {**known, **keyed}
        lookup = self._lookup(
            [(k, *(about[i] for _, i in fields)) for k, about in keyed.items()],
            ["__key", *(c for c, _ in fields)],
        )
        rows = read({"__key": key})
        return rows.join(F.broadcast(lookup), on="__key", how="left").drop("__key")

    def revisions(self, revisions: Sequence[Revision], annotate: bool) -> DataFrame:
        """The rows of data revisions (tombstones included), in one relation when their
        files agree with the read schema."""
        names = [_SEQ, _ORDER, "_revision", _STAMP] if annotate else [_SEQ]
        if len(revisions) == 1:
            about = self._about(revisions[0])
            exprs = {c: sql_literal(about[i]) for i, c in enumerate(_ABOUT_FIELDS)}
            return self._read(revisions, {c: exprs[c] for c in names})
        files = [(f, self._about(r)) for r in revisions for f in r.tables[self.plan.table].files]
        # Spark reports a file by its URI (local ones as file:/…): looking that up costs
        # nothing per row, while cutting the file key out of it cost as much as the scan
        # itself (2 s on 2.6M rows); the key is the sure lookup where a URI is spelled
        # otherwise
        path = "_metadata.file_path"
        lookups = [
            (path, {_reported_uri(self.storage.spark_uri(f)): about for f, about in files}),
            (f"substring_index({path}, '/', -3)", {file_key(f): about for f, about in files}),
        ]
        return self._annotated(lambda exprs: self._read(revisions, exprs), lookups, names)

    def _lookup(self, rows: list[tuple], names: list[str]) -> DataFrame:
        """A small table built on the driver, as a local relation: no Python worker runs to
        read it (a list of tuples would become an RDD of pickled rows)."""
        types = {"__key": "string", "_revision": "string"}
        if rows and not isinstance(rows[0][0], str):
            types["__key"] = "bigint"
        schema = StructType.fromDDL(", ".join(f"{n} {types.get(n, 'bigint')}" for n in names))
        return self.spark.createDataFrame(pd.DataFrame(rows, columns=names), schema)

    def compaction(self, annotate: bool) -> DataFrame:
        """The rows of the plan's base compaction, tombstones included."""
        base = self.plan.base
        assert base is not None
        own = parse_schema(base.write.schema_json)
        source = StructField(SOURCE_SEQUENCE, LongType(), True)
        uris = [self.storage.spark_uri(f) for f in base.write.files]
        if not uris:
            fields = [*self.schema.fields, *_SYSTEM_FIELDS, StructField(_SEQ, LongType())]
            rows = self.spark.createDataFrame([], StructType(fields))
        elif _agrees(own, self.schema):
            full = StructType([*self.schema.fields, *_SYSTEM_FIELDS, source])
            rows = self.spark.read.schema(full).parquet(*uris)
            rows = rows.withColumnRenamed(SOURCE_SEQUENCE, _SEQ)
        else:
            fields = [*own.fields, *_SYSTEM_FIELDS, source]
            df = self.spark.read.schema(StructType(fields)).parquet(*uris)
            rows = df.select(
                *_conform(self.schema, own),
                DELETED,
                ROW_HASH,
                F.col(SOURCE_SEQUENCE).alias(_SEQ),
            )
        rows = rows.withColumn(DELETED, F.expr(f"coalesce({DELETED}, false)"))
        if not annotate:
            return rows
        # rows older than the plan's merge (the state part of a change read) never win
        # against the merge's rows for the ids the read reports: order -1
        keyed = {r.sequence: self._about(r) for r in self.plan.merge}
        rows = self._annotated(
            partial(_with_exprs, rows), [(quoted(_SEQ), keyed)], [_ORDER, "_revision", _STAMP]
        )
        return rows.withColumn(_ORDER, F.expr(f"coalesce({_ORDER}, -1L)"))

    def ids_of(self, revisions: Sequence[Revision], ids: Sequence[str]) -> DataFrame:
        """The distinct ids written by ``revisions``: one relation over their files."""
        id_schema = StructType([self.schema[c] for c in ids])
        uris = self._uris(revisions)
        if not uris:
            return self.spark.createDataFrame([], id_schema)
        return self.spark.read.schema(id_schema).parquet(*uris).distinct()


def read_revisions(
    spark: SparkSession,
    storage: Storage,
    table: str,
    revisions: Sequence[Revision],
    base: Compaction | None = None,
) -> DataFrame:
    """Every row ``revisions`` wrote to ``table`` (tombstones flagged), in one scan.

    Rows are in the read schema of ``revisions`` plus ``_deleted`` and ``ORDER``: the index
    of the row's revision in ``revisions``, for plans that rank or window rows by revision.
    A revision named more than once (the pieces of a carried revision's span) is read once
    and its rows repeated, once per index. ``base``: a compaction that stands for the
    revisions it contains: its rows, each at the index of the revision that wrote it.
    """
    distinct = list({r.sequence: r for r in revisions}.values())
    direct = tuple(r for r in distinct if base is None or not base.contains(r))
    plan = ReadPlan(table, merge=tuple(distinct), base=base, direct=direct)
    scan = _Scanner(spark, storage, plan, table_schema(distinct, table))
    parts = [scan.revisions(direct, annotate=True)] if direct else []
    if base is not None:
        parts.append(scan.compaction(annotate=True).where(f"{_ORDER} >= 0"))
    rows = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    rows = rows.drop(_SEQ, "_revision", _STAMP).withColumn(ORDER, F.col(ORDER).cast("int"))
    if len(distinct) == len(revisions):
        return rows
    indexes = [
        F.array(*[F.lit(i) for i, r in enumerate(revisions) if r.sequence == d.sequence])
        for d in distinct
    ]
    return rows.withColumn(ORDER, F.explode(F.element_at(F.array(*indexes), F.col(ORDER) + 1)))


def revision_value(values: Sequence[object], data_type: DataType) -> Column:
    """A value of each ``read_revisions`` row's revision: ``values[ORDER]``, as an array
    literal (a small per-revision table without a join); null where ORDER is null."""
    array = F.array(*[F.lit(v).cast(data_type) for v in values])
    # Spark 4 (4.3 here) answers element_at(array, NULL) with an element, not null: guard it
    return F.when(F.col(ORDER).isNotNull(), F.element_at(array, F.col(ORDER) + 1))


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
        keys = rows.selectExpr(
            *[f"{quoted(c)} AS {quoted('__key_' + c)}" for c in ids],
            *([f"{_ORDER} AS {_LATER}"] if len(newer) > 1 else []),
        )
        keys = F.broadcast(keys)
        same = " AND ".join(f"{quoted(c)} = {quoted('__key_' + c)}" for c in ids)
        kept = base.join(keys, on=F.expr(same), how="left_anti")
        top = rows
        if len(newer) > 1:
            replaced = F.expr(f"{same} AND {_ORDER} < {_LATER}")
            top = rows.join(keys, on=replaced, how="left_anti")
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
        merged = merged.where(f"NOT {DELETED}")
    system = [DELETED] if keep_deleted else []
    if with_hash:
        system.append(ROW_HASH)
    if with_revision:
        merged = _with_exprs(
            merged,
            {"_revision_timestamp": f"timestamp_micros({_STAMP})", "_revision_sequence": _SEQ},
        )
        system += list(REVISION_COLUMNS)
    elif with_sequence:
        merged = _with_exprs(merged, {SOURCE_SEQUENCE: _SEQ})
        system.append(SOURCE_SEQUENCE)
    return merged.selectExpr(*map(quoted, [*schema.fieldNames(), *system]))


def blank_deletions(df: DataFrame, ids: Sequence[str]) -> DataFrame:
    """Deletion rows carry only their ids: other columns are null where ``_deleted``."""
    keep = set(ids) | set(SYSTEM_COLUMNS)
    columns: list[Column] = [
        F.col(c) if c in keep else F.when(F.col(DELETED), F.lit(None)).otherwise(F.col(c)).alias(c)
        for c in df.columns
    ]
    return df.select(*columns)
