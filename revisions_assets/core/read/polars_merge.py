"""Polars plans that turn a read plan into one DataFrame: the sibling of ``spark_merge``.

The same read plan (``selection.plan_read``: a base, the revisions on top, the ids a
change read reports) merged by Polars in one process, no JVM. Each revision's files are
one lazy scan with the revision's sequence and order as literal columns (rows of a
compaction carry the sequence of the revision that wrote them); files of an older column
type are cast to the read type, columns a revision lacks read as null. "Latest row per
entity wins" is an anti-join of the base with the newer rows' ids when every newer row is
newer than the base (the common case), else the row of the highest order per entity.

Types follow the schemas recorded in the log: Spark's ``timestamp`` (an instant) reads as
``Datetime("us", "UTC")``, ``timestamp_ntz`` as a naive ``Datetime("us")``, decimals keep
their precision and scale.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import polars as pl

from ..columns import DELETED, REVISION_COLUMNS, ROW_HASH, SOURCE_SEQUENCE
from ..log.records import Revision, TableWrite
from .selection import ReadPlan

#: turns the log's relative file paths into local paths (fetching them into a cache first)
LocalFiles = Callable[[Sequence[str]], list[str]]

Schema = dict[str, pl.DataType]

_SEQ, _ORDER = "__sequence", "__order"
#: the column of ``scan_compaction`` rows naming the revision that wrote each
SEQUENCE = _SEQ
UTC_MICROS = pl.Datetime("us", "UTC")

_SIMPLE: dict[str, pl.DataType] = {
    "boolean": pl.Boolean(),
    "byte": pl.Int8(),
    "short": pl.Int16(),
    "integer": pl.Int32(),
    "long": pl.Int64(),
    "float": pl.Float32(),
    "double": pl.Float64(),
    "string": pl.String(),
    "binary": pl.Binary(),
    "date": pl.Date(),
    "timestamp": UTC_MICROS,
    "timestamp_ntz": pl.Datetime("us"),
    "void": pl.Null(),
}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_VARCHAR = re.compile(r"^(var)?char\(\d+\)$")


def polars_type(spark_type: Any) -> pl.DataType:
    """The Polars type of a Spark type as the log records it (``StructType.json()``)."""
    if isinstance(spark_type, str):
        if spark_type in _SIMPLE:
            return _SIMPLE[spark_type]
        if match := _DECIMAL.match(spark_type):
            return pl.Decimal(int(match.group(1)), int(match.group(2)))
        if _VARCHAR.match(spark_type):
            return pl.String()
        raise NotImplementedError(f"no Polars type for the Spark type {spark_type!r}")
    kind = spark_type["type"]
    if kind == "array":
        return pl.List(polars_type(spark_type["elementType"]))
    if kind == "struct":
        return pl.Struct({f["name"]: polars_type(f["type"]) for f in spark_type["fields"]})
    if kind == "map":  # Parquet stores a map as a list of key/value pairs
        key, value = polars_type(spark_type["keyType"]), polars_type(spark_type["valueType"])
        return pl.List(pl.Struct({"key": key, "value": value}))
    raise NotImplementedError(f"no Polars type for the Spark type {kind!r}")


@lru_cache(maxsize=256)
def parse_columns(schema_json: str) -> tuple[tuple[str, pl.DataType], ...]:
    """A recorded schema as (column, Polars type) pairs, in order."""
    return tuple((f["name"], polars_type(f["type"])) for f in json.loads(schema_json)["fields"])


def read_columns(writes: Sequence[TableWrite]) -> Schema:
    """The read schema: the first write's columns, then columns added later, in order
    (``spark_merge.read_schema``)."""
    out: Schema = {}
    for schema_json in dict.fromkeys(w.schema_json for w in writes):
        for name, dtype in parse_columns(schema_json):
            out.setdefault(name, dtype)
    return out


def table_columns(revisions: Sequence[Revision], table: str) -> Schema:
    return read_columns([r.tables[table] for r in revisions])


def plan_columns(plan: ReadPlan) -> Schema:
    """The read schema of a plan: its base's columns, then those its other revisions add."""
    writes = [r.tables[plan.table] for r in plan.direct]
    return read_columns([plan.base.write, *writes] if plan.base is not None else writes)


