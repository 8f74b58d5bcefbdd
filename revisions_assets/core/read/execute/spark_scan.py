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
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache, partial
from typing import Any
from urllib.parse import quote, unquote

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ...columns import DELETED, ROW_HASH, SOURCE_SEQUENCE
from ...errors import InvalidNameError
from ...hashing import checked_hash
from ...spark_columns import column, constant, unnameable
from ...storage.base import Storage
from ...timeutil import to_micros
from ..plan.scans import ScanTask
from ..plan.schema import Schema, agrees, parse_schema, to_struct_json, value_columns

#: the columns a scan adds to a row: its revision's sequence, order (its index in the
#: read, or in ``revision_rows``) and timestamp in microseconds
SEQUENCE, ORDER, STAMP = "__sequence", "__revision_order", "__timestamp_us"


@lru_cache(maxsize=512)
def spark_schema(schema: Schema) -> StructType:
    """A read schema as a Spark ``StructType`` (every column nullable); InvalidNameError for a
    column Spark cannot name (``spark_columns.unnameable``: it would read nulls, or fail
    unexplained), which only a log written by hand can hold."""
    for field in schema:
        why = unnameable(field.name, field.type)
        if why:
            raise InvalidNameError(
                f"column {field.name!r} holds {why}: Spark cannot read it (a commit refuses "
                "such a name); read the table with DatasetReader"
            )
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
        column(f.name) if f.name in present else F.lit(None).cast(f.dataType).alias(f.name)
        for f in schema.fields
    ]


#: up to this many keys, a row's revision is looked up in a map constant (a linear probe per
#: row, no join); above, a broadcast join with a small table
MAP_MAX_KEYS = 64

#: the revision annotations, in the order of ``Scanner._about``'s values, and their types
_ABOUT_FIELDS = (SEQUENCE, ORDER, "_revision", STAMP)
_ABOUT_TYPES: tuple[DataType, ...] = (LongType(), LongType(), StringType(), LongType())
#: the column a scan reads its lookup keys from, when they are joined
_SOURCE = "__source"

#: a lookup: how its key is computed from the source column, and key -> ``_about`` values
Lookup = tuple[Callable[[Column], Column], Mapping[Any, tuple]]


