"""Bitemporal reads: the state of a table as of a logical time, as known at a commit time.

``as_of_join`` builds point-in-time training sets: each event row gets the entity's row as
of the event's time (docs/concepts/read-semantics.md state rules on the logical axis), using only
the revisions
committed by ``known_at`` (the commit axis, inclusive). ``known_at="event"`` uses each
event's own time, so a corrected backfill committed later never leaks into the row an
event gets: the training set reproduces what production saw.

The planning is pure and runs on the driver over the log. For a fixed knowledge rule,
each revision of the table takes part in the state as of T for one interval of T, its
*visible span* ``[start, end)``. A revision is known at T from ``v = timestamp``
(``known_at`` fixed) or ``v = max(timestamp, committed_at)`` (``"event"``): it is in the
state as of T iff ``v <= T``, some known major ordered at or before it is visible at T,
and no known major ordered after it is. Hence
``start = max(v, min v of the majors ordered at or before it)`` and
``end = min v of the majors ordered after it`` — but a carrying major keeps the revisions
it carries, so ``end`` is over the majors that do not carry it.

The Spark plan reads the rows of the revisions with a non-empty span once (the one-scan
reader of ``core/read/execute/spark_scan.py``). Per event the row of the latest revision
by (timestamp, sequence) whose span holds the event's time wins. A later revision's span never ends
before an earlier one's (fewer majors come after it), so the times at which a row wins are
its span cut at the start of the entity's next later row: one window over the rows makes
each entity's spans disjoint, and a join on the ids with the span condition then meets at
most one row per event. The first revision's rows (most often a major with nearly every
row) lose to any later row that holds the event, so they skip the window: a second merge
join on the ids (the events are shuffled once) gives them to the events no later row
took. A tombstone leaves the event's columns null, like an event with no entity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, TimestampType

from ...arguments import check_text, check_type
from ...columns import DELETED, REVISION
from ...errors import (
    ArgumentTypeError,
    DuplicateColumnError,
    IdColumnsError,
    InvalidArgumentError,
    RetentionError,
)
from ...log.records import Revision
from ...log.view import LogView
from ...storage.base import Storage
from ...uris import describe
from ..plan.scans import retention_message, scan_task
from ..plan.schema import table_schema
from ..plan.selection import carried_by
from ..plan.spans import (
    EVENT,
    KnownAt,
    VisibleSpan,
    carried_pieces,
    check_known_at,
    visible_from,
    visible_spans,
)
from .spark_scan import ORDER, revision_rows, revision_value, spark_schema

_EVENT_US = "__event_us"
_START, _END = "__span_start_us", "__span_end_us"
_KEY_PREFIX = "__key_"
_FIRST_PREFIX = "__first_"


def join_columns(
    events: DataFrame, on: object, id_columns: Sequence[str], table: str
) -> dict[str, str]:
    """``on`` as {event column: id column}, covering every id column of ``table`` once.

    ``on``: a list of names shared by the events and the table, or a mapping from event
    columns to id columns.
    """
    if isinstance(on, str):
        on = [on]
    if isinstance(on, Mapping):
        pairs = dict(on)
    elif isinstance(on, Sequence):
        pairs = {c: c for c in on}
    else:
        raise ArgumentTypeError(
            f"on must be a list of id column names or a dict {{event column: id column}}, "
            f"got {describe(on)}"
        )
    for event_column, id_column in pairs.items():
        check_text(event_column, "an event column in on")
        check_text(id_column, "an id column in on")
        if event_column not in events.columns:
            raise IdColumnsError(
                f"on names event column {event_column!r}, which events_df does not have "
                f"(columns: {events.columns})"
            )
        if id_column not in id_columns:
            raise IdColumnsError(
                f"on names {id_column!r}, which is not an id column of table {table!r} "
                f"(id columns: {list(id_columns)})"
            )
    missing = [c for c in id_columns if c not in pairs.values()]
    if missing or len(set(pairs.values())) != len(pairs):
        raise IdColumnsError(
            f"on must match each id column of table {table!r} ({list(id_columns)}) exactly "
            f"once, got {on!r}"
        )
    return pairs


def check_event_time(events: DataFrame, event_time: object) -> str:
    check_text(event_time, "event_time")
    assert isinstance(event_time, str)
    if event_time not in events.columns:
        raise InvalidArgumentError(
            f"event_time {event_time!r} is not a column of events_df (columns: {events.columns})"
        )
    kind = events.schema[event_time].dataType
    if not isinstance(kind, TimestampType):
        raise ArgumentTypeError(
            f"event_time column {event_time!r} must be a timestamp (TimestampType, an instant), "
            f"got {kind.simpleString()}; cast it, e.g. F.to_utc_timestamp(col, 'UTC')"
        )
    return event_time


def _check_clashes(events: DataFrame, added: Sequence[str], table: str) -> None:
    """The added columns must not exist in the events (compared as Spark does, ignoring case)."""
    taken = {c.lower(): c for c in events.columns}
    for column in added:
        if column.lower() in taken:
            raise DuplicateColumnError(
                f"events_df already has column {taken[column.lower()]!r}, which as_of_join adds "
                f"from table {table!r}; rename it first, e.g. "
                f"events_df.withColumnRenamed({taken[column.lower()]!r}, 'event_{column}')"
            )


def needed_spans(
    view: LogView, spans: Sequence[VisibleSpan], events: DataFrame, what: str
) -> list[VisibleSpan]:
    """The spans to read; RetentionError if an event needs a revision a vacuum removed.

    Only when some span's revision is removed does this run one small aggregate (the range
    of the event times) to decide whether any event falls in it.
    """
    removed = [s for s in spans if view.is_removed(s.revision.sequence)]
    if not removed:
        return list(spans)
    low, high = events.select(
        F.min(F.unix_micros(F.col(_EVENT_US))), F.max(F.unix_micros(F.col(_EVENT_US)))
    ).first()
    if low is None:
        return [s for s in spans if s not in removed]
    for span in removed:
        if span.meets(low, high):
            vacuum = view.removed_by(span.revision.sequence)
            assert vacuum is not None
            raise RetentionError(retention_message(what, span.revision, vacuum))
    return [s for s in spans if s not in removed]


def as_of_join_plan(
    spark: SparkSession,
    storage: Storage,
    view: LogView,
    events: DataFrame,
    table: str,
    *,
    event_time: str,
    on: object,
    known_at: KnownAt = None,
) -> DataFrame:
    """Every event row with the table's non-id columns as of its time, as known at
    ``known_at``, and ``_revision`` (the revision that wrote the row); nulls when the
    entity did not exist then (or was deleted). One Spark plan (see the module doc)."""
    check_type(events, DataFrame, "events_df", "a Spark DataFrame")
    check_text(table, "table")
    history = view.table_revisions(table)
    ids = list(history[-1].tables[table].id_columns)
    event_time = check_event_time(events, event_time)
    pairs = join_columns(events, on, ids, table)
    known = check_known_at(known_at)
    schema = spark_schema(table_schema(history, table))
    values = [f for f in schema.fields if f.name not in ids]
    _check_clashes(events, [*(f.name for f in values), REVISION], table)

    what = f"as_of_join of table {table!r}"
    what += f" known at {known.isoformat()}" if isinstance(known, datetime) else ""
    what += " known at each event's time" if known == EVENT else ""
    marked = events.withColumn(_EVENT_US, F.col(event_time))
    spans = needed_spans(view, visible_spans(history, table, known), marked, what)
    if not spans:
        nulls = {f.name: F.lit(None).cast(f.dataType) for f in values}
        return events.withColumns({**nulls, REVISION: F.lit(None).cast("string")})

    tombstones = any(s.revision.tables[table].tombstones for s in spans)
    when = F.unix_micros(marked[_EVENT_US])
    first, later = spans[0], spans[1:]
    # the first span is never cut: it wins only where no later row holds the event
    carrying = [
        (r, visible_from(r, known))
        for r in sorted(history, key=lambda r: r.key)
        if carried_by(r, table) and (not isinstance(known, datetime) or r.committed_at <= known)
    ]
    later = carried_pieces(later, carrying, table, "start_us", "end_us")
    joined = marked
    if later:
        # the row of an entity an event gets is the latest (by ORDER) whose span holds the
        # event's time; since a later revision's span ends no earlier than an earlier
        # one's, that is the row whose span holds it cut at the next later row's start: one
        # window over the rows (partitioned by the ids, which the join's shuffle then
        # reuses) makes the spans disjoint per entity, and each event meets at most one
        # row. The spans and the revision's name are looked up from ORDER, not shuffled.
        keys = [_KEY_PREFIX + c for c in ids]
        rows = _span_rows(spark, storage, table, history, later, ids, values, tombstones, "")
        start = revision_value([s.start_us for s in later], LongType())
        newer = Window.partitionBy(*keys).orderBy(F.col(ORDER).desc())
        cut = F.min(start).over(newer.rowsBetween(Window.unboundedPreceding, -1))
        end = F.least(revision_value([s.end_us for s in later], LongType()), cut)
        rows = rows.withColumns({_START: start, _END: end})
        rows = rows.where(F.col(_END).isNull() | (F.col(_START) < F.col(_END)))
        condition = [marked[e] == rows[_KEY_PREFIX + i] for e, i in pairs.items()]
        condition += [rows[_START] <= when, rows[_END].isNull() | (when < rows[_END])]
        joined = marked.join(rows, on=condition, how="left")

    # the first revision (a major, most often nearly all the rows) wins only where no
    # later row holds the event, which no later start cuts: its rows need no window, and
    # the events, already partitioned by the ids, meet them in a second merge join
    base = _span_rows(
        spark, storage, table, history, [first], ids, values, tombstones, _FIRST_PREFIX
    )
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
        types = [*(f.dataType for f in values), StringType()]
        added = [
            F.when(deleted, F.lit(None).cast(t)).otherwise(c).alias(n)
            for c, n, t in zip(added, [*(f.name for f in values), REVISION], types, strict=True)
        ]
    return joined.select(*events.columns, *added)


def _span_rows(
    spark: SparkSession,
    storage: Storage,
    table: str,
    history: Sequence[Revision],
    spans: Sequence[VisibleSpan],
    ids: Sequence[str],
    values: Sequence[StructField],
    tombstones: bool,
    prefix: str,
) -> DataFrame:
    """The rows of the spans' revisions: the ids as ``__key_<id>`` (``prefix`` + id when a
    prefix is given), the value columns in the table's types (``prefix`` + name), the
    tombstone flag, and ORDER (the index in ``spans``) when no prefix is given."""
    tasks = [scan_task(s.revision, table, n) for n, s in enumerate(spans)]
    rows = revision_rows(spark, storage, table_schema([s.revision for s in spans], table), tasks)
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


__all__ = ["as_of_join_plan"]
