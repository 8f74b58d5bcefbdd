"""Scenario 17: what a read moves across the storage boundary, now that majors and compactions
are clustered by id and plans prune files by the id ranges the log records.

* Local, at ``reader_scale`` x N (8M rows at scale 1), a major and ``reader_minors`` minors
  of p: a lookup of 10 ids spread over the range (``scan().filter(id in 10 ids)``) against
  a full ``read()``, and against its floor beside it: raw Polars over only the files whose
  ranges hold the ids, no merge.
* Local, the SCD2 history of one entity at ``layout_history_revisions`` revisions (a major
  of N/10 and minors of p, staged) against the whole history.
* Spark, the latest read after k = 1 and k = 10 minors against the hand-written plan over
  the same files (the base anti-joined with a broadcast of the minors' ids, plus the
  minors' rows: scenario 2's floor).
* Spark, a major's commit, clustered by id, against a plain Spark write of the same rows,
  for rows that come in id order (a range: Spark adds no shuffle) and in no order.
"""

from __future__ import annotations

import dataclasses

import polars as pl
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from revisions_assets import DatasetReader

from .data import ID, TABLE, entities, updates
from .harness import (
    Context,
    Outcome,
    Row,
    cpu_ratio,
    evaluate,
    fmt_seconds,
    measure_pair,
    ratio,
    report,
)
from .reader import dataset
from .scenarios import commit, new_dataset
from .staging import stage_minors


def layout(ctx: Context) -> Outcome:
    rows = [*_lookup(ctx), *_history(ctx), *_spark_reads(ctx), *_major_commit(ctx)]
    return Outcome(rows=[report(ctx, r) for r in rows])


