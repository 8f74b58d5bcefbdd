"""The Polars executor: a ``MergePlan`` as one lazy Polars query, in this process, no JVM.

The same plans as the Spark executor (``read/plan/``), run as ``LazyFrame``s, so Polars'
optimizer pushes projections and id filters into the Parquet scans and can stream the
result. Files are scanned under the read schema given up front (no footer is read to plan:
columns a file lacks read as null, Spark's INT96 instants as UTC microseconds, narrower
integers and floats are widened; files of another column type are scanned as written and
cast). A row carries its revision's sequence and order only where a read needs them (the
revision columns, or rows ranked across a compaction); rows of a compaction carry the
sequence of the revision that wrote them.

"Latest row per entity wins": when every newer row is newer than the base (the common
case), the newer revisions' rows are stacked in order, the last row of each entity kept,
and the base anti-joined with their ids; otherwise the row of the highest order per
entity, found by a semi-join with each entity's highest order. No form lets a filter on a
value column reach below the merge: pushed into a scan, it would drop an entity's newest
row and resurrect an older one.

Types follow the schemas recorded in the log: Spark's ``timestamp`` (an instant) reads as
``Datetime("us", "UTC")``, ``timestamp_ntz`` as a naive ``Datetime("us")``, decimals keep
their precision and scale.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import polars as pl

from ...columns import DELETED, REVISION_COLUMNS, ROW_HASH, SOURCE_SEQUENCE
from ..plan.as_of_join import AsOfJoinPlan
from ..plan.scans import MergePlan, ScanTask
from ..plan.schema import Schema, agrees
from .frames import SPAN_ORDER, STATE, Executor, Rows, SpanScan
from .polars_as_of_join import polars_as_of_join

#: turns the log's relative file paths into local paths (fetching them into a cache first)
LocalFiles = Callable[[Sequence[str]], list[str]]

PolarsSchema = dict[str, pl.DataType]

_SEQ, _ORDER = "__sequence", "__order"
UTC_MICROS = pl.Datetime("us", "UTC")
#: the seed of the row hash a read computes over some columns (``rehash``)
_HASH_SEED = 42

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
_CAST = pl.ScanCastOptions(
    integer_cast="upcast",
    float_cast="upcast",
    datetime_cast=["nanosecond-downcast", "convert-timezone"],
    missing_struct_fields="insert",
    extra_struct_fields="ignore",
)
_SYSTEM: PolarsSchema = {DELETED: pl.Boolean(), ROW_HASH: pl.Int64()}


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


@lru_cache(maxsize=512)
def _polars_schema(schema: Schema) -> tuple[tuple[str, pl.DataType], ...]:
    return tuple((f.name, polars_type(f.type)) for f in schema)


def polars_schema(schema: Schema) -> PolarsSchema:
    """A read schema as a Polars schema, in order."""
    return dict(_polars_schema(schema))


def empty_frame(schema: PolarsSchema) -> pl.LazyFrame:
    return pl.LazyFrame(schema=schema)


def _conform(name: str, have: pl.DataType | None, want: pl.DataType) -> pl.Expr:
    """Column ``name`` (of type ``have`` in the files, None when absent) as type ``want``."""
    if have is None:
        return pl.lit(None, dtype=want).alias(name)
    if have == want:
        return pl.col(name)
    return pl.col(name).cast(want).alias(name)


class _Scanner:
    """Scans the files of tasks into rows of the read schema + ``_deleted`` (false in files
    written before tombstones were flagged) + ``_row_hash`` (null before hashes) + the
    producing sequence and the rank of its revision."""

    def __init__(self, local: LocalFiles, schema: Schema, order: dict[int, int]):
        self.local = local
        self.schema = schema
        self.types = polars_schema(schema)
        #: sequence -> order of the revisions that rank (compaction rows look it up)
        self.order = order

    def stacked(self, tasks: Sequence[ScanTask], extra: PolarsSchema | None = None) -> pl.LazyFrame:
        """The rows of ``tasks`` in the read schema + the system columns + ``extra``, in the
        order of the tasks: one scan when every task's columns have the read types (the
        common case), else one scan per task, cast to the read types."""
        extra = extra or {}
        if all(agrees(t.schema, self.schema) for t in tasks):
            parts = [self._files([f for t in tasks for f in t.files], extra)]
        else:
            parts = [self._files(t.files, extra, own=t.schema) for t in tasks]
        parts = [p for p in parts if p is not None]
        if not parts:
            return empty_frame({**self.types, **_SYSTEM, **extra})
        rows = parts[0] if len(parts) == 1 else pl.concat(parts, how="vertical")
        return rows.with_columns(pl.col(DELETED).fill_null(False))

    def _files(
        self, files: Sequence[str], extra: PolarsSchema, own: Schema | None = None
    ) -> pl.LazyFrame | None:
        """One scan of ``files`` in the read schema; ``own``: the files' schema when its
        column types differ (scanned as written, then cast)."""
        if not files:
            return None
        types = self.types if own is None or agrees(own, self.schema) else polars_schema(own)
        rows = pl.scan_parquet(
            self.local(files),
            schema={**types, **_SYSTEM, **extra},
            missing_columns="insert",
            extra_columns="ignore",
            cast_options=_CAST,
        )
        if types is self.types:
            return rows
        return rows.select(
            *[_conform(n, types.get(n), t) for n, t in self.types.items()], *_SYSTEM, *extra
        )

    def revisions(self, tasks: Sequence[ScanTask]) -> pl.LazyFrame:
        """The rows of data revisions (tombstones included), each with its revision's
        sequence and order as literals: one scan per revision, stacked in order."""
        parts = [
            self.stacked([task]).with_columns(
                pl.lit(task.sequence, dtype=pl.Int64).alias(_SEQ),
                pl.lit(task.order, dtype=pl.Int64).alias(_ORDER),
            )
            for task in tasks
        ]
        return parts[0] if len(parts) == 1 else pl.concat(parts, how="vertical")

    def compaction(self, base: ScanTask) -> pl.LazyFrame:
        rows = self.stacked([base], {SOURCE_SEQUENCE: pl.Int64()}).rename({SOURCE_SEQUENCE: _SEQ})
        order = pl.col(_SEQ).replace_strict(self.order, default=-1, return_dtype=pl.Int64)
        return rows.with_columns(order.alias(_ORDER))

    def ids_of(self, tasks: Sequence[ScanTask], ids: Sequence[str]) -> pl.LazyFrame:
        """The distinct ids ``tasks`` wrote."""
        return self.stacked(tasks).select(ids).unique()


def _latest(rows: pl.LazyFrame, ids: Sequence[str]) -> pl.LazyFrame:
    """The row of the highest order per entity (a revision writes an entity once): a
    semi-join with each entity's highest order, so no filter reaches below it."""
    best = rows.group_by(ids).agg(pl.col(_ORDER).max())
    return rows.join(best, on=[*ids, _ORDER], how="semi")


