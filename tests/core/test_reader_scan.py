"""Lazy, pruned and streamed reads of ``DatasetReader``: ``scan``, ``read(columns, filter)``,
``batches``, sinks, and ``columns=`` on changes and history, against the Spark engine.

A dataset of a major and two minors (the newest row of entity 1 fails ``v < 8`` while the
older rows of the major and the first minor pass), and one with a backfill ordered inside
a compaction (rows ranked by revision, not anti-joined). A streamed read of millions of
rows runs in a fresh process whose peak memory shows it streamed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from harness.dates import day
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import ArgumentTypeError, InvalidArgumentError
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage

from .helpers import frame, stage_frame

SCHEMA = "id long, v long, w string"


@pytest.fixture(scope="module")
def dataset(spark, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("scan") / "ds")
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    ds.commit({"t": frame(spark, [(1, 5, "a"), (2, 6, "b"), (3, 7, "c")], SCHEMA)}, day(0), True)
    ds.commit({"t": frame(spark, [(1, 6, "a"), (4, 1, "d")], SCHEMA)}, day(2), False)
    ds.commit({"t": frame(spark, [(1, 10, "a"), (2, 6, "B")], SCHEMA)}, day(3), False)
    return ds


def rows(df: pl.DataFrame) -> list[tuple]:
    return sorted(df.rows())


def spark_rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_a_filter_on_a_value_column_never_resurrects_an_older_row(dataset):
    """Entity 1 is 10 now; its older rows (5, then 6) pass ``v < 8`` but must not come
    back: through ``read(filter=)``, ``scan().filter()`` on both Polars engines, and
    Spark alike."""
    reader = DatasetReader(dataset.root)
    want = [(2, 6, "B"), (3, 7, "c"), (4, 1, "d")]
    assert rows(reader.scan("t").filter(pl.col("v") < 8).collect()) == want
    assert rows(reader.read("t", filter=pl.col("v") < 8)) == want
    streamed = reader.scan("t").filter(pl.col("v") < 8).collect(engine="streaming")
    assert rows(streamed) == want
    assert spark_rows(dataset.read("t").where(F.col("v") < 8)) == want
    # the id filter prunes before the merge and still takes the newest row
    assert rows(reader.scan("t").filter(pl.col("id") == 1).collect()) == [(1, 10, "a")]


def test_the_trap_stays_closed_when_rows_are_ranked(spark, tmp_path):
    root = str(tmp_path / "ranked")
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    ds.commit({"t": frame(spark, [(1, 5, "a"), (2, 6, "b")], SCHEMA)}, day(0), True)
    ds.commit({"t": frame(spark, [(1, 20, "a")], SCHEMA)}, day(4), False)
    ds.compact("t")
    ds.commit({"t": frame(spark, [(1, 3, "x"), (2, 30, "b")], SCHEMA)}, day(2), False)  # backfill
    reader = DatasetReader(root)
    # entity 1: 20 (day 4) beats the backfill's 3 (day 2); entity 2: the backfill's 30 wins
    assert rows(reader.read("t")) == [(1, 20, "a"), (2, 30, "b")]
    assert rows(reader.scan("t").filter(pl.col("v") < 10).collect()) == []
    assert spark_rows(ds.read("t").where(F.col("v") < 10)) == []


def test_projections_and_id_filters_reach_the_parquet_scans(dataset):
    reader = DatasetReader(dataset.root)
    plan = reader.scan("t").select("id", "w").filter(pl.col("id").is_in([1, 2])).explain()
    # every scan of the merge: each revision's rows and the ids of the later revisions
    scans = plan.split("Parquet SCAN")[1:]
    assert len(scans) >= 4, plan
    for scan in scans:
        assert '"v"' not in scan, plan  # v is never read
        assert "is_in" in scan, plan  # the id filter reaches the scan
    assert rows(reader.read("t", columns=["w"], filter=pl.col("id") <= 2)) == [(1, "a"), (2, "B")]
    # Spark reads only the projected columns too
    spark_plan = dataset.read("t", columns=["w"])._jdf.queryExecution().executedPlan().toString()
    assert "ReadSchema: struct<id:bigint,w:string" in spark_plan, spark_plan


def test_batches_stream_the_state_and_duckdb_reads_them(dataset):
    reader = DatasetReader(dataset.root)
    batches = reader.batches("t", batch_size=1)
    assert isinstance(batches, pa.RecordBatchReader)
    table = batches.read_all()
    assert rows(pl.from_arrow(table)) == rows(reader.read("t"))
    stream = reader.batches("t", columns=["v"])
    total = duckdb.sql("select sum(v) from stream").fetchall()  # DuckDB finds the local
    assert stream is not None and total == [(10 + 6 + 7 + 1,)]


def test_sinks_and_the_streaming_engine_give_the_read(dataset, tmp_path):
    reader = DatasetReader(dataset.root)
    target = tmp_path / "state.parquet"
    reader.scan("t", as_of=day(2)).sink_parquet(target)
    assert rows(pl.read_parquet(target)) == rows(reader.read("t", as_of=day(2)))
    streamed = reader.scan("t").collect(engine="streaming")
    assert rows(streamed) == rows(reader.read("t"))


def test_columns_on_changes_and_history_match_the_engine(dataset):
    reader = DatasetReader(dataset.root)
    # entity 2 changed only w (b -> B): a change of w, no change of v
    for columns, changed in ((["v"], [1]), (["w"], [2]), (None, [1, 2])):
        got = reader.changes("t", since_sequence=2, only_changed=True, columns=columns)
        want = dataset.changes("t", since_sequence=2, only_changed=True, columns=columns)
        assert sorted(got.df["id"].to_list()) == changed
        assert sorted(r["id"] for r in want.df.collect()) == changed
    history = reader.history("t", columns=["w"])
    assert history.columns[:2] == ["id", "w"]
    # entity 1 never changed w: one version; entity 2 changed it once: two
    counts = dict(history.group_by("id").len().rows())
    assert counts[1] == 1 and counts[2] == 2
    spark_history = dataset.history("t", columns=["w"])
    assert spark_history.count() == history.height


def test_bad_projections_and_filters_are_refused(dataset):
    reader = DatasetReader(dataset.root)
    with pytest.raises(InvalidArgumentError, match=r"columns \['nope'\] are not columns"):
        reader.read("t", columns=["nope"])
    with pytest.raises(InvalidArgumentError, match=r"columns \['nope'\] are not columns"):
        dataset.read("t", columns=["nope"])
    with pytest.raises(ArgumentTypeError, match="filter must be a Polars expression"):
        reader.read("t", filter="v < 8")
    with pytest.raises(InvalidArgumentError, match="history\\(\\): columns"):
        reader.history("t", columns=["nope"])


#: a fresh process: the peak memory (VmHWM, never ru_maxrss, which a child inherits) above
#: the memory after imports of a reader sinking a table's state to Parquet
SINK_PEAK = """
import json, sys
from revisions_assets import DatasetReader