def _conform(name: str, have: pl.DataType | None, want: pl.DataType) -> pl.Expr:
    """Column ``name`` (of type ``have`` in the files, None when absent) as type ``want``."""
    if have is None:
        return pl.lit(None, dtype=want).alias(name)
    column = pl.col(name)
    if have == want:
        return column
    if isinstance(have, pl.Datetime) and isinstance(want, pl.Datetime):
        # Spark writes instants as INT96 (naive nanoseconds, in UTC)
        if have.time_zone is None and want.time_zone is not None:
            column = column.dt.replace_time_zone(want.time_zone)
        return column.dt.cast_time_unit(want.time_unit).alias(name)
    return column.cast(want).alias(name)


def empty_frame(schema: Schema) -> pl.LazyFrame:
    return pl.LazyFrame(schema=schema)


def scan_files(local: LocalFiles, files: Sequence[str], schema: Schema) -> pl.LazyFrame:
    """The rows of one write's files in the read ``schema`` plus ``_deleted`` (false in
    files written before tombstones were flagged) and ``_row_hash`` (null before hashes),
    and the source sequence of compaction files."""
    system: Schema = {DELETED: pl.Boolean(), ROW_HASH: pl.Int64()}
    if not files:
        return empty_frame({**schema, **system})
    rows = pl.scan_parquet(local(files))
    have = rows.collect_schema()
    exprs = [_conform(n, have.get(n), t) for n, t in schema.items()]
    exprs.append(pl.col(DELETED).fill_null(False) if DELETED in have else pl.lit(False))
    exprs[-1] = exprs[-1].alias(DELETED)
    exprs.append(_conform(ROW_HASH, have.get(ROW_HASH), pl.Int64()))
    if SOURCE_SEQUENCE in have:
        exprs.append(pl.col(SOURCE_SEQUENCE).cast(pl.Int64).alias(_SEQ))
    return rows.select(exprs)


def scan_compaction(local: LocalFiles, write: TableWrite, schema: Schema) -> pl.LazyFrame:
    """The rows of a compaction's files (``scan_files``), with ``SEQUENCE``: the sequence of
    the revision that wrote each row."""
    rows = scan_files(local, write.files, schema)
    if _SEQ not in rows.collect_schema():  # a compaction without files
        rows = rows.with_columns(pl.lit(None, dtype=pl.Int64).alias(_SEQ))
    return rows


class _Scanner:
    """Scans the files of a plan into rows of the read schema + the system columns + the
    producing sequence and its order in the plan's merge (-1: older than the merge)."""

    def __init__(self, local: LocalFiles, plan: ReadPlan, schema: Schema):
        self.local = local
        self.plan = plan
        self.schema = schema
        self.rank = {r.sequence: n for n, r in enumerate(plan.merge)}

    def revision(self, revision: Revision, order: int | None = None) -> pl.LazyFrame:
        files = revision.tables[self.plan.table].files
        rank = self.rank.get(revision.sequence, -1) if order is None else order
        return scan_files(self.local, files, self.schema).with_columns(
            pl.lit(revision.sequence, dtype=pl.Int64).alias(_SEQ),
            pl.lit(rank, dtype=pl.Int64).alias(_ORDER),
        )

    def compaction(self) -> pl.LazyFrame:
        base = self.plan.base
        assert base is not None
        rows = scan_compaction(self.local, base.write, self.schema)
        order = pl.col(_SEQ).replace_strict(self.rank, default=-1, return_dtype=pl.Int64)
        return rows.with_columns(order.alias(_ORDER))

    def ids_of(self, revisions: Sequence[Revision], ids: Sequence[str]) -> pl.LazyFrame:
        """The distinct ids ``revisions`` wrote."""
        parts = [self.revision(r).select(ids) for r in revisions]
        return pl.concat(parts).unique() if parts else empty_frame(self._ids(ids))

    def _ids(self, ids: Sequence[str]) -> Schema:
        return {c: self.schema[c] for c in ids}