def _lookup(ctx: Context) -> list[Row]:
    cfg, k = ctx.config, ctx.config.reader_minors
    n = cfg.reader_scale * cfg.n
    ds = dataset(ctx, "s17_lookup", n, k)
    reader = DatasetReader(ds.root)
    ten = list(range(0, n, max(1, n // 10)))[:10]
    wanted = pl.col(ID).is_in(ten)

    def lookup() -> pl.DataFrame:
        return reader.scan(TABLE).filter(wanted).read()

    scan = reader.scan(TABLE).filter(wanted)
    files = reader._local([p for planned in scan.plan_files() for p in planned.paths])
    every = sum(len(p.paths) for p in reader.scan(TABLE).plan_files())

    def floor() -> pl.DataFrame:
        return pl.scan_parquet(files).filter(wanted).collect()

    assert lookup().height == len(ten)
    ours, whole = measure_pair(
        ctx, ("lookup of 10 ids", lookup), ("read()", lambda: reader.read(TABLE))
    )
    again, raw = measure_pair(ctx, ("lookup of 10 ids", lookup), ("raw Polars lookup", floor))
    case = f"N={n:,} x 11, after {k} minors of {cfg.p:.0%}"
    return [
        Row(
            "17 local lookup of 10 ids",
            case,
            [f"lookup {fmt_seconds(ours.median)}", f"full read {fmt_seconds(whole.median)}"],
            ratio(ours.median, whole.median),
            "scan().filter(id in 10 ids) / read()",
            "<= 0.02",
            0.02,
            note=f"the plan reads {len(files)} of {every} files: those whose id ranges (in "
            "the log) hold one of the ids",
            cpu_ratio=cpu_ratio(ours, whole),
        ),
        Row(
            "17 local lookup: floor",
            case,
            [f"lookup {fmt_seconds(again.median)}", f"raw Polars {fmt_seconds(raw.median)}"],
            ratio(again.median, raw.median),
            "lookup / raw scan_parquet of the same files, filtered, no merge",
            "report the floor under the lookup",
            cpu_ratio=cpu_ratio(again, raw),
        ),
    ]


def _history(ctx: Context) -> list[Row]:
    # a tenth of N: the whole history holds every row of every revision
    ctx = dataclasses.replace(ctx, config=dataclasses.replace(ctx.config, n=ctx.config.n // 10))
    cfg = ctx.config
    revisions = cfg.layout_history_revisions
    ds = new_dataset(ctx, "s17_history", compact_after=None)
    commit(ds, entities(ctx.spark, cfg.n, 0), is_major=True)
    commit(ds, updates(ctx.spark, cfg.n, cfg.p, 1), is_major=False)
    stage_minors(ctx, ds, 2, revisions - 1)
    reader = DatasetReader(ds.root)
    entity = (cfg.n // 2) - (cfg.n // 2) % max(1, int(1 / cfg.p))  # one some minors update
    one = pl.col(ID) == entity

    def of_one() -> pl.DataFrame:
        return reader.scan(TABLE).filter(one).history().read()

    versions = of_one().height
    ours, whole = measure_pair(
        ctx, ("history of one entity", of_one), ("whole history", lambda: reader.history(TABLE))
    )
    return [
        Row(
            "17 local history of one entity",
            f"N={cfg.n:,} x 11, {len(ds.revisions(TABLE)):,} revisions",
            [f"one entity {fmt_seconds(ours.median)}", f"all {fmt_seconds(whole.median)}"],
            ratio(ours.median, whole.median),
            "scan().filter(id == e).history() / history()",
            "<= 0.05",
            0.05,
            note=f"{versions} versions of the entity",
            cpu_ratio=cpu_ratio(ours, whole),
        )
    ]


def _spark_reads(ctx: Context) -> list[Row]:
    cfg, spark = ctx.config, ctx.spark
    ds = new_dataset(ctx, "s17_spark", compact_after=None)
    commit(ds, entities(spark, cfg.n, 0), is_major=True)
    columns = ds.read(TABLE).columns
    out, minors = [], 0
    for k in (1, 10):
        for g in range(minors + 1, k + 1):
            commit(ds, updates(spark, cfg.n, cfg.p, g), is_major=False)
        minors = k
        files = [[ds.storage.spark_uri(f) for f in r.tables[TABLE].files] for r in ds.revisions()]

        def by_hand(files: list[list[str]] = files) -> DataFrame:
            newer = spark.read.parquet(*[u for part in files[1:] for u in part]).select(*columns)
            base = spark.read.parquet(*files[0]).select(*columns)
            kept = base.join(F.broadcast(newer.select(ID)), ID, "left_anti")
            return kept.unionByName(newer)

        ours, hand = measure_pair(
            ctx,
            (f"latest read, k = {k}", lambda: evaluate(ds.read(TABLE))),
            ("hand-written plan", lambda b=by_hand: evaluate(b())),
        )
        threshold = {1: 1.1, 10: 1.2}[k]
        out.append(
            Row(
                "17 Spark latest read vs the hand-written plan",
                f"N={cfg.n:,} x 11, k = {k} minors of {cfg.p:.0%}",
                [f"ours {fmt_seconds(ours.median)}", f"by hand {fmt_seconds(hand.median)}"],
                ratio(ours.median, hand.median),
                "ds.read() / base anti-joined with the minors' ids + the minors' rows",
                f"<= {threshold}",
                threshold,
                note="the hand-written plan leaves out that a later minor replaces an earlier "
                "one's rows (a lower bound at k > 1)",
                cpu_ratio=cpu_ratio(ours, hand),
            )
        )
    return out


def _major_commit(ctx: Context) -> list[Row]:
    cfg, spark = ctx.config, ctx.spark
    ds = new_dataset(ctx, "s17_major")
    commit(ds, entities(spark, cfg.n, 0), is_major=True)
    plain = str(ctx.folder("s17", "plain"))
    generation = iter(range(1, 10_000))
    out = []
    for order, arranged in (
        ("in id order", lambda df: df),
        ("in no order", lambda df: df.repartition(4)),
    ):

        def rows(arranged=arranged) -> DataFrame:
            return arranged(entities(spark, cfg.n, next(generation)))

        major, written = measure_pair(
            ctx,
            (f"major commit, rows {order}", lambda r=rows: commit(ds, r(), is_major=True)),
            ("plain Spark write", lambda r=rows: r().write.mode("overwrite").parquet(plain)),
        )
        files = ds.revisions(TABLE)[-1].tables[TABLE].file_stats or ()
        out.append(
            Row(
                "17 major commit, clustered by id",
                f"N={cfg.n:,} x 11, rows {order}",
                [
                    f"commit {fmt_seconds(major.median)}",
                    f"plain write {fmt_seconds(written.median)}",
                ],
                ratio(major.median, written.median),
                "major commit / plain Spark write of its rows",
                "report (before: docs/benchmarks/index.md)",
                note=f"{len(files)} files of disjoint id ranges",
                cpu_ratio=cpu_ratio(major, written),
            )
        )
    return out
