"""Scenario 12: reading without a JVM: ``DatasetReader`` (Polars) against the Spark engine,
and against delta-rs.

* Fresh process, time to a DataFrame: a new interpreter that reads the latest state of
  N/10 rows after 3 minors, through ``DatasetReader(root).read`` vs a Spark session's
  ``ds.read(...).toPandas()`` (the JVM start included: what a notebook or a script pays).
* In process, the latest state of N x 11 columns after k = 10 minors
  (``Config.reader_minors``): ``reader.read`` vs ``ds.read().toArrow()`` on the run's
  ``local[2]`` session.
* Against raw Polars over the same files: ``read()`` of a major alone (k = 0) vs
  ``pl.scan_parquet(files).filter(~_deleted)``; ``read()`` after k minors vs the cheapest
  correct merge written here (the minors' rows, the last per id, plus the base's rows of the
  other ids, tombstones dropped); ``scan().filter(ids in 1%).select(1 column)`` vs a full
  ``read()``.
* Peak memory (fresh processes, RSS above imports over the state's Arrow size) after k
  minors of 1% and one of 30% (a minor whose ids the merge holds):
  ``scan().to_polars().sink_parquet()`` and ``batches()`` drained at N and 4N
  (``Config.reader_scale``), the sink's peak at 4N over its peak at N, eager ``read()`` at N.
* At 4N: a lookup of 10 ids (``scan().filter(id in 10 ids)``) against a full ``read()``:
  the row groups the id filter skips.
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
from revisions_assets.core.columns import DELETED
from revisions_assets.core.read.plan.requests import plan_state

from .data import ID, TABLE, entities, updates
from .delta import micros_timestamps
from .harness import (
    Context,
    Outcome,
    Row,
    cpu_ratio,
    fmt_seconds,
    measure_pair,
    ratio,
    report,
)
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
import json
import pyarrow  # noqa: F401
from revisions_assets import DatasetReader
def rss_mb(field):
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith(field)) / 1024
reader = DatasetReader({root!r})
base = rss_mb("VmRSS")
{action}
peak = rss_mb("VmHWM")  # not ru_maxrss: it keeps the parent's peak across fork and exec
print(json.dumps({{"base": base, "peak": peak}}))
"""
#: what each memory probe does in its fresh process, after the RSS baseline
EAGER = "df = reader.read({table!r})"
#: the share of the ids the large minor of the memory probes rewrites
LARGE_MINOR = 0.30
SINK = "reader.scan({table!r}).to_polars().sink_parquet({path!r})"
BATCHES = "for _ in reader.batches({table!r}):\n    pass"


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise RuntimeError(f"benchmark subprocess failed: {done.stderr[-2000:]}")
    return done.stdout


def peak_above_imports(root: str, action: str) -> tuple[float, float]:
    """(peak RSS above the RSS after imports, RSS after imports), MiB, of a fresh process
    that opens a reader on ``root`` and runs ``action``."""
    out = run_python(MEMORY.format(root=root, action=action)).splitlines()[-1]
    memory = json.loads(out)
    return memory["peak"] - memory["base"], memory["base"]


def task_files(reader: DatasetReader) -> list[list[str]]:
    """The local files of each revision the latest read of TABLE merges, the base first."""
    tasks = plan_state(reader.snapshot(), TABLE).rows.tasks
    return [reader._local(list(t.files)) for t in tasks]


def raw_merge(files: list[list[str]], schema: pl.Schema) -> pl.DataFrame:
    """The cheapest correct merge in plain Polars: the newer revisions' rows (the last per
    id, by revision order), plus the base's rows of the ids they do not name; tombstones
    dropped, the columns cast to the reader's types (Spark's INT96 timestamps: UTC
    microseconds). Correct because every base row is older than every newer row."""
    columns = list(schema)

    def scan(paths: list[str], rank: int) -> pl.LazyFrame:
        frame = pl.scan_parquet(paths)
        if DELETED not in frame.collect_schema():
            frame = frame.with_columns(pl.lit(False).alias(DELETED))
        return frame.select(*columns, DELETED, pl.lit(rank).alias("_rank"))

    base, *newer = (scan(paths, rank) for rank, paths in enumerate(files))
    latest = (
        pl.concat(newer, how="vertical_relaxed")
        .sort("_rank")
        .unique(subset=[ID], keep="last", maintain_order=False)
    )
    state = pl.concat(
        [base.join(latest.select(ID), on=ID, how="anti"), latest], how="vertical_relaxed"
    )
    return state.filter(~pl.col(DELETED)).select(as_read(schema)).collect()