def merge_frame(local: LocalFiles, plan: MergePlan, rows_wanted: Rows = STATE) -> pl.LazyFrame:
    """The latest row per entity over a merge plan (the Spark executor's rules), with the
    system columns ``rows_wanted`` asks for."""
    keep_deleted, with_revision = rows_wanted.keep_deleted, rows_wanted.with_revision
    with_sequence, with_hash = rows_wanted.with_sequence, rows_wanted.with_hash
    ids = list(plan.id_columns)
    order = {r.sequence: n for n, r in enumerate(plan.merge)}
    scan = _Scanner(local, plan.schema, order)
    newer = plan.newer
    # rows know their revision only where asked for, or where rows are ranked
    annotate = with_revision or with_sequence or not plan.base_is_prefix
    if plan.base.is_compaction:
        base = scan.compaction(plan.base)
        if not annotate:
            base = base.drop(_SEQ, _ORDER)
    else:
        base = scan.revisions([plan.base]) if annotate else scan.stacked([plan.base])
    if not newer:
        merged = base
    elif plan.base_is_prefix:
        # the newer rows stacked in order, so an entity's newest row comes last
        top = scan.revisions(newer) if annotate else scan.stacked(newer)
        if len(newer) > 1:
            top = top.unique(subset=ids, keep="last", maintain_order=False)
        merged = pl.concat([base.join(top.select(ids), on=ids, how="anti"), top])
    else:  # a revision read on top of a compaction is older than rows it holds
        merged = _latest(pl.concat([base, scan.revisions(newer)]), ids)
    if plan.only_ids_of is not None:
        merged = merged.join(scan.ids_of(plan.only_ids_of, ids), on=ids, how="semi")
    if not keep_deleted:
        merged = merged.filter(~pl.col(DELETED))
    system = [DELETED] if keep_deleted else []
    if with_hash:
        system.append(ROW_HASH)
    if with_revision:
        merged = merged.with_columns(revision_columns(plan, pl.col(_SEQ)))
        system += list(REVISION_COLUMNS)
    elif with_sequence:
        merged = merged.with_columns(pl.col(_SEQ).alias(SOURCE_SEQUENCE))
        system.append(SOURCE_SEQUENCE)
    return merged.select(*scan.types, *system)


