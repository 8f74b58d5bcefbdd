"""Spark scans of a plan's files: rows in the read schema, each knowing its revision.

The tasks a read merges are scanned together: one Parquet relation over all the files
whose columns have the read types (missing columns read as null; files of an older type
are conformed in a relation of their own), whatever their number, so building the plan
costs the same at any history length. Each row learns its revision from its file: the last
three segments of ``_metadata.file_path`` (``<revision>/<table>/<file>``, safe characters
only, so the URL-encoding of the root never matters) are looked up in a map literal of
file -> sequence and order (a small broadcast table when there are many files). Rows of a
compaction carry the sequence of the revision that wrote them in a ``_revision_sequence``
column.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import lru_cache, partial
from urllib.parse import quote, unquote

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from ...columns import DELETED, ROW_HASH, SOURCE_SEQUENCE
from ...sqltext import quoted, sql_literal
from ...storage.base import Storage
from ...timeutil import to_micros
from ..plan.scans import ScanTask
from ..plan.schema import Schema, agrees, parse_schema, to_struct_json

#: the columns a scan adds to a row: its revision's sequence, order (its index in the
#: read, or in ``revision_rows``) and timestamp in microseconds
SEQUENCE, ORDER, STAMP = "__sequence", "__revision_order", "__timestamp_us"


@lru_cache(maxsize=512)
def spark_schema(schema: Schema) -> StructType:
    """A read schema as a Spark ``StructType`` (every column nullable)."""
    return StructType.fromJson(json.loads(to_struct_json(schema)))


def parquet_files(
    spark: SparkSession, uris: Sequence[str], schema: StructType | None = None
) -> DataFrame:
    """The Parquet files ``uris``, each opened by its literal path (every Spark read of data
    files goes through here). Spark's file sources expand a path holding one of ``{}[]*?``
    or a backslash as a Hadoop glob unless the reader says not to (``__globPaths__``, what
    Spark's own schema inference passes when it reads listed files): a crafted path could
    otherwise read other files than it names, outside the root too."""
    reader = spark.read.option("__globPaths__", "false")
    if schema is not None:
        reader = reader.schema(schema)
    return reader.parquet(*uris)


def empty_frame(spark: SparkSession, schema: StructType) -> DataFrame:
    """An empty DataFrame of ``schema`` that starts no Python worker. On a classic session an
    empty Python list still becomes an RDD with a task per core, each starting a worker; an
    empty RDD has no partitions, so no task. Spark Connect sends the list as a local
    relation."""
    if isinstance(spark, SparkSession):  # classic; Connect's session is another class
        return spark.createDataFrame(spark.sparkContext.emptyRDD(), schema)
    return spark.createDataFrame([], schema)


def recorded_schema(schema_json: str) -> StructType:
    """A recorded schema (``TableWrite.schema_json``) as a Spark ``StructType``."""
    return spark_schema(parse_schema(schema_json))


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
        F.col(quoted(f.name)) if f.name in present else F.lit(None).cast(f.dataType).alias(f.name)
        for f in schema.fields
    ]


#: up to this many keys, a row's revision is looked up in a map literal (a linear probe per
#: row, no join); above, a broadcast join with a small table
MAP_MAX_KEYS = 64

#: the revision annotations, in the order of ``Scanner._about``'s values
_ABOUT_FIELDS = (SEQUENCE, ORDER, "_revision", STAMP)


def with_exprs(df: DataFrame, exprs: dict[str, str]) -> DataFrame:
    """``df`` with columns computed by SQL expressions: one call, not one per column."""
    if not exprs:
        return df
    return df.selectExpr("*", *[f"{e} AS {quoted(n)}" for n, e in exprs.items()])


class Scanner:
    """Scans the files of scan tasks into rows of the read schema + ``_deleted`` +
    ``_row_hash`` (null in files written before hashes) + the producing sequence, and when
    asked (``annotate``) the revision's order, name and timestamp.

    Building the plan stays cheap: files whose columns have the read types are read as
    one relation under the read schema (missing columns read as null), annotations are SQL
    expressions, so a read costs about a hundred calls into the JVM whatever its width."""

    def __init__(
        self,
        spark: SparkSession,
        storage: Storage,
        schema: Schema,
        about: dict[int, tuple],
    ):
        self.spark = spark
        self.storage = storage
        self.read_schema = schema
        self.schema = spark_schema(schema)
        #: sequence -> (sequence, order, name, timestamp in µs) of the revisions that rank
        self.about = about

    def _uris(self, tasks: Sequence[ScanTask]) -> list[str]:
        return [self.storage.spark_uri(f) for t in tasks for f in t.files]

    def _read(
        self,
        tasks: Sequence[ScanTask],
        exprs: dict[str, str],
        extra: Sequence[StructField] = (),
    ) -> DataFrame:
        """The files of ``tasks`` in the read schema + the system columns + columns computed
        by the SQL ``exprs``, which may use ``_metadata`` (it resolves only on a relation of
        files) and the file columns ``extra``. The one conformance of this engine: files
        whose columns have the read types are read as one relation under the read schema
        (missing columns read as null), files of another column type in a relation per
        schema, conformed to it. One select per relation: every DataFrame call is an
        analysis of the plan on the driver."""
        fitting: list[ScanTask] = []
        others: dict[Schema, list[ScanTask]] = {}
        for t in tasks:
            if agrees(t.schema, self.read_schema):
                fitting.append(t)
            else:
                others.setdefault(t.schema, []).append(t)
        # files written before tombstones were flagged hold no _deleted column
        system = [f"coalesce({DELETED}, false) AS {DELETED}", quoted(ROW_HASH)]
        system += [f"{e} AS {quoted(n)}" for n, e in exprs.items()]
        full = StructType([*self.schema.fields, *_SYSTEM_FIELDS, *extra])
        columns = [*map(quoted, self.schema.fieldNames()), *system]
        parts = []
        if fitting and (uris := self._uris(fitting)):
            parts.append(parquet_files(self.spark, uris, full).selectExpr(*columns))
        for own_schema, members in others.items():
            if uris := self._uris(members):
                own = spark_schema(own_schema)
                own_fields = StructType([*own.fields, *_SYSTEM_FIELDS, *extra])
                own_columns = [*_conform(self.schema, own), *map(F.expr, system)]
                parts.append(parquet_files(self.spark, uris, own_fields).select(*own_columns))
        if not parts:
            # no file: an empty relation whose _metadata.file_path resolves like a scan's
            metadata = StructField(
                "_metadata", StructType([StructField("file_path", StringType())])
            )
            empty = empty_frame(self.spark, StructType([*full.fields, metadata]))
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
            # costs the analyzer far more (docs/benchmarks)
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

    def revisions(self, tasks: Sequence[ScanTask], annotate: bool) -> DataFrame:
        """The rows of data revisions (tombstones included), in one relation when their
        files agree with the read schema."""
        names = [SEQUENCE, ORDER, "_revision", STAMP] if annotate else [SEQUENCE]
        if len(tasks) == 1:
            about = self.about[tasks[0].sequence]
            exprs = {c: sql_literal(about[i]) for i, c in enumerate(_ABOUT_FIELDS)}
            return self._read(tasks, {c: exprs[c] for c in names})
        files = [(f, self.about[t.sequence]) for t in tasks for f in t.files]
        # Spark reports a file by its URI (local ones as file:/…): looking that up costs
        # nothing per row, while cutting the file key out of it costs as much as the scan
        # (docs/benchmarks/index.md, "Measured while choosing"); the key is the sure lookup
        # where a URI is spelled otherwise
        path = "_metadata.file_path"
        lookups = [
            (path, {_reported_uri(self.storage.spark_uri(f)): about for f, about in files}),
            (f"substring_index({path}, '/', -3)", {file_key(f): about for f, about in files}),
        ]
        return self._annotated(lambda exprs: self._read(tasks, exprs), lookups, names)

    def _lookup(self, rows: list[tuple], names: list[str]) -> DataFrame:
        """A small table built on the driver, as a local relation: no Python worker runs to
        read it (a list of tuples would become an RDD of pickled rows)."""
        types = {"__key": "string", "_revision": "string"}
        if rows and not isinstance(rows[0][0], str):
            types["__key"] = "bigint"
        schema = StructType.fromDDL(", ".join(f"{n} {types.get(n, 'bigint')}" for n in names))
        return self.spark.createDataFrame(pd.DataFrame(rows, columns=names), schema)

    def compaction(self, base: ScanTask, annotate: bool) -> DataFrame:
        """The rows of a compaction, tombstones included, each with the sequence that wrote
        it (``SEQUENCE``)."""
        source = StructField(SOURCE_SEQUENCE, LongType(), True)
        rows = self._read([base], {SEQUENCE: quoted(SOURCE_SEQUENCE)}, (source,))
        if not annotate:
            return rows
        # rows older than the plan's merge (the state part of a change read) never win
        # against the merge's rows for the ids the read reports: order -1
        rows = self._annotated(
            partial(with_exprs, rows), [(quoted(SEQUENCE), self.about)], [ORDER, "_revision", STAMP]
        )
        return rows.withColumn(ORDER, F.expr(f"coalesce({ORDER}, -1L)"))

    def ids_of(self, tasks: Sequence[ScanTask], ids: Sequence[str]) -> DataFrame:
        """The distinct ids written by ``tasks``: one relation over their files."""
        id_schema = StructType([self.schema[c] for c in ids])
        uris = self._uris(tasks)
        if not uris:
            return empty_frame(self.spark, id_schema)
        return parquet_files(self.spark, uris, id_schema).distinct()


def revision_rows(
    spark: SparkSession,
    storage: Storage,
    schema: Schema,
    tasks: Sequence[ScanTask],
    base: ScanTask | None = None,
    base_orders: Sequence[tuple[int, Sequence[int]]] = (),
) -> DataFrame:
    """Every row the ``tasks`` wrote (tombstones flagged), in one scan.

    Rows are in ``schema`` plus ``_deleted``, ``_row_hash`` and ``ORDER``: the ``order`` of
    the row's task, for plans that rank or window rows by revision. A revision named more
    than once (the pieces of a carried revision's span) is read once and its rows repeated,
    once per order. ``base``: a compaction whose rows stand for revisions, each row once
    per order ``base_orders`` gives the sequence that wrote it (none: left out).
    """
    distinct = list({t.sequence: t for t in tasks}.values())
    about = {
        t.sequence: (t.sequence, n, t.entry, to_micros(t.timestamp)) for n, t in enumerate(distinct)
    }
    scanner = Scanner(spark, storage, schema, about)
    parts = []
    if distinct:
        rows = scanner.revisions(distinct, annotate=True)
        rows = rows.drop(SEQUENCE, "_revision", STAMP).withColumn(ORDER, F.col(ORDER).cast("int"))
        orders = [[t.order for t in tasks if t.sequence == d.sequence] for d in distinct]
        if any(o != [n] for n, o in enumerate(orders)):
            arrays = [F.array(*map(F.lit, o)) for o in orders]
            rows = rows.withColumn(
                ORDER, F.explode(F.element_at(F.array(*arrays), F.col(ORDER) + 1))
            )
        parts.append(rows)
    if base is not None:
        keyed = ", ".join(f"{q}L, array({', '.join(map(str, o))})" for q, o in base_orders)
        rows = scanner.compaction(base, annotate=False)
        columns = [*map(quoted, scanner.schema.fieldNames()), DELETED, quoted(ROW_HASH)]
        order = f"explode(element_at(map({keyed}), {SEQUENCE})) AS {ORDER}"
        parts.append(rows.selectExpr(*columns, order))
    if not parts:
        empty = StructType([*scanner.schema.fields, *_SYSTEM_FIELDS])
        return empty_frame(spark, empty).withColumn(ORDER, F.lit(None).cast("int"))
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


def revision_value(values: Sequence[object], data_type: DataType) -> Column:
    """A value of each ``revision_rows`` row's revision: ``values[ORDER]``, as an array
    literal (a small per-revision table without a join); null where ORDER is null."""
    array = F.array(*[F.lit(v).cast(data_type) for v in values])
    # Spark 4 (4.3 here) answers element_at(array, NULL) with an element, not null: guard it
    return F.when(F.col(ORDER).isNotNull(), F.element_at(array, F.col(ORDER) + 1))
