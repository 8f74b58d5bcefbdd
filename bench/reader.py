"""Scenario 12: reading without a JVM: ``DatasetReader`` (Polars) against the Spark engine,
and against delta-rs.

* Fresh process, time to a DataFrame: a new interpreter that reads the latest state of
  N/10 rows after 3 minors, through ``DatasetReader(root).read`` vs a Spark session's
  ``ds.read(...).toPandas()`` (the JVM start included: what a notebook or a script pays).
* In process, the latest state of N x 11 columns after 10 minors: ``reader.read`` vs
  ``ds.read().toArrow()`` on the run's ``local[2]`` session; and the reader's peak memory
  (a fresh process: peak RSS above its RSS after imports) against the result's Arrow size.
* Against delta-rs: the state after 4 upserts of p·N, through ``DatasetReader`` vs the same
  rows as a Delta table read by ``polars.read_delta``.
* ``revisions show`` of the fresh-process dataset, as a user types it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pyarrow.dataset as pads
from deltalake import DeltaTable, write_deltalake

from revisions_assets import DatasetReader

from .data import TABLE, entities, updates
from .delta import micros_timestamps
from .harness import Context, Outcome, Row, fmt_seconds, measure_pair, ratio, report
from .scenarios import commit, new_dataset

READER = """
from revisions_assets import DatasetReader
DatasetReader({root!r}).read({table!r})
"""
SPARK = """
from revisions_assets import RevisionedDataset, build_spark_session
spark = build_spark_session(master="local[2]", conf={{"spark.ui.enabled": "false"}})
spark.sparkContext.setLogLevel("ERROR")
RevisionedDataset({root!r}, spark=spark, read_only=True).read({table!r}).toPandas()
"""
MEMORY = """
import json, resource
import pyarrow  # noqa: F401
from revisions_assets import DatasetReader
def rss_mb():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith("VmRSS")) / 1024
base = rss_mb()
df = DatasetReader({root!r}).read({table!r})
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"base": base, "peak": peak, "arrow": df.to_arrow().nbytes / 2**20}}))
"""


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise RuntimeError(f"benchmark subprocess failed: {done.stderr[-2000:]}")
    return done.stdout


def dataset(ctx: Context, name: str, n: int, minors: int):
    ds = new_dataset(ctx, name, compact_after=None)
    commit(ds, entities(ctx.spark, n, 0), is_major=True)
    for g in range(1, minors + 1):
        commit(ds, updates(ctx.spark, n, ctx.config.p, g), is_major=False)
    return ds


def reading_without_a_jvm(ctx: Context) -> Outcome:
    cfg, spark = ctx.config, ctx.spark
    small = dataset(ctx, "s12_small", max(cfg.n // 10, 1), 3)
    fresh_reader, fresh_spark = measure_pair(
        ctx,
        ("reader, fresh process", lambda: run_python(READER.format(root=small.root, table=TABLE))),
        ("Spark, fresh process", lambda: run_python(SPARK.format(root=small.root, table=TABLE))),
    )
    script = str(Path(sys.executable).parent / "revisions")  # as a user types it

    def cli(*args: str) -> None:
        subprocess.run([script, *args], capture_output=True, check=True)

    shown, _ = measure_pair(
        ctx,
        ("revisions show", lambda: cli("show", small.root, TABLE, "--limit", "5")),
        ("revisions log", lambda: cli("log", small.root)),
    )

    big = dataset(ctx, "s12_big", cfg.n, 10)
    reader = DatasetReader(big.root)
    in_reader, in_spark = measure_pair(
        ctx,
        ("reader.read (latest)", lambda: reader.read(TABLE)),
        ("ds.read().toArrow()", lambda: big.read(TABLE).toArrow()),
    )
    memory = json.loads(run_python(MEMORY.format(root=big.root, table=TABLE)).splitlines()[-1])
    above = memory["peak"] - memory["base"]

    # delta-rs: the same rows after 4 upserts, ours through the reader
    source = str(ctx.folder("s12", "source"))
    delta = str(ctx.folder("s12", "delta"))
    ours = new_dataset(ctx, "s12_delta", compact_after=None)
    with micros_timestamps(spark):
        entities(spark, cfg.n, 0).write.mode("overwrite").parquet(source)
        for g in range(1, 5):
            updates(spark, cfg.n, cfg.p, g).write.mode("overwrite").parquet(f"{source}_u{g}")
    commit(ours, spark.read.parquet(source), is_major=True)
    write_deltalake(delta, pads.dataset(source).scanner().to_reader(), mode="overwrite")
    for g in range(1, 5):
        commit(ours, spark.read.parquet(f"{source}_u{g}"), is_major=False)
        update = pads.dataset(f"{source}_u{g}", format="parquet")
        (
            DeltaTable(delta)
            .merge(update.scanner().to_reader(), "t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
    ours_reader = DatasetReader(ours.root)
    assert ours_reader.read(TABLE).height == pl.read_delta(delta).height
    vs_reader, vs_delta = measure_pair(
        ctx,
        ("DatasetReader (4 upserts)", lambda: ours_reader.read(TABLE)),
        ("polars.read_delta (4 upserts)", lambda: pl.read_delta(delta)),
    )

    n_small = f"N={max(cfg.n // 10, 1):,} x 11, after 3 minors"
    common = f"N={cfg.n:,} x 11"
    rows = [
        Row(
            "12 reader: fresh process",
            n_small,
            [
                f"reader {fmt_seconds(fresh_reader.median)}",
                f"Spark {fmt_seconds(fresh_spark.median)}",
            ],
            ratio(fresh_reader.median, fresh_spark.median),
            "reader / Spark",
            "<= 0.25",
            0.25,
            note="a new interpreter each time; Spark: session start + read().toPandas()",
        ),
        Row(
            "12 reader: in process",
            common + ", after 10 minors",
            [f"reader {fmt_seconds(in_reader.median)}", f"Spark {fmt_seconds(in_spark.median)}"],
            ratio(in_reader.median, in_spark.median),
            "reader / Spark toArrow",
            "<= 1.0",
            1.0,
            note="Spark on local[2]",
        ),
        Row(
            "12 reader: peak memory",
            common + ", after 10 minors",
            [f"{above:.0f} MiB above imports", f"Arrow result {memory['arrow']:.0f} MiB"],
            ratio(above, memory["arrow"]),
            "peak RSS / Arrow size",
            "<= 2.5",
            2.5,
            note=f"fresh process; RSS after imports {memory['base']:.0f} MiB",
        ),
        Row(
            "12 reader vs delta-rs",
            common + f", after 4 upserts of {cfg.p:.0%}",
            [f"ours {fmt_seconds(vs_reader.median)}", f"Delta {fmt_seconds(vs_delta.median)}"],
            ratio(vs_reader.median, vs_delta.median),
            "DatasetReader / polars.read_delta",
            "<= 1.5",
            1.5,
            note="both in this process, Polars",
        ),
        Row(
            "12 reader: revisions show",
            n_small + ", --limit 5",
            [f"show {fmt_seconds(shown.median)}"],
            shown.median,
            "seconds, wall",
            "<= 1.5",
            1.5,
            note="the console script in a new process; no JVM",
        ),
    ]
    return Outcome(rows=[report(ctx, r) for r in rows])