def revision_columns(plan: MergePlan, sequence: pl.Expr) -> list[pl.Expr]:
    """``_revision``, ``_revision_timestamp``, ``_revision_sequence`` of the revision with
    ``sequence`` among the plan's merge (null for others)."""
    names = {r.sequence: r.name for r in plan.merge}
    stamps = {r.sequence: r.timestamp for r in plan.merge}
    return [
        sequence.replace_strict(names, default=None, return_dtype=pl.String).alias(
            REVISION_COLUMNS[0]
        ),
        sequence.replace_strict(stamps, default=None, return_dtype=UTC_MICROS).alias(
            REVISION_COLUMNS[1]
        ),
        sequence.alias(REVISION_COLUMNS[2]),
    ]


class PolarsExecutor(Executor[pl.LazyFrame]):
    """Runs plans as Polars ``LazyFrame``s over local files (``local`` fetches remote ones
    into a cache first and checks they are Parquet)."""

    def __init__(self, local: LocalFiles):
        self.local = local

    def merge(self, plan: MergePlan, rows: Rows = STATE) -> pl.LazyFrame:
        return merge_frame(self.local, plan, rows)

    def empty(self, schema: Schema, rows: Rows) -> pl.LazyFrame:
        types = polars_schema(schema)
        if rows.keep_deleted:
            types[DELETED] = pl.Boolean()
        if rows.with_revision:
            types.update(zip(REVISION_COLUMNS, (pl.String(), UTC_MICROS, pl.Int64()), strict=True))
        return empty_frame(types)

    def rehash(self, frame: pl.LazyFrame, columns: Sequence[str]) -> pl.LazyFrame:
        """``frame`` with ``_row_hash`` over ``columns`` only, computed now (null on
        tombstones); compared only with hashes computed the same way in the same read."""
        hashed = (
            pl.struct(sorted(columns)).hash(_HASH_SEED).reinterpret(signed=True)
            if columns
            else pl.lit(_HASH_SEED, dtype=pl.Int64)
        )
        if DELETED in frame.collect_schema():
            hashed = pl.when(~pl.col(DELETED)).then(hashed)
        return frame.with_columns(hashed.alias(ROW_HASH))

    def as_of_join(
        self, plan: AsOfJoinPlan, events: Any, *, event_time: str, on: object
    ) -> pl.LazyFrame:
        return polars_as_of_join(self, plan, events, event_time=event_time, on=on)

    def span_rows(self, scan: SpanScan) -> pl.LazyFrame:
        scanner = _Scanner(self.local, scan.schema, {})
        parts = [
            scanner.stacked([task]).with_columns(
                pl.lit(task.order, dtype=pl.Int64).alias(SPAN_ORDER)
            )
            for task in scan.tasks
        ]
        if scan.base is not None:
            orders = {q: list(o) for q, o in scan.base_orders}
            at = pl.col(_SEQ).replace_strict(orders, default=None, return_dtype=pl.List(pl.Int64))
            base = scanner.stacked([scan.base], {SOURCE_SEQUENCE: pl.Int64()})
            base = base.rename({SOURCE_SEQUENCE: _SEQ}).with_columns(at.alias(SPAN_ORDER))
            base = base.explode(SPAN_ORDER).drop(_SEQ).filter(pl.col(SPAN_ORDER).is_not_null())
            parts.append(base)
        rows = pl.concat(parts, how="vertical")
        types = {"timestamp": UTC_MICROS, "string": pl.String()}
        return rows.with_columns(
            pl.col(SPAN_ORDER)
            .replace_strict(dict(enumerate(values)), return_dtype=types[kind])
            .alias(name)
            for name, (values, kind) in scan.values.items()
        )
