"""The row group size, measured on both engines: ``python -m bench.row_groups [--n N]``.

A row group is what a Parquet reader decodes, streams and skips at once, so its size trades
Polars' streaming memory (about one row group per file in flight) and the row groups an id
lookup reads against Spark's scan speed (a vectorized batch and a task's split both live
inside a row group) and the bytes stored. For each candidate size, the engine commits the
same rows (a major of N x 11 columns and a minor rewriting 30% of the ids, written with
that row group size) and the same reads run, round-robin over the sizes so that a change
of the machine's load spreads over all of them:

* Polars: ``scan().to_polars().sink_parquet()`` of the merged state in a fresh process
  (peak RSS above imports, ``VmHWM``), an eager ``read()`` and a lookup of 10 ids (time);
* Spark: a full scan of the state (``ds.read(table)`` written to the ``noop`` sink: every
  column decoded) and the same 10-id lookup (time).

Prints a Markdown table; docs/benchmarks/index.md ("Row groups") keeps the figures behind
``ROW_GROUP_ROWS`` (``core/write/file_size.py``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
from pyspark.sql import functions as F

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.spark_session import build_spark_session
from revisions_assets.core.write import transaction

from .data import ID, TABLE, entities, updates
from .harness import at
from .reader import SINK, peak_above_imports

#: the candidates; None: no row count limit (what the engine wrote before: one row group
#: of up to a file's rows, under Spark's default 128 MiB block)
SIZES = (4_096, 16_384, 65_536, 262_144, None)
#: the byte limit while measuring: high enough that the row count alone cuts row groups
BLOCK_BYTES = 128 * 2**20


def build(spark, root: Path, n: int, size: int | None) -> RevisionedDataset:
    """A major of ``n`` entities and a minor of 30% of them, written in row groups of
    ``size`` rows."""
    transaction.ROW_GROUP_ROWS = size or 2**31 - 1
    transaction.ROW_GROUP_BYTES = BLOCK_BYTES
    ds = RevisionedDataset(str(root), spark=spark, id_columns=[ID], compact_after=None)
    ds.commit({TABLE: entities(spark, n, 0)}, timestamp=at(1), is_major=True, version="v1")
    ds.commit({TABLE: updates(spark, n, 0.30, 1)}, timestamp=at(2), is_major=False, version="v1")
    return ds


def row_groups(ds: RevisionedDataset) -> tuple[float, int]:
    """(mean rows per row group, bytes) over every file of the table."""
    groups, rows, size = 0, 0, 0
    for revision in ds.revisions(TABLE):
        for path in revision.tables[TABLE].files:
            meta = pq.read_metadata(Path(ds.root) / path)
            groups, rows = groups + meta.num_row_groups, rows + meta.num_rows
        size += revision.tables[TABLE].bytes
    return rows / max(groups, 1), size


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.row_groups", description=__doc__)
    parser.add_argument("--n", type=int, default=2_000_000, help="entities of the major")
    parser.add_argument("--reps", type=int, default=3, help="timed rounds over the sizes")
    parser.add_argument("--workdir", type=Path, default=Path(__file__).parent / "data" / "rg")
    args = parser.parse_args()
    spark = build_spark_session(
        master="local[2]",
        app_name="revisions-assets-row-groups",
        conf={"spark.driver.memory": "4g", "spark.ui.enabled": "false"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    shutil.rmtree(args.workdir, ignore_errors=True)
    ten = list(range(0, args.n, args.n // 10))[:10]
    datasets = {size: build(spark, args.workdir / str(size), args.n, size) for size in SIZES}
    memory = {}
    for size, ds in datasets.items():
        sink = str(args.workdir / f"sink-{size}.parquet")
        memory[size] = peak_above_imports(ds.root, SINK.format(table=TABLE, path=sink))[0]
    arrow = DatasetReader(datasets[SIZES[0]].root).read(TABLE).to_arrow().nbytes / 2**20
    times: dict[tuple[int | None, str], list[float]] = {}
    for _ in range(args.reps + 1):  # the first round warms up
        for size, ds in datasets.items():
            reader = DatasetReader(ds.root)
            runs = {
                "polars read": lambda r=reader: r.read(TABLE),
                "polars lookup": lambda r=reader: (
                    r.scan(TABLE).filter(pl.col(ID).is_in(ten)).read()
                ),
                "spark scan": lambda d=ds: (
                    d.read(TABLE).write.format("noop").mode("overwrite").save()
                ),
                "spark lookup": lambda d=ds: d.read(TABLE).where(F.col(ID).isin(ten)).collect(),
            }
            for name, fn in runs.items():
                times.setdefault((size, name), []).append(timed(fn))
    medians = {key: statistics.median(samples[1:]) for key, samples in times.items()}
    print(f"N = {args.n:,} x 11 + a 30% minor; Arrow state {arrow:.0f} MiB; medians of {args.reps}")
    print(
        "| rows per row group | mean rows per group | bytes | Polars sink peak / Arrow "
        "| Polars read | Polars 10-id lookup | Spark full scan | Spark 10-id lookup |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for size, ds in datasets.items():
        mean, size_bytes = row_groups(ds)
        m = {name: value for (s, name), value in medians.items() if s == size}
        print(
            f"| {size or 'no limit'} | {mean:,.0f} | {size_bytes / 2**20:.0f} MiB "
            f"| {memory[size]:.0f} MiB ({memory[size] / arrow:.2f}) "
            f"| {m['polars read']:.2f} s | {m['polars lookup'] * 1000:.0f} ms "
            f"| {m['spark scan']:.2f} s | {m['spark lookup']:.2f} s |"
        )
    spark.stop()


if __name__ == "__main__":
    main()
