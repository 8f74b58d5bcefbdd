"""The SCD2 history of a table in logical time (SPEC §8): one Spark plan, nothing collected.

One row per version of an entity: the table's columns plus ``valid_from``, ``valid_to``
(null while current), ``is_current``, ``is_deleted`` and ``_revision`` (the revision that
wrote the version). The history is the state-as-of-T function of SPEC §3 written as
intervals, so the rows with ``valid_from <= T < valid_to`` (and not ``is_deleted``) are
exactly ``read(as_of=T)`` for every T:

* the state only changes at revision timestamps; each revision's rows compete while the
  revision is live (``selection.live_spans``: from its timestamp until a later major voids
  it), and the latest live row of an entity wins;
* a version opens only when the entity's values change (compared as values, not by
  revision): a major that rewrites an entity unchanged opens nothing;
* an entity that disappears (a tombstone, or a major that no longer contains it) gets a
  deletion row: null values, ``is_deleted``, valid until it is re-created, which opens a
  new version (resurrection);
* an out-of-order backfill lands at its logical time;
* after a vacuum removed revisions the whole history needs, it starts from the state at a
  time the plan names (``selection.plan_history``): the spans live after it, a compaction's
  rows standing for the revisions it contains, and a version already open then reported
  from it (docs/concepts/read-semantics.md).

The plan: the rows of every live revision, tagged with their revision's span (array
literals indexed by the revision's order); then, per entity (one shuffle by the id
columns, which every window shares), the interval each row wins, the gaps left by voiding
majors, and the merge of equal consecutive states.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from ..columns import IS_CURRENT, IS_DELETED, REVISION, VALID_FROM, VALID_TO
from ..log.records import Revision
from ..storage.base import Storage
from .selection import HistoryPlan
from .spark_merge import DELETED, ORDER, read_revisions, revision_value, table_schema


def history_schema(schema: StructType) -> StructType:
    """The columns of a history: the table's, then the SCD2 columns."""
    return StructType(
        [
            *schema.fields,
            StructField(VALID_FROM, TimestampType(), True),
            StructField(VALID_TO, TimestampType(), True),
            StructField(IS_CURRENT, BooleanType(), True),
            StructField(IS_DELETED, BooleanType(), True),
            StructField(REVISION, StringType(), True),
        ]
    )


def table_history_frame(
    spark: SparkSession,
    storage: Storage,
    table: str,
    history: Sequence[Revision],
    plan: HistoryPlan,
    since: datetime | None = None,
) -> DataFrame:
    """The SCD2 history of ``table`` from the live spans of its revisions (in rank order),
    read as ``plan`` says.

    ``history``: every revision of the table (for the schema when no span is live).
    ``since``: keep only the versions still valid after it.
    """
    ids = list(history[-1].tables[table].id_columns)
    spans = plan.spans
    if not spans:
        schema = history_schema(table_schema(history, table))
        return spark.createDataFrame([], schema)
    revisions = [s.revision for s in spans]
    schema = table_schema(revisions, table)
    values = [f.name for f in schema.fields if f.name not in ids]
    by_entity = Window.partitionBy(*ids)

    rows = read_revisions(spark, storage, table, revisions, plan.base).withColumns(
        {
            "__start": revision_value([s.start for s in spans], TimestampType()),
            "__end": revision_value([s.end for s in spans], TimestampType()),
            "__name": revision_value([s.revision.name for s in spans], StringType()),
            "__ended_by": revision_value(
                [s.ended_by.name if s.ended_by else None for s in spans], StringType()
            ),
        }
    )

    # 1. the interval each row wins: from its revision's time until the entity's next row
    #    (or until a major voids the revision); rows beaten at their own time win nothing
    won = rows.withColumn(
        "__to", F.least(F.col("__end"), F.lead("__start").over(by_entity.orderBy(ORDER)))
    ).where(F.col("__to").isNull() | (F.col("__to") > F.col("__start")))

    # 2. segments of constant state: each row's interval, and after a row voided by a major
    #    with no next row at that time, the absence until the next row (or for good)
    present = ~F.col(DELETED)
    state = F.when(present, F.struct(*[F.col(c) for c in values]))
    row_segment = _segment(F.col("__start"), present, state, F.col("__name"))
    nothing = F.lit(None).cast(StructType([schema[c] for c in values]))
    absence = _segment(F.col("__to"), F.lit(False), nothing, F.col("__ended_by"))
    next_from = F.lead("__start").over(by_entity.orderBy("__start"))
    gap = F.col("__to").isNotNull() & (next_from.isNull() | (next_from > F.col("__to")))
    segments = (
        won.withColumn("__gap", gap)
        .select(
            *ids,
            F.explode(
                F.when(F.col("__gap"), F.array(row_segment, absence)).otherwise(
                    F.array(row_segment)
                )
            ).alias("s"),
        )
        .select(*ids, "s.*")
    )

    in_time = by_entity.orderBy("__from")
    if plan.starts_at is not None:
        # 2b. from the state at starts_at: the segment then holding starts at it
        start = F.lit(plan.starts_at)
        segments = (
            segments.withColumn("__later", F.lead("__from").over(in_time))
            .where(F.col("__later").isNull() | (F.col("__later") > start))
            .withColumn("__from", F.greatest(F.col("__from"), start))
            .drop("__later")
        )

    # 3. a version starts where the state changes (values compared, not revisions); leading
    #    absences (deletions of entities that did not exist yet) are no versions
    was_present = F.lag("__present").over(in_time)
    starts = segments.withColumns(
        {
            "__seen": F.max(F.col("__present").cast("int")).over(
                in_time.rowsBetween(Window.unboundedPreceding, 0)
            ),
            "__changed": was_present.isNull()
            | (was_present != F.col("__present"))
            | (F.col("__present") & ~F.col("__state").eqNullSafe(F.lag("__state").over(in_time))),
        }
    ).where((F.col("__seen") == 1) & F.col("__changed"))

    # 4. each version is valid until the next one starts
    valid_to = F.lead("__from").over(in_time)
    out = starts.select(
        *[F.col(c) if c in ids else F.col("__state")[c].alias(c) for c in schema.fieldNames()],
        F.col("__from").alias(VALID_FROM),
        valid_to.alias(VALID_TO),
        valid_to.isNull().alias(IS_CURRENT),
        (~F.col("__present")).alias(IS_DELETED),
        F.col("__revision").alias(REVISION),
    )
    if since is not None:
        out = out.where(F.col(VALID_TO).isNull() | (F.col(VALID_TO) > F.lit(since)))
    return out


def _segment(start: Column, present: Column, state: Column, revision: Column) -> Column:
    """A stretch of one entity's time with one state (null when absent)."""
    return F.struct(
        start.alias("__from"),
        present.alias("__present"),
        state.alias("__state"),
        revision.alias("__revision"),
    )
