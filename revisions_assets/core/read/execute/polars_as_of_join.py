"""A point-in-time join in Polars: one lazy query for an ``AsOfJoinPlan``
(``read/plan/as_of_join.py`` says what it means; ``as_of_join.py`` runs the same plan on
Spark), in this process, no JVM.

The first revision's rows (the major, most of the table) need no window: a hash join on the
ids gives them to the events no later row holds. Only the rows of the entities the events
name are kept (a semi-join, streamed through the scan), so the join's build side grows with
the events, not with the table. The later spans' rows (the minors, few) are read through the
executor's ``span_rows``, each row's span cut at the start of the entity's next later row (a
window over those rows only), so each entity's spans are disjoint; an as-of join on the ids
(``join_asof``, backward on the span's start) of the events of the entities they hold then
finds the one row that can hold each event, kept when the event falls before its end, and
joined back by the event's index. Every join keeps the events' order, so nothing is sorted
but the events the minors can hold. Nothing is collected but the range of the events' keys
(only the files whose id ranges meet it are read: ``read/plan/pruning.py``) and, when a
vacuum removed a span's files, the range of the event times.
"""

from __future__ import annotations

from typing import Any

import narwhals as nw
import polars as pl

from ...columns import DELETED, REVISION
from ...errors import ArgumentTypeError
from ...uris import describe
from ..plan.as_of_join import AsOfJoinPlan, SpanRead
from ..plan.pruning import key_bounds
from .frames import SPAN_ORDER, Executor, Rows, SpanScan

_EVENT_US = "__event_us"
_START, _END = "__span_start_us", "__span_end_us"
_KEY_PREFIX = "__key_"
_FIRST_PREFIX = "__first_"
_FIRST_FOUND = "__first_found"
_ROW = "__event_row"
_SPAN_ROW = "__span_row"
#: the smallest and largest key of the events (what the files read are pruned by)
_RANGE = (pl.Expr.min, pl.Expr.max)


def event_frame(events: object) -> pl.LazyFrame:
    """The events as a LazyFrame: a Polars frame, or an eager frame Narwhals knows (pandas,
    PyArrow), converted."""
    if isinstance(events, pl.LazyFrame):
        return events
    if isinstance(events, pl.DataFrame):
        return events.lazy()
    try:
        return nw.from_native(events, eager_only=True).to_polars().lazy()
    except TypeError:
        raise ArgumentTypeError(
            "events_df must be a Polars DataFrame or LazyFrame (or a pandas DataFrame or "
            f"PyArrow table), got {describe(events)}"
        ) from None


