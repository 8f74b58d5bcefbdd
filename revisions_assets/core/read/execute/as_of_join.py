"""A point-in-time join on Spark: one Spark plan for an ``AsOfJoinPlan``
(``read/plan/as_of_join.py`` says what it means; ``polars_as_of_join.py`` runs the same plan
in Polars).

The rows of the later spans' revisions are read in one scan (the one-scan reader of
``spark_scan.py``); one window over them, partitioned by the ids (which the join's shuffle
then reuses), cuts each row's span at the start of the entity's next later row, and a join
on the ids with the span condition meets at most one row per event. The spans and the
revision's name are looked up from the row's order, not shuffled. The first revision's rows
skip the window: a second merge join on the ids (the events are shuffled once) gives them
to the events no later row took. One small aggregate runs first: the range of the events'
keys, so that only the files whose id ranges meet it are read (``read/plan/pruning.py``),
and, when a span's revision was removed by a vacuum, the range of the event times, to
decide whether any event falls in it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType, StringType, StructField, TimestampType

from ...arguments import check_type
from ...columns import DELETED, REVISION
from ...errors import ArgumentTypeError
from ...storage.base import Storage
from ..plan.as_of_join import AsOfJoinPlan, SpanRead
from ..plan.pruning import key_bounds
from ..plan.schema import table_schema
from .spark_scan import ORDER, revision_rows, revision_value, spark_schema

_EVENT_US = "__event_us"
_START, _END = "__span_start_us", "__span_end_us"
_KEY_PREFIX = "__key_"
_FIRST_PREFIX = "__first_"


def spark_as_of_join(
    spark: SparkSession,
    storage: Storage,
    plan: AsOfJoinPlan,
    events: DataFrame,
    *,
    event_time: str,
    on: object,
) -> DataFrame:
    """Every event row with the plan's value columns as of its time, as known at the plan's
    ``known_at``, and ``_revision`` (the revision that wrote the row); nulls when the
    entity did not exist then (or was deleted)."""
    check_type(events, DataFrame, "events_df", "a Spark DataFrame")
    pairs = plan.join_keys(events.columns, event_time, on)
    kind = events.schema[event_time].dataType
    if not isinstance(kind, TimestampType):
        raise ArgumentTypeError(
            f"event_time column {event_time!r} must be a timestamp (TimestampType, an instant), "
            f"got {kind.simpleString()}; cast it, e.g. F.to_utc_timestamp(col, 'UTC')"
        )
    ids = list(plan.id_columns)
    values = list(spark_schema(plan.values).fields)
    marked = events.withColumn(_EVENT_US, F.col(event_time))
    when = F.unix_micros(marked[_EVENT_US])
    # one small aggregate: the range of the events' keys, whose files alone are read, and
    # whether any event falls in a span whose files a vacuum removed
    extent = [F.min(when), F.max(when)] if plan.removed else []
    found = marked.select(*[f(marked[e]) for e in pairs for f in (F.min, F.max)], *extent).first()
    keys = key_bounds(
        {i: (found[2 * n], found[2 * n + 1]) for n, i in enumerate(pairs.values())},
        plan.id_types,
    )
    low, high = (found[-2], found[-1]) if plan.removed else (None, None)
    reads = plan.reads(low, high, keys)
    if reads.first is None:
        nulls = {f.name: F.lit(None).cast(f.dataType) for f in values}
        return events.withColumns({**nulls, REVISION: F.lit(None).cast("string")})

    first, later = reads.first, list(reads.later)
    tombstones = reads.tombstones
    joined = marked
    if later:
        # the row of an entity an event gets is the latest (by ORDER) whose span holds the
        # event's time; since a later revision's span ends no earlier than an earlier
        # one's, that is the row whose span holds it cut at the next later row's start: one
        # window over the rows makes the spans disjoint per entity
        keys = [_KEY_PREFIX + c for c in ids]
        rows = _span_rows(spark, storage, plan, later, values, tombstones, "")
        start = revision_value([s.start_us for s in later], LongType())
        newer = Window.partitionBy(*keys).orderBy(F.col(ORDER).desc())
        cut = F.min(start).over(newer.rowsBetween(Window.unboundedPreceding, -1))
        end = F.least(revision_value([s.end_us for s in later], LongType()), cut)
        rows = rows.withColumns({_START: start, _END: end})
        rows = rows.where(F.col(_END).isNull() | (F.col(_START) < F.col(_END)))
        condition = [marked[e] == rows[_KEY_PREFIX + i] for e, i in pairs.items()]
        condition += [rows[_START] <= when, rows[_END].isNull() | (when < rows[_END])]
        joined = marked.join(rows, on=condition, how="left")

    # the first revision wins only where no later row holds the event, which no later
    # start cuts: its rows need no window, and the events, already partitioned by the ids,
    # meet them in a second merge join
    base = _span_rows(spark, storage, plan, [first], values, tombstones, _FIRST_PREFIX)
    condition = [marked[e] == base[_FIRST_PREFIX + i] for e, i in pairs.items()]
    condition.append(F.lit(first.start_us) <= when)
    if first.end_us is not None:
        condition.append(when < F.lit(first.end_us))
    joined = joined.join(base, on=condition, how="left")

    def pick(column: str) -> Column:
        """The later row's value where one holds the event, else the first revision's."""
        chosen = F.col(_FIRST_PREFIX + column)
        return (
            F.when(F.col(ORDER).isNotNull(), F.col(column)).otherwise(chosen) if later else chosen
        )

    name = F.when(F.col(_FIRST_PREFIX + ids[0]).isNotNull(), F.lit(first.revision.name))
    if later:  # null where no later row holds the event
        name = F.coalesce(revision_value([s.revision.name for s in later], StringType()), name)
    added = [*(pick(f.name).alias(f.name) for f in values), name.alias(REVISION)]
    if tombstones:  # a tombstone leaves the event's columns null
        deleted = F.coalesce(pick(DELETED), F.lit(False))
        types: list[DataType] = [*(f.dataType for f in values), StringType()]
        added = [
            F.when(deleted, F.lit(None).cast(t)).otherwise(c).alias(n)
            for c, n, t in zip(added, [*(f.name for f in values), REVISION], types, strict=True)
        ]
    return joined.select(*events.columns, *added)


def _span_rows(
    spark: SparkSession,
    storage: Storage,
    plan: AsOfJoinPlan,
    spans: Sequence[SpanRead],
    values: Sequence[StructField],
    tombstones: bool,
    prefix: str,
) -> DataFrame:
    """The rows of the spans' revisions: the ids as ``__key_<id>`` (``prefix`` + id when a
    prefix is given), the value columns in the table's types (``prefix`` + name), the
    tombstone flag, and ORDER (the span's index) when no prefix is given."""
    ids = plan.id_columns
    tasks = [s.task for s in spans]
    schema = table_schema([s.revision for s in spans], plan.table)
    rows = revision_rows(spark, storage, schema, tasks)
    present = set(rows.columns)
    return rows.select(
        *[F.col(c).alias((prefix or _KEY_PREFIX) + c) for c in ids],
        *[
            (F.col(f.name) if f.name in present else F.lit(None))
            .cast(f.dataType)
            .alias(prefix + f.name)
            for f in values
        ],
        *([F.col(DELETED).alias(prefix + DELETED)] if tombstones else []),
        *([] if prefix else [F.col(ORDER)]),
    )


__all__ = ["spark_as_of_join"]