def _latest(rows: pl.LazyFrame, ids: Sequence[str]) -> pl.LazyFrame:
    """The row of the highest order per entity (a revision writes an entity once)."""
    return rows.filter(pl.col(_ORDER) == pl.col(_ORDER).max().over(ids))


def merge_frame(
    local: LocalFiles,
    plan: ReadPlan,
    *,
    keep_deleted: bool = False,
    with_revision: bool = False,
    with_hash: bool = False,
    columns: Sequence[str] | None = None,
) -> pl.LazyFrame:
    """The latest row per entity over a read plan (``spark_merge.merge_plan``'s rules).

    ``keep_deleted``: keep tombstone rows (flagged ``_deleted``) instead of dropping them.
    ``with_revision``: add the name, timestamp and sequence of each row's revision.
    ``with_hash``: add ``_row_hash`` (null where not recorded).
    ``columns``: the value columns to return (the id columns always come first).
    """
    table = plan.table
    first = plan.base.write if plan.base is not None else plan.direct[0].tables[table]
    ids = list(first.id_columns)
    schema = plan_columns(plan)
    scan = _Scanner(local, plan, schema)
    newer = plan.direct if plan.base is not None else plan.direct[1:]
    base = scan.compaction() if plan.base is not None else scan.revision(plan.direct[0])
    if not newer:
        merged = base
    elif plan.base_is_prefix:
        top = pl.concat([scan.revision(r) for r in newer])
        if len(newer) > 1:
            top = _latest(top, ids)
        merged = pl.concat([base.join(top.select(ids), on=ids, how="anti"), top])
    else:  # a revision read on top of a compaction is older than rows it holds
        merged = _latest(pl.concat([base, *(scan.revision(r) for r in newer)]), ids)
    if plan.only_ids_of is not None:
        merged = merged.join(scan.ids_of(plan.only_ids_of, ids), on=ids, how="semi")
    if not keep_deleted:
        merged = merged.filter(~pl.col(DELETED))
    wanted = list(schema) if columns is None else [*ids, *(c for c in columns if c not in ids)]
    system = [DELETED] if keep_deleted else []
    if with_hash:
        system.append(ROW_HASH)
    if with_revision:
        merged = merged.with_columns(revision_columns(plan.merge, pl.col(_SEQ)))
        system += list(REVISION_COLUMNS)
    return merged.select(*wanted, *system)


def revision_columns(revisions: Sequence[Revision], sequence: pl.Expr) -> list[pl.Expr]:
    """``_revision``, ``_revision_timestamp``, ``_revision_sequence`` of the revision with
    ``sequence`` among ``revisions`` (null for others)."""
    names = {r.sequence: r.name for r in revisions}
    stamps = {r.sequence: r.timestamp for r in revisions}
    return [
        sequence.replace_strict(names, default=None, return_dtype=pl.String).alias(
            REVISION_COLUMNS[0]
        ),
        sequence.replace_strict(stamps, default=None, return_dtype=UTC_MICROS).alias(
            REVISION_COLUMNS[1]
        ),
        sequence.alias(REVISION_COLUMNS[2]),
    ]


def blank_deletions(df: pl.LazyFrame, ids: Sequence[str]) -> pl.LazyFrame:
    """Deletion rows carry only their ids: value columns are null where ``_deleted``."""
    keep = {*ids, DELETED, ROW_HASH, *REVISION_COLUMNS}
    names = df.collect_schema().names()
    return df.with_columns(
        pl.when(~pl.col(DELETED)).then(pl.col(c)).alias(c) for c in names if c not in keep
    )