def polars_as_of_join(
    executor: Executor[pl.LazyFrame],
    plan: AsOfJoinPlan,
    events: Any,
    *,
    event_time: str,
    on: object,
) -> pl.LazyFrame:
    """Every event row with the plan's value columns as of its time, as the plan knows it,
    and ``_revision``; nulls when the entity did not exist then (or was deleted)."""
    frame = event_frame(events)
    columns = frame.collect_schema()
    pairs = plan.join_keys(columns.names(), event_time, on)
    kind = columns[event_time]
    if not isinstance(kind, pl.Datetime) or kind.time_zone is None:
        raise ArgumentTypeError(
            f"event_time column {event_time!r} must be a datetime with a time zone (an "
            f"instant), got {kind}; e.g. pl.col({event_time!r}).dt.replace_time_zone('UTC')"
        )
    types = executor.empty(plan.schema, Rows()).collect_schema()
    ids = list(plan.id_columns)
    values = [f.name for f in plan.values]
    keys = [_KEY_PREFIX + i for i in ids]
    marked = frame.with_columns(
        pl.col(event_time).dt.epoch("us").alias(_EVENT_US),
        *[pl.col(e).cast(types[i], strict=False).alias(_KEY_PREFIX + i) for e, i in pairs.items()],
    )
    # the range of the events' keys, whose files alone are read, and whether any event
    # falls in a span whose files a vacuum removed
    times = pl.col(_EVENT_US)
    extent = [times.min().alias("__low"), times.max().alias("__high")] if plan.removed else []
    found = marked.select(
        *[f(pl.col(k)).alias(f"__{f.__name__}{n}") for n, k in enumerate(keys) for f in _RANGE],
        *extent,
    ).collect()
    ranges = found.row(0)
    key_range = key_bounds(
        {i: (ranges[2 * n], ranges[2 * n + 1]) for n, i in enumerate(ids)}, plan.id_types
    )
    low, high = (ranges[-2], ranges[-1]) if plan.removed else (None, None)
    reads = plan.reads(low, high, key_range)
    if reads.first is None:
        nulls = [pl.lit(None, dtype=types[v]).alias(v) for v in values]
        return frame.with_columns(*nulls, pl.lit(None, dtype=pl.String).alias(REVISION))
    tombstones = reads.tombstones

    def rows(spans: tuple[SpanRead, ...], prefix: str) -> pl.LazyFrame:
        """The spans' rows: the ids as ``__key_<id>``, the values (``prefix`` + name), the
        tombstone flag and, without a prefix, the span's index."""
        scan = SpanScan(plan.table, plan.schema, tuple(s.task for s in spans), {})
        return executor.span_rows(scan).select(
            *[pl.col(i).alias(k) for i, k in zip(ids, keys, strict=True)],
            *[pl.col(v).alias(prefix + v) for v in values],
            *([pl.col(DELETED).alias(prefix + DELETED)] if tombstones else []),
            *([] if prefix else [pl.col(SPAN_ORDER)]),
        )

    when = pl.col(_EVENT_US)
    later = reads.later
    if later:
        marked = marked.with_row_index(_ROW)  # joins a later row back to its event
    # the first revision wins only where no later row holds the event, and no later start
    # cuts it: a plain hash join on the ids, whose build side holds the first revision's
    # rows of the entities the events name, not the whole major
    first = reads.first
    named = marked.select(keys).unique()
    base = rows((first,), _FIRST_PREFIX).join(named, on=keys, how="semi")
    joined = marked.join(
        base.with_columns(pl.lit(True).alias(_FIRST_FOUND)),
        on=keys,
        how="left",
        maintain_order="left",
    )
    found = pl.col(_FIRST_FOUND).fill_null(False) & (when >= first.start_us)
    if first.end_us is not None:
        found = found & (when < first.end_us)
    if later:
        # each row wins from its span's start until its span ends or the entity's next
        # later row starts (a later span never ends before an earlier one's): disjoint
        # spans per entity, so the row with the latest start at or before the event is
        # the only one that can hold it
        start = pl.col(SPAN_ORDER).replace_strict(
            dict(enumerate(s.start_us for s in later)), return_dtype=pl.Int64
        )
        end = pl.col(SPAN_ORDER).replace_strict(
            dict(enumerate(s.end_us for s in later)), return_dtype=pl.Int64
        )
        cut = pl.col(_START).cum_min().shift(1).over(keys, order_by=SPAN_ORDER, descending=True)
        spans = (
            rows(later, "")
            .with_columns(start.alias(_START), end.alias(_END))
            .with_columns(pl.min_horizontal(_END, cut).alias(_END))
            .filter(pl.col(_END).is_null() | (pl.col(_START) < pl.col(_END)))
            .with_row_index(_SPAN_ROW)
        )
        # the events a later row holds (few), found among the events of the entities the
        # later rows name, on the spans' bounds alone; then the rows' values
        held = (
            marked.select(_ROW, _EVENT_US, *keys)
            .join(spans.select(keys).unique(), on=keys, how="semi")
            .sort(_EVENT_US)
            .join_asof(
                spans.select(_SPAN_ROW, *keys, _START, _END).sort(_START),
                left_on=_EVENT_US,
                right_on=_START,
                by=keys,
                strategy="backward",
                check_sortedness=False,  # both sides are sorted here
            )
            .filter(pl.col(_START).is_not_null() & (pl.col(_END).is_null() | (when < pl.col(_END))))
            .select(_ROW, _SPAN_ROW)
            .join(spans.drop(*keys, _START, _END), on=_SPAN_ROW, how="inner")
            .drop(_SPAN_ROW)
        )
        joined = joined.join(held, on=_ROW, how="left", maintain_order="left")

    def pick(column: pl.Expr, first_value: pl.Expr) -> pl.Expr:
        """The later row's value where one holds the event, else the first revision's."""
        if not later:
            return pl.when(found).then(first_value)
        return pl.when(pl.col(SPAN_ORDER).is_not_null()).then(column).when(found).then(first_value)

    names = dict(enumerate(s.revision.name for s in later))
    name = pick(
        pl.col(SPAN_ORDER).replace_strict(names, return_dtype=pl.String),
        pl.lit(first.revision.name),
    )
    added = [
        *(pick(pl.col(v), pl.col(_FIRST_PREFIX + v)).alias(v) for v in values),
        name.alias(REVISION),
    ]
    if tombstones:  # a tombstone leaves the event's columns null
        deleted = pick(pl.col(DELETED), pl.col(_FIRST_PREFIX + DELETED)).fill_null(False)
        added = [pl.when(~deleted).then(c) for c in added]
        added = [c.alias(n) for c, n in zip(added, [*values, REVISION], strict=True)]
    return joined.select(*columns.names(), *added)