def kib(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field))

reader = DatasetReader(sys.argv[1])
before = kib("VmRSS")
reader.scan("t").sink_parquet(sys.argv[2])
print(json.dumps({"above_mib": (kib("VmHWM") - before) / 1024}))
"""


@pytest.mark.slow
def test_a_streamed_read_holds_ids_not_the_state(tmp_path):
    """``scan().sink_parquet()`` of a merged state runs on Polars' streaming engine: a fresh
    process peaks at less than half the state's Arrow size, where an in-memory fallback
    (of the plan, or of one join) holds the whole state and more. 4M entities of ~100
    bytes (a major, a minor of 10% and one of 1% with tombstones), staged in the engine's
    file layout without Spark."""
    n = 4_000_000
    root = str(tmp_path / "ds")
    log = RevisionLog(open_storage(root))
    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("v", LongType()),
            StructField("s", StringType()),
        ]
    )

    def rows(ids: pl.Expr, generation: int, deleted: bool = False) -> pl.DataFrame:
        frame = pl.select(id=ids).with_columns(
            v=pl.col("id") * 7 + generation,
            s=pl.format(
                f"entity {{}} of generation {generation}, padded to about 80 bytes ..", "id"
            ),
            _deleted=pl.lit(deleted),
        )
        return frame.with_columns(
            s=pl.when(~pl.col("_deleted")).then("s"), v=pl.when(~pl.col("_deleted")).then("v")
        )

    state = rows(pl.int_range(n), 0)
    stage_frame(log, root, "major", day(0), True, state, schema)
    stage_frame(log, root, "minor-10pct", day(1), False, rows(pl.int_range(0, n, 10), 1), schema)
    gone = rows(pl.int_range(5, n, 100), 2, deleted=True)
    stage_frame(log, root, "minor-1pct", day(2), False, gone, schema)
    arrow_mib = state.to_arrow().nbytes / 2**20
    out = tmp_path / "state.parquet"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SINK_PEAK), root, str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    above = json.loads(done.stdout.splitlines()[-1])["above_mib"]
    written = pl.scan_parquet(out)
    assert written.select(pl.len()).collect().item() == n - gone.height
    assert written.filter(pl.col("id") == 10).select("v").collect().item() == 71  # the minor's
    assert above < arrow_mib / 2, f"peak {above:.0f} MiB above imports, state {arrow_mib:.0f} MiB"
