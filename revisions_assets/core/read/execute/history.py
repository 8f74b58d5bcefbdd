"""The SCD2 history of a table in logical time, run once for both executors.

One row per version of an entity: the table's columns plus ``valid_from``, ``valid_to``
(null while current), ``is_current``, ``is_deleted`` and ``_revision`` (the revision that
wrote the version). The history is the state-as-of-T rule of the docs' read semantics
written as intervals, so the rows with ``valid_from <= T < valid_to`` (and not
``is_deleted``) are exactly ``read(as_of=T)`` for every T:

* the state only changes at revision timestamps; each revision's rows compete while the
  revision is live (``plan/spans.py``: from its timestamp until a later major voids it),
  and the latest live row of an entity wins;
* a version opens only when the entity's values change (compared as values, not by
  revision): a major that rewrites an entity unchanged opens nothing;
* an entity that disappears (a tombstone, or a major that no longer contains it) gets a
  deletion row: null values, ``is_deleted``, valid until it is re-created, which opens a
  new version (resurrection);
* an out-of-order backfill lands at its logical time;
* after a vacuum removed revisions the whole history needs, it starts from the state at a
  time the plan names (``plan_history``): the spans live after it, a compaction's rows
  standing for the revisions it contains, and a version already open then reported from
  it (docs/concepts/read-semantics.md).

The query: the rows of every live span, tagged with the span's start, end and revision;
then, per entity (windows partitioned by the id columns), the interval each row wins, the
gaps left by voiding majors, and the merge of equal consecutive states.
"""

from __future__ import annotations

from typing import Any

import narwhals as nw

from ...columns import DELETED, IS_CURRENT, IS_DELETED, REVISION, VALID_FROM, VALID_TO
from ..plan.requests import HistoryPlan
from ..plan.schema import Field, Schema
from .frames import SPAN_ORDER, Executor, Rows, SpanScan, lazy

#: the columns a history adds to the table's, with their types
HISTORY_FIELDS: Schema = (
    Field(VALID_FROM, '"timestamp"'),
    Field(VALID_TO, '"timestamp"'),
    Field(IS_CURRENT, '"boolean"'),
    Field(IS_DELETED, '"boolean"'),
    Field(REVISION, '"string"'),
)


#: segments of an entity in time: by start, a row's own segment before the absence after it
_IN_TIME = ["__from", "__piece"]


def _same(column: str, ids: list[str]) -> nw.Expr:
    """The column equals its value in the entity's previous segment (nulls equal)."""
    now, before = nw.col(column), nw.col(column).shift(1).over(*ids, order_by=_IN_TIME)
    return (now == before).fill_null(value=False) | (now.is_null() & before.is_null())


def read_history(executor: Executor[Any], plan: HistoryPlan) -> Any:
    """The SCD2 history of ``plan`` as the executor's lazy frame."""
    ids = list(plan.id_columns)
    if not plan.spans:
        return executor.empty((*plan.schema, *HISTORY_FIELDS), Rows())
    values = [f.name for f in plan.schema if f.name not in ids]
    spans = plan.spans
    tags = {
        "__start": (tuple(s.start for s in spans), "timestamp"),
        "__end": (tuple(s.end for s in spans), "timestamp"),
        "__name": (tuple(s.revision.name for s in spans), "string"),
        "__ended_by": (tuple(s.ended_by.name if s.ended_by else None for s in spans), "string"),
    }
    scan = SpanScan(plan.table, plan.schema, plan.tasks, tags, plan.base, plan.base_orders)
    rows = lazy(executor.span_rows(scan))

    # 1. the interval each row wins: from its revision's time until the entity's next row
    #    (or until a major voids the revision); rows beaten at their own time win nothing
    next_row = nw.col("__start").shift(-1).over(*ids, order_by=SPAN_ORDER)
    won = rows.with_columns(nw.min_horizontal("__end", next_row).alias("__to")).filter(
        nw.col("__to").is_null() | (nw.col("__to") > nw.col("__start"))
    )

    # 2. segments of constant state: each row's interval, and after a row voided by a major
    #    with no next row at that time, the absence until the next row (or for good)
    next_from = nw.col("__start").shift(-1).over(*ids, order_by=["__start", SPAN_ORDER])
    won = won.with_columns(
        (~nw.col("__to").is_null() & (next_from.is_null() | (next_from > nw.col("__to")))).alias(
            "__gap"
        )
    )
    present = ~nw.col(DELETED)
    row_segments = won.select(
        *ids,
        nw.col("__start").alias("__from"),
        present.alias("__present"),
        *[nw.when(present).then(nw.col(c)).alias(c) for c in values],
        nw.col("__name").alias("__revision"),
        nw.lit(0, dtype=nw.Int64()).alias("__piece"),
    )
    absences = won.filter(nw.col("__gap")).select(
        *ids,
        nw.col("__to").alias("__from"),
        nw.lit(value=False).alias("__present"),
        *[nw.when(nw.lit(value=False)).then(nw.col(c)).alias(c) for c in values],
        nw.col("__ended_by").alias("__revision"),
        nw.lit(1, dtype=nw.Int64()).alias("__piece"),
    )
    segments = nw.concat([row_segments, absences], how="vertical")
    if plan.starts_at is not None:
        # 2b. from the state at starts_at: the segment then holding starts at it
        later = nw.col("__from").shift(-1).over(*ids, order_by=_IN_TIME)
        start = nw.lit(plan.starts_at)
        segments = segments.filter(later.is_null() | (later > start)).with_columns(
            nw.max_horizontal(nw.col("__from"), start).alias("__from")
        )

    # 3. a version starts where the state changes (values compared, not revisions); leading
    #    absences (deletions of entities that did not exist yet) are no versions
    was_present = nw.col("__present").shift(1).over(*ids, order_by=_IN_TIME)
    changed = was_present.is_null() | (was_present != nw.col("__present"))
    if values:
        same_values = nw.all_horizontal(*[_same(c, ids) for c in values], ignore_nulls=False)
        changed = changed | (nw.col("__present") & ~same_values)
    starts = segments.with_columns(
        nw.col("__present").cast(nw.Int8()).cum_max().over(*ids, order_by=_IN_TIME).alias("__seen"),
        changed.alias("__changed"),
    ).filter((nw.col("__seen") == 1) & nw.col("__changed"))

    # 4. each version is valid until the next one starts
    valid_to = nw.col("__from").shift(-1).over(*ids, order_by=_IN_TIME)
    out = starts.select(
        *[f.name for f in plan.schema],
        nw.col("__from").alias(VALID_FROM),
        valid_to.alias(VALID_TO),
        valid_to.is_null().alias(IS_CURRENT),
        (~nw.col("__present")).alias(IS_DELETED),
        nw.col("__revision").alias(REVISION),
    )
    if plan.since is not None:
        out = out.filter(nw.col(VALID_TO).is_null() | (nw.col(VALID_TO) > nw.lit(plan.since)))
    return out.to_native()