class Scanner:
    """Scans the files of scan tasks into rows of the read schema + ``_deleted`` +
    ``_row_hash`` (null in files written before hashes) + the producing sequence, and when
    asked (``annotate``) the revision's order, name and timestamp.

    Building the plan stays cheap: files whose columns have the read types are read as
    one relation under the read schema (missing columns read as null), and the revision
    annotations are constants (``spark_columns.constant``: one call into the JVM each), so
    a read costs a few dozen calls into the JVM whatever its width and length."""

    def __init__(
        self,
        spark: SparkSession,
        storage: Storage,
        schema: Schema,
        about: dict[int, tuple],
        checked_ids: Sequence[str] | None = None,
    ):
        self.spark = spark
        self.storage = storage
        self.read_schema = schema
        self.schema = spark_schema(schema)
        #: sequence -> (sequence, order, name, timestamp in µs) of the revisions that rank
        self.about = about
        #: the id columns, when every row's stored hash is checked against its values as it
        #: is read (``hashing.checked_hash``: what compaction rewrites); None: not
        #: checked. Only for a schema of every column the files hold (never a projection:
        #: the hash covers them all)
        self.checked_ids = checked_ids

    def _row_hash(self, own: StructType) -> Column:
        """``_row_hash`` of rows read from files of schema ``own``: checked against the
        values in the files' own types, when asked."""
        if self.checked_ids is None:
            return column(ROW_HASH)
        return checked_hash(own, value_columns(own, self.checked_ids))

    def _uris(self, tasks: Sequence[ScanTask]) -> list[str]:
        return [self.storage.spark_uri(f) for t in tasks for f in t.files]

    def _read(
        self,
        tasks: Sequence[ScanTask],
        columns: Mapping[str, Column],
        extra: Sequence[StructField] = (),
    ) -> DataFrame:
        """The files of ``tasks`` in the read schema + the system columns + ``columns``,
        which may use ``_metadata`` (it resolves only on a relation of files) and the file
        columns ``extra``. The one conformance of this engine: files whose columns have the
        read types are read as one relation under the read schema (missing columns read as
        null), files of another column type in a relation per schema, conformed to it. One
        call per relation that names no column of the table: every DataFrame call is an
        analysis of the plan on the driver."""
        fitting: list[ScanTask] = []
        others: dict[Schema, list[ScanTask]] = {}
        for t in tasks:
            if agrees(t.schema, self.read_schema):
                fitting.append(t)
            else:
                others.setdefault(t.schema, []).append(t)
        # files written before tombstones were flagged hold no _deleted column
        added = {DELETED: F.coalesce(column(DELETED), F.lit(False)), **columns}
        if self.checked_ids is not None:
            added[ROW_HASH] = self._row_hash(self.schema)
        left_out = [f.name for f in extra]
        full = StructType([*self.schema.fields, *_SYSTEM_FIELDS, *extra])
        parts = []
        if fitting and (uris := self._uris(fitting)):
            parts.append(parquet_files(self.spark, uris, full).withColumns(added).drop(*left_out))
        for own_schema, members in others.items():
            if uris := self._uris(members):
                own = spark_schema(own_schema)
                own_fields = StructType([*own.fields, *_SYSTEM_FIELDS, *extra])
                own_columns = [
                    *_conform(self.schema, own),
                    *(c.alias(n) for n, c in added.items() if n == DELETED),
                    self._row_hash(own).alias(ROW_HASH),
                    *(c.alias(n) for n, c in added.items() if n not in (DELETED, ROW_HASH)),
                ]
                parts.append(parquet_files(self.spark, uris, own_fields).select(*own_columns))
        if not parts:
            # no file: an empty relation whose _metadata.file_path resolves like a scan's
            metadata = StructField(
                "_metadata", StructType([StructField("file_path", StringType())])
            )
            empty = empty_frame(self.spark, StructType([*full.fields, metadata]))
            return empty.withColumns(added).drop("_metadata", *left_out)
        rows = parts[0]
        for part in parts[1:]:
            rows = rows.unionByName(part)
        return rows

    def _annotated(
        self,
        read: Callable[[Mapping[str, Column]], DataFrame],
        source: Column,
        lookups: Sequence[Lookup],
        names: Sequence[str],
    ) -> DataFrame:
        """The rows ``read`` gives (called with further columns) with the columns ``names``
        (of ``_ABOUT_FIELDS``) of each row's revision.

        ``lookups``: keys computed from ``source`` and what they find, tried in turn (a
        cheap key first, a sure one last; a later key is computed only where the earlier
        ones miss): map constants when small, else broadcast joins with local relations
        holding every key."""
        fields = [(c, i) for i, c in enumerate(_ABOUT_FIELDS) if c in names]
        if len(lookups[-1][1]) <= MAP_MAX_KEYS:
            # one map of scalars per column: a map of structs repeated in every column
            # costs the analyzer far more (docs/benchmarks)
            keys = [(_key_text(key(source), keyed), keyed) for key, keyed in lookups]

            def value(i: int) -> Column:
                found = [F.element_at(_map_of(keyed, i), key) for key, keyed in keys]
                return found[0] if len(found) == 1 else F.coalesce(*found)

            return read({c: value(i) for c, i in fields})
        rows = read({_SOURCE: source})
        looked_up: list[list[str]] = []
        for n, (key, keyed) in enumerate(lookups):
            found = [f"{c}__{n}" for c, _ in fields]
            table = self._lookup(
                [(k, *(about[i] for _, i in fields)) for k, about in keyed.items()],
                [f"__key{n}", *found],
            )
            at = key(column(_SOURCE))
            if looked_up:  # only where the earlier keys found nothing
                at = F.when(column(looked_up[-1][0]).isNull(), at)
            rows = rows.join(F.broadcast(table), on=at == column(f"__key{n}"), how="left")
            looked_up.append(found)
        picked = {
            c: F.coalesce(*(column(found[j]) for found in looked_up))
            for j, (c, _) in enumerate(fields)
        }
        dropped = [
            _SOURCE,
            *(f"__key{n}" for n in range(len(lookups))),
            *(f for found in looked_up for f in found),
        ]
        return rows.withColumns(picked).drop(*dropped)

    def revisions(self, tasks: Sequence[ScanTask], annotate: bool) -> DataFrame:
        """The rows of data revisions (tombstones included), in one relation when their
        files agree with the read schema."""
        names = [SEQUENCE, ORDER, "_revision", STAMP] if annotate else [SEQUENCE]
        if len(tasks) == 1:
            about = self.about[tasks[0].sequence]
            literals = {
                c: F.lit(about[i]).cast(_ABOUT_TYPES[i])
                for i, c in enumerate(_ABOUT_FIELDS)
                if c in names
            }
            return self._read(tasks, literals)
        files = [(f, self.about[t.sequence]) for t in tasks for f in t.files]
        # Spark reports a file by its URI (local ones as file:/…): looking that up costs
        # nothing per row, while cutting the file key out of it costs as much as the scan
        # (docs/benchmarks/index.md, "Measured while choosing"); the key is the sure lookup
        # where a URI is spelled otherwise
        lookups: list[Lookup] = [
            (_same, {_reported_uri(self.storage.spark_uri(f)): about for f, about in files}),
            (_file_key_of, {file_key(f): about for f, about in files}),
        ]
        return self._annotated(
            partial(self._read, tasks), F.col("_metadata.file_path"), lookups, names
        )

    def _lookup(self, rows: list[tuple], names: list[str]) -> DataFrame:
        """A small table built on the driver, as a local relation: no Python worker runs to
        read it (a list of tuples would become an RDD of pickled rows)."""
        texts = {n for n in names if n.startswith("_revision")}
        if not rows or isinstance(rows[0][0], str):
            texts.add(names[0])
        schema = StructType(
            [StructField(n, StringType() if n in texts else LongType()) for n in names]
        )
        return self.spark.createDataFrame(pd.DataFrame(rows, columns=names), schema)

    def compaction(self, base: ScanTask, annotate: bool) -> DataFrame:
        """The rows of a compaction, tombstones included, each with the sequence that wrote
        it (``SEQUENCE``)."""
        source = StructField(SOURCE_SEQUENCE, LongType(), True)
        rows = self._read([base], {SEQUENCE: column(SOURCE_SEQUENCE)}, (source,))
        if not annotate:
            return rows
        # rows older than the plan's merge (the state part of a change read) never win
        # against the merge's rows for the ids the read reports: order -1
        rows = self._annotated(
            rows.withColumns, column(SEQUENCE), [(_same, self.about)], [ORDER, "_revision", STAMP]
        )
        return rows.withColumn(ORDER, F.coalesce(column(ORDER), F.lit(-1).cast(LongType())))

    def ids_of(self, tasks: Sequence[ScanTask], ids: Sequence[str]) -> DataFrame:
        """The distinct ids written by ``tasks``: one relation over their files."""
        id_schema = StructType([self.schema[c] for c in ids])
        uris = self._uris(tasks)
        if not uris:
            return empty_frame(self.spark, id_schema)
        return parquet_files(self.spark, uris, id_schema).distinct()


