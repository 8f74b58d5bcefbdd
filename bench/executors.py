"""Scenario 13: one read plan, two executors — what writing a step once on Narwhals costs.

The reads share everything above the merged rows (the real-change diff, the change-read
driver, the SCD2 history), written once on Narwhals' lazy API; the scans and the merge stay
engine-specific. This scenario measures that split, side by side in one run:

* **the merge**: the native merge of each executor against the same merge written once on
  Narwhals (newer rows deduplicated by a window over the ids, the base anti-joined with
  their ids), over the same scans, at k = 10 minors;
* **the real-change diff**: a change read with ``only_changed`` of the last minor, the
  shared driver and Narwhals diff against the same join and deletions written natively for
  each engine, over the same plan and the same merged rows.
"""

from __future__ import annotations

from collections.abc import Callable

import narwhals as nw
import polars as pl
from pyspark.sql import functions as F

from revisions_assets import DatasetReader
from revisions_assets.core.columns import DELETED, ROW_HASH
from revisions_assets.core.read.execute import polars as polars_executor
from revisions_assets.core.read.execute import spark as spark_executor
from revisions_assets.core.read.execute.changes import read_changes
from revisions_assets.core.read.execute.frames import Rows
from revisions_assets.core.read.execute.spark_scan import ORDER, Scanner
from revisions_assets.core.read.plan.requests import plan_changes, plan_state
from revisions_assets.core.read.plan.scans import MergePlan

from .data import TABLE, entities, updates
from .harness import Context, Outcome, Row, cpu_ratio, evaluate, measure_pair, ratio, report
from .scenarios import commit, new_dataset

K = 10


def narwhals_merge(base: nw.LazyFrame, newer: nw.LazyFrame, ids: list[str], order: str):
    """The latest row per entity, written once: newer rows deduplicated by the highest
    order per entity, the base anti-joined with their ids."""
    top = newer.filter(nw.col(order) == nw.col(order).max().over(*ids))
    kept = base.join(top.select(ids), on=ids, how="anti")
    return nw.concat([kept, top], how="vertical").filter(~nw.col(DELETED)).drop(order)


def spark_narwhals(ctx: Context, ds, plan: MergePlan) -> Callable[[], None]:
    scan = Scanner(ctx.spark, ds.storage, plan.schema, spark_executor._about(plan))
    ids = list(plan.id_columns)

    def run() -> None:
        base = nw.from_native(
            scan.revisions([plan.base], True).drop("_revision", "__timestamp_us", "__sequence")
        )
        newer = nw.from_native(
            scan.revisions(plan.newer, True).drop("_revision", "__timestamp_us", "__sequence")
        )
        evaluate(narwhals_merge(base, newer, ids, ORDER).to_native())

    return run


def polars_narwhals(reader: DatasetReader, plan: MergePlan) -> Callable[[], None]:
    order = {r.sequence: n for n, r in enumerate(plan.merge)}
    scan = polars_executor.Scanner(reader._local, plan.schema, order)
    ids = list(plan.id_columns)

    def run() -> None:
        base = nw.from_native(scan.revisions([plan.base]).drop("__sequence"))
        newer = nw.from_native(scan.revisions(plan.newer).drop("__sequence"))
        narwhals_merge(base, newer, ids, "__order").to_native().collect()

    return run


