"""Scenario 9: a point-in-time training set (``as_of_join``) against a plain join.

E events (ids drawn over N entities, event times spread over the history's logical time)
joined as of their time to a table with 30 revisions (a major and 29 minors of p·N), with
the latest knowledge; against a plain left join of the same events to a Parquet snapshot of
the latest state. Both read the events from Parquet and run into a no-op sink.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from revisions_assets import RevisionedDataset

from .data import ID, TABLE, entities
from .harness import (
    Context,
    Outcome,
    Row,
    at,
    cpu_ratio,
    evaluate,
    fmt_seconds,
    measure_pair,
    ratio,
    report,
)
from .scenarios import commit, new_dataset
from .staging import stage_minors

REVISIONS = 30
#: the knowledge both sides have: every revision committed (the plain join reads the latest)
LATEST = "all_committed"


def write_events(ctx: Context, ds: RevisionedDataset, count: int, path: str) -> None:
    """``count`` labelled events as Parquet at ``path``: ids drawn over the dataset's N
    entities, times from an hour before its first revision (``at(0)``: ``commit`` stamps the
    first at ``at(1)``) to an hour after its last."""
    n = ctx.config.n
    last = ds.revisions(TABLE)[-1].timestamp
    span_us = int((last - at(0)).total_seconds() * 1_000_000) + 3_600_000_000
    (
        ctx.spark.range(count)
        .select(
            (F.abs(F.xxhash64("id", F.lit(1))) % n).alias(ID),
            F.timestamp_micros(
                F.lit(int(at(0).timestamp() * 1_000_000))
                + F.abs(F.xxhash64("id", F.lit(2))) % F.lit(span_us)
            ).alias("event_time"),
            (F.col("id") % 2).cast("int").alias("label"),
        )
        .write.mode("overwrite")
        .parquet(path)
    )


def training_set(ctx: Context) -> Outcome:
    cfg, spark = ctx.config, ctx.spark
    ds = new_dataset(ctx, "s9", compact_after=None)
    commit(ds, entities(spark, cfg.n, 0), is_major=True)
    stage_minors(ctx, ds, 1, REVISIONS - 1)
    count = max(cfg.n // 2, 1)
    events_path = str(ctx.folder("s9", "events"))
    snapshot = str(ctx.folder("s9", "latest"))
    write_events(ctx, ds, count, events_path)
    ds.read(TABLE).write.mode("overwrite").parquet(snapshot)

    def as_of() -> None:
        events = spark.read.parquet(events_path)
        evaluate(ds.as_of_join(events, TABLE, event_time="event_time", on=[ID], known_at=LATEST))

    def plain() -> None:
        events = spark.read.parquet(events_path)
        evaluate(events.join(spark.read.parquet(snapshot), on=ID, how="left"))

    ours, join = measure_pair(ctx, ("as_of_join", as_of), ("plain join to the latest", plain))
    row = report(
        ctx,
        Row(
            "11 training set",
            f"E={count:,} events, N={cfg.n:,}, {REVISIONS} revisions (p={cfg.p:.0%})",
            [f"as_of_join {fmt_seconds(ours.median)}", f"plain join {fmt_seconds(join.median)}"],
            ratio(ours.median, join.median),
            "as_of_join / plain join",
            "<= 2 (stated at 1M events, 2M entities)",
            2.0,
            note="known_at='all_committed'; the plain join reads a Parquet snapshot of the "
            "latest state",
            cpu_ratio=cpu_ratio(ours, join),
        ),
    )
    return Outcome(rows=[row])
