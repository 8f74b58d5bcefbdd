"""Scenario 6: the same upsert, latest read and time-travel read against Delta Lake.

Engines (the run prints and results.md states them):

* ours: written by ``RevisionedDataset.commit`` (Spark), read by ``ds.read`` (Spark).
* Delta: written by the ``deltalake`` package (delta-rs, Rust, in this process):
  loaded by streaming the Spark-written Parquet as Arrow record batches, updated with
  ``DeltaTable.merge`` (TableMerger: update matched, insert the rest). Read by Spark
  through the table's file list (``DeltaTable(path, version).file_uris()``): no
  delta-spark release supports Spark 4.3 (``io.delta:delta-spark_2.13:4.4.0`` is built
  against Spark 4.2 and fails with ``NoSuchMethodError: LogicalRDD.<init>``), and
  delta-rs writes neither deletion vectors nor column mapping, so the file list is
  exactly the version's data (checked below).
"""

from __future__ import annotations

from contextlib import contextmanager

import deltalake
import pyarrow.dataset as pads
import pyspark
from deltalake import DeltaTable, write_deltalake

from .data import TABLE, entities, updates
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
from .scenarios import commit, new_dataset

ENGINES = (
    f"ours: written by RevisionedDataset.commit and read by ds.read, both on Spark "
    f"{pyspark.__version__}. Delta: written (initial load, MERGE) by the deltalake package "
    f"{deltalake.__version__} (delta-rs, in the driver process), read by Spark "
    f"{pyspark.__version__} via spark.read.parquet over DeltaTable.file_uris() of the version "
    "(no delta-spark release supports Spark 4.3: delta-spark_2.13 4.4.0 targets Spark 4.2 "
    "and fails with NoSuchMethodError on LogicalRDD)."
)


@contextmanager
def micros_timestamps(spark):
    """Spark writes INT96 timestamps by default; Delta wants microseconds."""
    key = "spark.sql.parquet.outputTimestampType"
    old = spark.conf.get(key)
    spark.conf.set(key, "TIMESTAMP_MICROS")
    try:
        yield
    finally:
        spark.conf.set(key, old)


def _delta_files(path: str, version: int | None = None) -> list[str]:
    table = DeltaTable(path, version=version)
    features = set(table.protocol().reader_features or [])
    unsupported = features & {"deletionVectors", "columnMapping"}
    if unsupported:
        raise RuntimeError(f"{path}: {sorted(unsupported)} make a plain file-list read wrong")
    return table.file_uris()


def against_delta(ctx: Context) -> Outcome:
    cfg, spark = ctx.config, ctx.spark
    source = str(ctx.folder("s6", "source"))
    delta = str(ctx.folder("s6", "delta"))
    rounds = cfg.warmup + cfg.reps
    with micros_timestamps(spark):
        entities(spark, cfg.n, 0).write.mode("overwrite").parquet(source)
        for g in range(1, rounds + 1):
            updates(spark, cfg.n, cfg.p, g).write.mode("overwrite").parquet(f"{source}_u{g}")
        ds = new_dataset(ctx, "s6")
        commit(ds, spark.read.parquet(source), is_major=True)
    reader = pads.dataset(source, format="parquet").scanner().to_reader()
    write_deltalake(delta, reader, mode="overwrite")
    ctx.log(f"  loaded {cfg.n:,} rows into Delta at version {DeltaTable(delta).version()}")

    gen = {"ours": iter(range(1, rounds + 1)), "delta": iter(range(1, rounds + 1))}

    def ours_upsert() -> None:
        commit(ds, spark.read.parquet(f"{source}_u{next(gen['ours'])}"), is_major=False)

    def delta_upsert() -> None:
        update = pads.dataset(f"{source}_u{next(gen['delta'])}", format="parquet")
        (
            DeltaTable(delta)
            .merge(update.scanner().to_reader(), "t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    ours_up, delta_up = measure_pair(
        ctx, ("our minor commit (1%)", ours_upsert), ("Delta MERGE (1%)", delta_upsert)
    )
    # time travel to the state right after the first upsert: our major + 1 minor; Delta v1
    first_minor = ds.revisions(TABLE)[1].sequence
    ours_latest, delta_latest = measure_pair(
        ctx,
        ("our latest-state read", lambda: evaluate(ds.read(TABLE))),
        ("Delta latest read", lambda: evaluate(spark.read.parquet(*_delta_files(delta)))),
    )
    ours_tt, delta_tt = measure_pair(
        ctx,
        ("our time-travel read", lambda: evaluate(ds.read(TABLE, at=first_minor))),
        ("Delta time-travel read", lambda: evaluate(spark.read.parquet(*_delta_files(delta, 1)))),
    )
    files = {
        "ours": sum(len(r.tables[TABLE].files) for r in ds.revisions(TABLE)),
        "delta": len(_delta_files(delta)),
    }
    common = f"N={cfg.n:,}, p={cfg.p:.0%}"
    rows = [
        Row(
            "6 vs Delta: 1% upsert",
            common,
            [f"ours {fmt_seconds(ours_up.median)}", f"Delta MERGE {fmt_seconds(delta_up.median)}"],
            ratio(ours_up.median, delta_up.median),
            "ours / Delta",
            "<= 0.25 (stated at N = 10M)",
            0.25,
            note="ours: Spark commit; Delta: delta-rs MERGE (different engines)",
            cpu_ratio=cpu_ratio(ours_up, delta_up),
        ),
        Row(
            "6 vs Delta: latest read",
            common + f", after {rounds} upserts",
            [
                f"ours {fmt_seconds(ours_latest.median)}",
                f"Delta {fmt_seconds(delta_latest.median)}",
            ],
            ratio(ours_latest.median, delta_latest.median),
            "ours / Delta",
            "<= 1.1",
            1.1,
            note=f"both read by Spark; data files: ours {files['ours']}, Delta {files['delta']}",
            cpu_ratio=cpu_ratio(ours_latest, delta_latest),
        ),
        Row(
            "6 vs Delta: time travel",
            common + ", to the state after the 1st upsert",
            [f"ours {fmt_seconds(ours_tt.median)}", f"Delta {fmt_seconds(delta_tt.median)}"],
            ratio(ours_tt.median, delta_tt.median),
            "ours / Delta",
            "<= 1.3",
            1.3,
            note="both read by Spark; ours merges major + 1 minor, Delta reads version 1's files",
            cpu_ratio=cpu_ratio(ours_tt, delta_tt),
        ),
    ]
    return Outcome(rows=[report(ctx, r) for r in rows], notes=[ENGINES])