def executors(ctx: Context) -> Outcome:
    cfg, spark = ctx.config, ctx.spark
    ds = new_dataset(ctx, "s13", compact_after=None)
    commit(ds, entities(spark, cfg.n, 0), is_major=True)
    for g in range(1, K + 1):
        commit(ds, updates(spark, cfg.n, cfg.p, g), is_major=False)
    reader = DatasetReader(ds.root)
    plan = plan_state(ds.snapshot(), TABLE).rows
    native_spark, nw_spark = measure_pair(
        ctx,
        ("native Spark merge", lambda: evaluate(ds.read(TABLE))),
        ("Narwhals merge on Spark", spark_narwhals(ctx, ds, plan)),
    )
    native_polars, nw_polars = measure_pair(
        ctx,
        ("native Polars merge", lambda: reader.read(TABLE)),
        ("Narwhals merge on Polars", polars_narwhals(reader, plan)),
    )

    # the real-change diff of a change read of the last minor, shared vs native
    changes = plan_changes(ds.snapshot(), TABLE, since_sequence=K, only_changed=True)
    assert changes.rows is not None and changes.before is not None
    ids = list(changes.id_columns)
    spark_ex = spark_executor.SparkExecutor(ds.storage, lambda: spark, "auto")
    polars_ex = polars_executor.PolarsExecutor(reader._local)

    def spark_native() -> None:
        rows = spark_ex.merge(changes.rows, Rows(keep_deleted=True, with_hash=True))
        before = spark_ex.merge(changes.before, Rows(with_hash=True)).select(
            *ids, F.col(ROW_HASH).alias("__before")
        )
        touched = F.broadcast(rows.select(*ids))
        before = F.broadcast(before.join(touched, on=ids, how="left_semi"))
        joined = rows.join(before, on=ids, how="left")
        differs = ~F.col(ROW_HASH).eqNullSafe(F.col("__before")) | F.col(ROW_HASH).isNull()
        kept = joined.where(F.col(DELETED) | differs).drop("__before", ROW_HASH)
        values = [c for c in kept.columns if c not in (*ids, DELETED)]
        evaluate(
            kept.select(
                *ids, *[F.when(~F.col(DELETED), F.col(c)).alias(c) for c in values], DELETED
            )
        )

    def polars_native() -> None:
        rows = polars_ex.merge(changes.rows, Rows(keep_deleted=True, with_hash=True))
        before = polars_ex.merge(changes.before, Rows(with_hash=True)).select(
            *ids, pl.col(ROW_HASH).alias("__before")
        )
        joined = rows.join(before, on=ids, how="left")
        differs = pl.col(ROW_HASH).ne_missing(pl.col("__before")) | pl.col(ROW_HASH).is_null()
        kept = joined.filter(pl.col(DELETED) | differs).drop("__before", ROW_HASH)
        values = [c for c in kept.collect_schema().names() if c not in (*ids, DELETED)]
        kept.with_columns(
            pl.when(~pl.col(DELETED)).then(pl.col(c)).alias(c) for c in values
        ).collect()

    shared_spark, own_spark = measure_pair(
        ctx,
        (
            "shared diff on Spark",
            lambda: evaluate(read_changes(spark_ex, changes, with_revision=False)[0]),
        ),
        ("native Spark diff", spark_native),
    )
    shared_polars, own_polars = measure_pair(
        ctx,
        (
            "shared diff on Polars",
            lambda: read_changes(polars_ex, changes, with_revision=False)[0].collect(),
        ),
        ("native Polars diff", polars_native),
    )

    common = f"N={cfg.n:,} x 11, {K} minors of p={cfg.p:.0%}"
    rows = [
        Row(
            "13 merge written once: Spark",
            common,
            [f"native {native_spark}", f"Narwhals {nw_spark}"],
            ratio(native_spark.median, nw_spark.median),
            "native / Narwhals",
            "report: keep the native merge only where it is faster",
            note="the same scans; Narwhals deduplicates the newer rows with a window",
            cpu_ratio=cpu_ratio(native_spark, nw_spark),
        ),
        Row(
            "13 merge written once: Polars",
            common,
            [f"native {native_polars}", f"Narwhals {nw_polars}"],
            ratio(native_polars.median, nw_polars.median),
            "native / Narwhals",
            "report: keep the native merge only where it is faster",
            note="the same scans (one per revision: Narwhals needs the order column)",
        ),
        Row(
            "13 real-change diff written once: Spark",
            common + ", changes of the last minor",
            [f"shared {shared_spark}", f"native {own_spark}"],
            ratio(shared_spark.median, own_spark.median),
            "shared (Narwhals) / native",
            "<= 1.1",
            1.1,
            cpu_ratio=cpu_ratio(shared_spark, own_spark),
        ),
        Row(
            "13 real-change diff written once: Polars",
            common + ", changes of the last minor",
            [f"shared {shared_polars}", f"native {own_polars}"],
            ratio(shared_polars.median, own_polars.median),
            "shared (Narwhals) / native",
            "<= 1.1",
            1.1,
        ),
    ]
    return Outcome(rows=[report(ctx, r) for r in rows])