def _same(key: Column) -> Column:
    return key


def _file_key_of(path: Column) -> Column:
    """``file_key`` of a path as Spark reports it: its last three segments."""
    return F.substring_index(path, "/", -3)


def _map_of(keyed: Mapping[Any, tuple], i: int) -> Column:
    """A map constant of key -> the ``i``-th ``_about`` value (keys as text: a JSON object's
    keys are strings)."""
    values = {str(k): about[i] for k, about in keyed.items()}
    return constant(values, MapType(StringType(), _ABOUT_TYPES[i]))


def _key_text(key: Column, keyed: Mapping[Any, tuple]) -> Column:
    """``key`` as ``_map_of`` spells the keys of ``keyed``."""
    return key if all(isinstance(k, str) for k in keyed) else key.cast(StringType())


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
        rows = rows.drop(SEQUENCE, "_revision", STAMP).withColumn(
            ORDER, column(ORDER).cast(IntegerType())
        )
        by_sequence: dict[int, list[int]] = {}
        for t in tasks:
            by_sequence.setdefault(t.sequence, []).append(t.order)
        orders = [by_sequence[d.sequence] for d in distinct]
        if any(o != [n] for n, o in enumerate(orders)):
            arrays = constant(orders, ArrayType(ArrayType(IntegerType())))
            rows = rows.withColumn(ORDER, F.explode(F.element_at(arrays, column(ORDER) + 1)))
        parts.append(rows)
    if base is not None:
        keyed = constant(
            {str(q): list(o) for q, o in base_orders},
            MapType(StringType(), ArrayType(IntegerType())),
        )
        rows = scanner.compaction(base, annotate=False)
        order = F.explode(F.element_at(keyed, column(SEQUENCE).cast(StringType())))
        parts.append(rows.withColumn(ORDER, order).drop(SEQUENCE))
    if not parts:
        empty = StructType([*scanner.schema.fields, *_SYSTEM_FIELDS])
        return empty_frame(spark, empty).withColumn(ORDER, F.lit(None).cast(IntegerType()))
    return parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])


def revision_value(values: Sequence[object], data_type: DataType) -> Column:
    """A value of each ``revision_rows`` row's revision: ``values[ORDER]``, from an array
    constant (a small per-revision table without a join); null where ORDER is null."""
    if isinstance(data_type, TimestampType):
        micros = [None if v is None else to_micros(v) for v in values]  # type: ignore[arg-type]
        array = constant(micros, ArrayType(LongType()))
        found = F.timestamp_micros(F.element_at(array, column(ORDER) + 1))
    else:
        found = F.element_at(constant(list(values), ArrayType(data_type)), column(ORDER) + 1)
    # Spark 4 (4.3 here) answers element_at(array, NULL) with an element, not null: guard it
    return F.when(column(ORDER).isNotNull(), found)
