"""Scenario 19: the datasets as a Spark data source, ``format("revisions")``.

* A batch read of the latest state of N x 11 columns after ``reader_minors`` minors of p·N:
  ``spark.read.format("revisions")`` (planned by the source on the driver, read by its
  Polars tasks in Spark's Python workers, handed to Spark as Arrow batches) against the
  engine's ``ds.read()`` on the same session, each into Spark's no-op sink.
* One micro-batch of the change feed holding one minor of p·N, in a running query into the
  no-op sink, as Spark times it (``triggerExecution``), against the same revision's changes
  read by ``ds.changes()``; and what a new query's start adds: a query started at the
  position before a minor with ``trigger(availableNow=True)`` (Spark's Python processes
  for the source, the checkpoint, the batch).
* The lag of a running feed (``trigger(processingTime=...)``): from a minor's commit to the
  end of the micro-batch that delivered it (a ``foreachBatch`` sink reading every row).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from pathlib import Path

from revisions_assets.spark import register

from .data import TABLE, entities, updates
from .harness import (
    Context,
    Outcome,
    Row,
    Timing,
    cpu_ratio,
    evaluate,
    fmt_seconds,
    measure_pair,
    ratio,
    report,
)
from .scenarios import commit, new_dataset


def spark_source(ctx: Context) -> Outcome:
    cfg, spark = ctx.config, ctx.spark
    register(spark)
    ds = new_dataset(ctx, "s16")
    commit(ds, entities(spark, cfg.n, 0), is_major=True)
    for g in range(1, cfg.reader_minors + 1):
        commit(ds, updates(spark, cfg.n, cfg.p, g), is_major=False)

    def source_read() -> None:
        evaluate(spark.read.format("revisions").option("table", TABLE).load(ds.root))

    source, engine = measure_pair(
        ctx,
        ('spark.read.format("revisions")', source_read),
        ("ds.read()", lambda: evaluate(ds.read(TABLE))),
    )
    k = cfg.reader_minors
    rows = [
        report(
            ctx,
            Row(
                "19 Spark data source",
                f"latest state, N={cfg.n:,} x 11 columns, k = {k} minors of {cfg.p:.0%}",
                [
                    f"format('revisions') {fmt_seconds(source.median)}",
                    f"ds.read() {fmt_seconds(engine.median)}",
                ],
                ratio(source.median, engine.median),
                "format('revisions') / ds.read()",
                "<= 1.5",
                1.5,
                note="each side planned anew per read; the source's parts read by Polars in "
                "Spark's Python workers, handed over as Arrow batches",
                cpu_ratio=cpu_ratio(source, engine),
            ),
        )
    ]
    before = ds.head_sequence
    commit(ds, updates(spark, cfg.n, cfg.p, k + 1), is_major=False)
    after = ds.head_sequence
    checkpoints = iter(range(1_000_000))

    def micro_batch() -> None:
        checkpoint = ctx.folder("s16", "checkpoints", str(next(checkpoints)))
        feed(ctx, ds.root, startingPosition=str(before)).writeStream.format("noop").option(
            "checkpointLocation", str(checkpoint)
        ).trigger(availableNow=True).start().awaitTermination()

    def changes() -> None:
        evaluate(ds.changes(TABLE, since_sequence=before, until_sequence=after).df)

    started, read = measure_pair(
        ctx, ("a query's start and its batch", micro_batch), ("ds.changes()", changes)
    )
    batches, changed = feed_batches(ctx, ds, k + 2)
    rows.append(
        report(
            ctx,
            Row(
                "19 change feed micro-batch",
                f"one minor of p·N = {int(cfg.n * cfg.p):,} rows over N={cfg.n:,}",
                [
                    f"micro-batch {fmt_seconds(statistics.median(batches))}",
                    f"ds.changes() {fmt_seconds(changed.median)}",
                ],
                ratio(statistics.median(batches), changed.median),
                "micro-batch / ds.changes()",
                "<= 2",
                2.0,
                note="a running query's batch, as Spark times it (triggerExecution: the offsets, "
                "the plan, the read into the no-op sink, the checkpoint); ds.changes() of the "
                "same revision into the no-op sink",
            ),
        )
    )
    rows.append(
        report(
            ctx,
            Row(
                "19 change feed query start",
                f"one minor of p·N = {int(cfg.n * cfg.p):,} rows over N={cfg.n:,}",
                [
                    f"start and one batch {fmt_seconds(started.median)}",
                    f"ds.changes() {fmt_seconds(read.median)}",
                ],
                ratio(started.median, read.median),
                "availableNow query / ds.changes()",
                "report what a query's start adds",
                note="a new query (availableNow) from the position before the minor: Spark's "
                "Python processes for the source start, the checkpoint is made, one batch runs "
                "(no CPU-time ratio: the CPU of those short-lived processes escapes the count)",
            ),
        )
    )
    lags = feed_lags(ctx, ds, k + 3 + cfg.reps + cfg.warmup)
    trigger = cfg.stream_trigger_seconds
    median = statistics.median(lags)
    rows.append(
        report(
            ctx,
            Row(
                "19 change feed lag",
                f"processingTime {trigger:g} s, a minor of p·N per commit",
                [
                    f"commit to batch end: median {fmt_seconds(median)}",
                    "samples " + ", ".join(fmt_seconds(x) for x in lags),
                ],
                ratio(median, trigger),
                "lag / trigger interval",
                "report the end-to-end lag",
                note="a batch starts at the next trigger after the commit (up to one interval), "
                "then plans the change read and reads it",
            ),
        )
    )
    return Outcome(rows=rows)


def feed(ctx: Context, root: str, **options: str):
    reader = ctx.spark.readStream.format("revisions").option("table", TABLE)
    reader = reader.option("changes", "true")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(root)


def feed_batches(ctx: Context, ds, generation: int) -> tuple[list[float], Timing]:
    """The seconds of each micro-batch of a running feed (Spark's own ``triggerExecution``)
    that delivers one minor, and ``ds.changes()`` of the same minor after each."""
    cfg, spark = ctx.config, ctx.spark
    checkpoint = ctx.folder("s16", "running-checkpoint")
    query = (
        feed(ctx, ds.root, startingPosition=str(ds.head_sequence))
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    batches, changes = [], Timing("ds.changes()")
    try:
        for n, g in enumerate(range(generation, generation + cfg.reps + cfg.warmup)):
            before = ds.head_sequence
            after = commit(ds, updates(spark, cfg.n, cfg.p, g), is_major=False).sequence
            seconds, delivered = batch_seconds(query, after)
            written = ds.revision(after).tables[TABLE].rows
            if delivered != written:
                raise RuntimeError(
                    f"the batch of revision {after}: {delivered} rows, not {written}"
                )

            def read(since: int = before, until: int = after) -> None:
                evaluate(ds.changes(TABLE, since_sequence=since, until_sequence=until).df)

            if n < cfg.warmup:
                read()
                continue
            batches.append(seconds)
            changes.add(read)
    finally:
        query.stop()
    ctx.log(f"    micro-batches {', '.join(fmt_seconds(b) for b in batches)}")
    return batches, changes


def batch_seconds(query, sequence: int) -> tuple[float, int]:
    """Seconds Spark took for the batch of ``query`` that ends at ``sequence``, and its rows."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise RuntimeError(f"the feed failed: {query.exception()}")
        for progress in query.recentProgress:
            ends = [json.loads(s["endOffset"]) for s in progress["sources"] if s["endOffset"]]
            if progress["numInputRows"] and any(e.get("sequence") == sequence for e in ends):
                seconds = progress["durationMs"]["triggerExecution"] / 1000
                return seconds, progress["numInputRows"]
        time.sleep(0.1)
    raise RuntimeError(f"the feed did not deliver revision {sequence}")


def feed_lags(ctx: Context, ds, generation: int) -> list[float]:
    """Seconds from each of ``reps`` commits to the end of the batch that delivered it."""
    cfg, spark = ctx.config, ctx.spark
    delivered: dict[int, float] = {}
    arrived = threading.Condition()

    def sink(df, batch_id: int) -> None:
        top = df.agg({"_revision_sequence": "max"}).first()[0]
        with arrived:
            delivered[int(top or 0)] = time.monotonic()
            arrived.notify_all()

    checkpoint = Path(ctx.folder("s16", "lag-checkpoint"))
    query = (
        feed(ctx, ds.root, startingPosition=str(ds.head_sequence))
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=f"{cfg.stream_trigger_seconds} seconds")
        .start()
    )
    lags = []
    try:
        for g in range(generation, generation + cfg.reps + cfg.warmup):
            sequence = commit(ds, updates(spark, cfg.n, cfg.p, g), is_major=False).sequence
            committed = time.monotonic()
            with arrived:
                done = arrived.wait_for(lambda s=sequence: s in delivered, timeout=600)
            if query.exception() is not None:
                raise RuntimeError(f"the feed failed: {query.exception()}")
            if not done:
                raise RuntimeError(f"the feed did not deliver revision {sequence}")
            lags.append(delivered[sequence] - committed)
    finally:
        query.stop()
    return lags[cfg.warmup :]
