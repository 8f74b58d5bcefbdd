"""A streamed read merged one id range at a time, against the whole table at once and against
Polars' own streamed copy of the same files: ``python -m bench.stream_merge [--n N ...]``.

For each N (2M and 8M by default), a major of N entities x 11 columns and a minor rewriting
30% of them (ids spread over the whole range) are staged through the log layer, without
Spark, in the layout the engine writes: the major's files clustered by id (1,000,000 rows
each), the minor's as a minor's come (its rows in no order, cut into files of 1,000,000
rows, each sorted by the ids: every file spans the id range), row groups of 16,384 rows,
each file's statistics in the log. Then each of these runs in a fresh process (peak RSS,
``VmHWM``, above the RSS after imports), one after the other at each N:

* ``pl.scan_parquet(files).sink_parquet(path)``: Polars' own streamed copy of every file,
  no merge;
* ``scan(table).to_batches()`` drained and ``scan(table).to_polars().sink_parquet(path)``,
  merged by id range (``read/plan/ranges.py``, the default) and merged at once (the range
  merge turned off in that process, as before it existed).

Prints a Markdown table; docs/benchmarks/index.md ("A merge by id range") keeps the figures.
"""

from __future__ import annotations

import argparse
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
from pyspark.sql.types import (
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from revisions_assets.core.log.file_stats import read_file_stats
from revisions_assets.core.log.records import Revision, TableWrite, canonical_json
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage
from revisions_assets.core.write.file_size import FIRST_FILE_ROWS, ROW_GROUP_ROWS

from .data import ID, TABLE
from .reader import peak_above_imports

#: the share of the ids the minor rewrites
MINOR = 0.30
SCHEMA = StructType(
    [
        StructField(ID, LongType()),
        StructField("f_amount", DoubleType()),
        StructField("f_delta", DoubleType()),
        StructField("f_count", LongType()),
        StructField("f_age", IntegerType()),
        StructField("f_segment", StringType()),
        StructField("f_code", StringType()),
        StructField("f_active", BooleanType()),
        StructField("f_since", DateType()),
        StructField("f_seen_at", TimestampType()),
        StructField("f_log_value", DoubleType()),
    ]
)
#: the merge as it was before ranges: once over the whole table
AT_ONCE = "from revisions_assets.core.read.plan import ranges\nranges.RANGED_FROM_ROWS = 2**62\n"
BATCHES = "for _ in reader.scan({table!r}).to_batches():\n    pass"
SINK = "reader.scan({table!r}).to_polars().sink_parquet({path!r})"
RAW = "import polars as pl\npl.scan_parquet({files!r}).sink_parquet({path!r})"


def features(ids: pl.Expr, generation: int) -> pl.DataFrame:
    """The 11 columns of the entities ``ids``, each a hash of (id, generation)."""

    def h(salt: int) -> pl.Expr:
        hashed = (pl.col(ID) * 1_000_003 + generation * 7919 + salt).hash(salt)
        return (hashed % (1 << 62)).cast(pl.Int64)

    return pl.select(ids.alias(ID)).with_columns(
        f_amount=h(0) % 1_000_000 / 1000.0,
        f_delta=h(1) % 10_000 / 100.0 - 50.0,
        f_count=h(2) % 1_000_000_000,
        f_age=(h(3) % 120).cast(pl.Int32),
        f_segment=pl.format("segment_{}", h(4) % 500),
        f_code=pl.format("{}", h(5)).str.slice(0, 16 + generation % 8),
        f_active=h(6) % 2 == 0,
        f_since=pl.date(2020, 1, 1) + pl.duration(days=h(7) % 1500),
        f_seen_at=pl.lit(datetime(2020, 1, 1, tzinfo=UTC)) + pl.duration(seconds=h(8) % 10**8),
        f_log_value=(h(9) % 100_000).log1p(),
        _deleted=pl.lit(False),
    )


def stage(log: RevisionLog, root: Path, name: str, rows: pl.DataFrame, is_major: bool) -> None:
    """``rows`` committed as revision ``name`` through the log layer: files of
    ``FIRST_FILE_ROWS`` rows in the order given, each sorted by the id."""
    files = []
    for n, offset in enumerate(range(0, rows.height, FIRST_FILE_ROWS)):
        path = f"{name}/{TABLE}/part-{n:05d}.parquet"
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        part = rows.slice(offset, FIRST_FILE_ROWS).sort(ID)
        part.write_parquet(root / path, compression="snappy", row_group_size=ROW_GROUP_ROWS)
        files.append(path)
    schema_json = canonical_json(SCHEMA.jsonValue())
    write = TableWrite(
        id_columns=(ID,),
        schema_json=schema_json,
        version="v1",
        rows=rows.height,
        tombstones=0,
        files=tuple(files),
        bytes=sum((root / f).stat().st_size for f in files),
        file_stats=read_file_stats(log.storage, files, (ID,), schema_json),
    )
    sequence = log.head + 1
    record = Revision(
        name=name,
        timestamp=datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=sequence),
        is_major=is_major,
        sequence=sequence,
        committed_at=datetime.now(UTC),
        tables={TABLE: write},
        version="v1",
    )
    assert log.try_append(record), f"{root}: sequence {sequence} taken"


def build(root: Path, n: int) -> list[str]:
    """The major and the minor of ``n`` entities at ``root``; their files' paths."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    log = RevisionLog(open_storage(str(root)))
    stage(log, root, "major", features(pl.int_range(n, dtype=pl.Int64), 0), True)
    count = int(n * MINOR)
    stride = n // count
    minor = features(pl.int_range(count, dtype=pl.Int64) * stride + 1, 1)
    stage(log, root, "minor", minor.sample(fraction=1.0, shuffle=True, seed=1), False)
    return sorted(str(p) for p in root.glob(f"*/{TABLE}/*.parquet"))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.stream_merge", description=__doc__)
    parser.add_argument("--n", type=int, nargs="+", default=[2_000_000, 8_000_000])
    parser.add_argument("--workdir", type=Path, default=Path(__file__).parent / "data" / "sm")
    args = parser.parse_args()
    print(f"a major of N x 11 and a minor of {MINOR:.0%}; peak RSS above imports, MiB (VmHWM)")
    print("| N | Polars copy (raw sink) | batches, at once | batches, by range | sink, at once "
          "| sink, by range |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for n in args.n:
        root = args.workdir / str(n)
        files = build(root, n)
        out = str(args.workdir / "out.parquet")
        runs = {
            "raw": RAW.format(files=files, path=out),
            "batches, at once": AT_ONCE + BATCHES.format(table=TABLE),
            "batches, by range": BATCHES.format(table=TABLE),
            "sink, at once": AT_ONCE + SINK.format(table=TABLE, path=out),
            "sink, by range": SINK.format(table=TABLE, path=out),
        }
        peaks, seconds = {}, {}
        for name, action in runs.items():
            start = time.perf_counter()
            peaks[name] = peak_above_imports(str(root), action)[0]
            seconds[name] = time.perf_counter() - start
        raw = peaks["raw"]
        cells = [f"{peaks['raw']:.0f} ({seconds['raw']:.1f} s)"] + [
            f"{peaks[k]:.0f} = {peaks[k] / raw:.2f}x ({seconds[k]:.1f} s)" for k in list(runs)[1:]
        ]
        print(f"| {n:,} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