def as_read(schema: pl.Schema) -> list[pl.Expr]:
    """The columns of ``schema`` cast to their types in the reader's result."""
    return [pl.col(name).cast(dtype) for name, dtype in schema.items()]


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

    k = cfg.reader_minors
    big = dataset(ctx, "s12_big", cfg.n, k)
    reader = DatasetReader(big.root)
    in_reader, in_spark = measure_pair(
        ctx,
        ("reader.read (latest)", lambda: reader.read(TABLE)),
        ("ds.read().toArrow()", lambda: big.read(TABLE).toArrow()),
    )
    state = reader.read(TABLE)
    schema, columns = state.schema, state.columns
    del state

    # against raw Polars over the same files: k = 0, then k minors
    major = dataset(ctx, "s12_k0", cfg.n, 0)
    reader0 = DatasetReader(major.root)
    (files0,) = task_files(reader0)

    def raw_scan() -> pl.DataFrame:
        frame = pl.scan_parquet(files0)
        if DELETED in frame.collect_schema():
            frame = frame.filter(~pl.col(DELETED))
        return frame.select(as_read(schema)).collect()

    assert raw_scan().sort(ID).equals(reader0.read(TABLE).sort(ID)), "the raw scan differs"
    k0_reader, k0_raw = measure_pair(
        ctx,
        ("reader.read, k = 0", lambda: reader0.read(TABLE)),
        ("pl.scan_parquet(files).filter(~_deleted)", raw_scan),
    )
    files_k = task_files(reader)
    expected = reader.read(TABLE).sort(ID)
    assert raw_merge(files_k, schema).sort(ID).equals(expected), "the raw merge is not correct"
    del expected
    k_reader, k_raw = measure_pair(
        ctx,
        (f"reader.read, k = {k}", lambda: reader.read(TABLE)),
        (f"raw Polars merge, k = {k}", lambda: raw_merge(files_k, schema)),
    )
    some_ids = list(range(0, cfg.n, 100))  # 1% of the ids, spread over the range
    one_column = columns[1]

    def pruned() -> pl.DataFrame:
        return reader.scan(TABLE).filter(pl.col(ID).is_in(some_ids)).select(one_column).read()

    assert pruned().height == len(some_ids)
    sc_pruned, sc_full = measure_pair(
        ctx,
        (f"scan().filter(1% of ids).select({one_column})", pruned),
        ("read() (full)", lambda: reader.read(TABLE)),
    )

    # peak memory, each in a fresh process, after a minor of 30% on top (at N and at xN)
    x = cfg.reader_scale
    commit(big, updates(spark, cfg.n, LARGE_MINOR, k + 1), is_major=False)
    scaled = big
    if x != 1:
        scaled = dataset(ctx, f"s12_x{x}", x * cfg.n, k)
        commit(scaled, updates(spark, x * cfg.n, LARGE_MINOR, k + 1), is_major=False)
    memory = {}
    for factor, ds in {1: big, x: scaled}.items():
        sink_path = str(ctx.folder("s12", f"sink_x{factor}") / "state.parquet")
        memory[factor] = {
            "arrow": DatasetReader(ds.root).read(TABLE).to_arrow().nbytes / 2**20,
            "sink": peak_above_imports(ds.root, SINK.format(table=TABLE, path=sink_path))[0],
            "batches": peak_above_imports(ds.root, BATCHES.format(table=TABLE))[0],
        }
    above, rss_base = peak_above_imports(big.root, EAGER.format(table=TABLE))

    # at xN: a lookup of 10 ids spread over the range against a full read
    reader_x = DatasetReader(scaled.root)
    ten = list(range(0, x * cfg.n, max(1, x * cfg.n // 10)))[:10]

    def lookup() -> pl.DataFrame:
        return reader_x.scan(TABLE).filter(pl.col(ID).is_in(ten)).read()

    assert lookup().height == len(ten)
    looked_up, read_all = measure_pair(
        ctx,
        ("scan().filter(10 ids)", lookup),
        ("read() (full)", lambda: reader_x.read(TABLE)),
    )

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
            common + f", after {k} minors",
            [f"reader {fmt_seconds(in_reader.median)}", f"Spark {fmt_seconds(in_spark.median)}"],
            ratio(in_reader.median, in_spark.median),
            "reader / Spark toArrow",
            "<= 1.0",
            1.0,
            note="Spark on local[2]",
        ),
        Row(
            "12 reader vs raw Polars, k = 0",
            common + ", a major alone",
            [f"reader {fmt_seconds(k0_reader.median)}", f"raw {fmt_seconds(k0_raw.median)}"],
            ratio(k0_reader.median, k0_raw.median),
            "read() / pl.scan_parquet(files).filter(~_deleted)",
            "<= 1.1",
            1.1,
            note="the same files; the raw side selects the reader's output columns",
            cpu_ratio=cpu_ratio(k0_reader, k0_raw),
        ),
        Row(
            f"12 reader vs raw Polars merge, k = {k}",
            common + f", after {k} minors",
            [f"reader {fmt_seconds(k_reader.median)}", f"raw {fmt_seconds(k_raw.median)}"],
            ratio(k_reader.median, k_raw.median),
            "read() / cheapest correct Polars merge",
            "<= 1.0",
            1.0,
            note="raw: the minors' rows, last per id, plus the base's other ids (anti join), "
            "tombstones dropped; checked equal to read()",
            cpu_ratio=cpu_ratio(k_reader, k_raw),
        ),
        Row(
            "12 reader: pruned scan",
            common + f", after {k} minors, {len(some_ids):,} ids",
            [
                f"scan, 1 column of 1% {fmt_seconds(sc_pruned.median)}",
                f"full read {fmt_seconds(sc_full.median)}",
            ],
            ratio(sc_pruned.median, sc_full.median),
            "scan().filter(ids in 1%).select(1 column) / read()",
            "<= 0.15",
            0.15,
            cpu_ratio=cpu_ratio(sc_pruned, sc_full),
        ),
        *[
            Row(
                f"12 reader: peak memory, {kind}",
                f"N={factor * cfg.n:,} x 11, after {k} minors of {cfg.p:.0%} and one of "
                f"{LARGE_MINOR:.0%}",
                [
                    f"{memory[factor][key]:.0f} MiB above imports",
                    f"Arrow state {memory[factor]['arrow']:.0f} MiB",
                ],
                ratio(memory[factor][key], memory[factor]["arrow"]),
                "peak RSS / Arrow size",
                "<= 0.5",
                0.5,
                note=f"fresh process: {what}",
            )
            for factor in dict.fromkeys((1, x))
            for key, kind, what in (
                ("sink", "sink_parquet", "scan(table).to_polars().sink_parquet(path)"),
                ("batches", "batches", "batches(table) drained"),
            )
        ],
        Row(
            f"12 reader: sink peak, {x}N / N",
            f"N={cfg.n:,} and {x * cfg.n:,} x 11, after {k} minors of {cfg.p:.0%} and one of "
            f"{LARGE_MINOR:.0%}",
            [f"{memory[f]['sink']:.0f} MiB at {f}N" for f in dict.fromkeys((1, x))],
            ratio(memory[x]["sink"], memory[1]["sink"]),
            f"sink peak at {x}N / at N",
            "<= 1.5",
            1.5,
            note="the merge holds the ids of the minors, a row group in flight per file",
        ),
        Row(
            "12 reader: peak memory, eager read",
            f"N={cfg.n:,} x 11, after {k} minors of {cfg.p:.0%} and one of {LARGE_MINOR:.0%}",
            [f"{above:.0f} MiB above imports", f"Arrow state {memory[1]['arrow']:.0f} MiB"],
            ratio(above, memory[1]["arrow"]),
            "peak RSS / Arrow size",
            "<= 2.0",
            2.0,
            note=f"fresh process; RSS after imports {rss_base:.0f} MiB",
        ),
        Row(
            "12 reader: lookup of 10 ids",
            f"N={x * cfg.n:,} x 11, after {k} minors of {cfg.p:.0%} and one of {LARGE_MINOR:.0%}",
            [
                f"10 ids {fmt_seconds(looked_up.median)}",
                f"full read {fmt_seconds(read_all.median)}",
            ],
            ratio(looked_up.median, read_all.median),
            "scan().filter(id in 10 ids) / read()",
            "<= 0.05",
            0.05,
            note="files sorted by id: the filter skips row groups by their min/max",
            cpu_ratio=cpu_ratio(looked_up, read_all),
        ),
        Row(
            "12 reader vs delta-rs",
            common + f", after 4 upserts of {cfg.p:.0%}",
            [f"ours {fmt_seconds(vs_reader.median)}", f"Delta {fmt_seconds(vs_delta.median)}"],
            ratio(vs_reader.median, vs_delta.median),
            "DatasetReader / polars.read_delta",
            "<= 1.2",
            1.2,
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
