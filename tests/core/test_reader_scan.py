"""The scan value on both handles, and the reader's lazy, pruned and streamed reads:
``scan`` and its builders and conversions, ``read(columns, filter)``, ``batches``, sinks,
``columns=`` (a projection) and ``compared_columns=`` on changes, ``columns=`` on history,
one snapshot for several reads, the file gate's one wording.

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
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from harness.dates import day
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.columns import REVISION_COLUMNS
from revisions_assets.core.errors import (
    ArgumentTypeError,
    CorruptFileError,
    InvalidArgumentError,
    MissingFileError,
    UnsupportedConversionError,
)
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage

from .helpers import frame, stage_frame, stage_revision

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
    assert rows(reader.scan("t").filter(pl.col("v") < 8).read()) == want
    assert rows(reader.read("t", filter=pl.col("v") < 8)) == want
    streamed = reader.scan("t").filter(pl.col("v") < 8).to_polars().collect(engine="streaming")
    assert rows(streamed) == want
    assert spark_rows(dataset.read("t").where(F.col("v") < 8)) == want
    assert spark_rows(dataset.scan("t").filter("v < 8").to_spark()) == want
    # the id filter prunes before the merge and still takes the newest row
    assert rows(reader.scan("t").filter(pl.col("id") == 1).read()) == [(1, 10, "a")]


def test_the_trap_stays_closed_when_rows_are_ranked(spark, tmp_path):
    root = str(tmp_path / "ranked")
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    ds.commit({"t": frame(spark, [(1, 5, "a"), (2, 6, "b")], SCHEMA)}, day(0), True)
    ds.commit({"t": frame(spark, [(1, 20, "a")], SCHEMA)}, day(4), False)
    ds.maintenance.compact("t")
    ds.commit({"t": frame(spark, [(1, 3, "x"), (2, 30, "b")], SCHEMA)}, day(2), False)  # backfill
    reader = DatasetReader(root)
    # entity 1: 20 (day 4) beats the backfill's 3 (day 2); entity 2: the backfill's 30 wins
    assert rows(reader.read("t")) == [(1, 20, "a"), (2, 30, "b")]
    assert rows(reader.scan("t").filter(pl.col("v") < 10).read()) == []
    assert spark_rows(ds.read("t").where(F.col("v") < 10)) == []


def test_projections_and_id_filters_reach_the_parquet_scans(dataset):
    """A scan's projection and id filter reach every Parquet scan of the merge, on both
    handles and on a snapshot's scans: each revision's rows and the ids of the later
    revisions read only the columns asked for, and skip the row groups whose min/max ids
    exclude the filter's."""
    reader = DatasetReader(dataset.root)
    for scan in (
        reader.scan("t").select("w").filter(pl.col("id").is_in([1, 2])),
        reader.snapshot().scan("t", columns=["w"], filter=pl.col("id").is_in([1, 2])),
    ):
        plan = scan.to_polars().explain()
        scans = plan.split("Parquet SCAN")[1:]
        assert len(scans) >= 4, plan
        for part in scans:
            assert "PROJECT" in part and '"v"' not in part, plan  # v is never read
            assert "is_in" in part, plan  # the id filter reaches the scan
        assert rows(scan.read()) == [(1, "a"), (2, "B")]
    assert rows(reader.read("t", columns=["w"], filter=pl.col("id") <= 2)) == [(1, "a"), (2, "B")]
    for scan in (
        dataset.scan("t").select("w").filter(F.col("id").isin(1, 2)),
        dataset.snapshot().scan("t", columns=["w"], filter="id in (1, 2)"),
    ):
        spark_plan = scan.to_spark()._jdf.queryExecution().executedPlan().toString()
        spark_scans = [line for line in spark_plan.splitlines() if "FileScan parquet" in line]
        assert len(spark_scans) >= 2, spark_plan
        for line in spark_scans:  # the id filter reaches every scan, and v is never read
            assert "PushedFilters: [In(id, [1,2])" in line, spark_plan
            assert "ReadSchema: struct<id:bigint" in line and "v:" not in line, spark_plan
        assert spark_rows(scan.to_spark()) == [(1, "a"), (2, "B")]


def test_batches_stream_the_state_and_duckdb_reads_them(dataset):
    reader = DatasetReader(dataset.root)
    batches = reader.batches("t", batch_size=1)
    assert isinstance(batches, pa.RecordBatchReader)
    table = batches.read_all()
    assert rows(pl.from_arrow(table)) == rows(reader.read("t"))
    stream = reader.batches("t", columns=["v"])
    total = duckdb.sql("select sum(v) from stream").fetchall()  # DuckDB finds the local
    assert stream is not None and total == [(10 + 6 + 7 + 1,)]
    small = reader.scan("t").filter(pl.col("v") < 8).select("v").to_batches(batch_size=1)
    assert rows(pl.from_arrow(small.read_all())) == [(2, 6), (3, 7), (4, 1)]
    # batches() takes read()'s options
    options = {"filter": pl.col("v") < 8, "with_revision": True}
    assert rows(pl.from_arrow(reader.batches("t", **options).read_all())) == rows(
        reader.read("t", **options)
    )


def test_sinks_and_the_streaming_engine_give_the_read(dataset, tmp_path):
    reader = DatasetReader(dataset.root)
    target = tmp_path / "state.parquet"
    reader.scan("t", as_of=day(2)).to_polars().sink_parquet(target)
    assert rows(pl.read_parquet(target)) == rows(reader.read("t", as_of=day(2)))
    streamed = reader.scan("t").to_polars().collect(engine="streaming")
    assert rows(streamed) == rows(reader.read("t"))


def test_columns_on_changes_and_history_match_the_engine(dataset):
    reader = DatasetReader(dataset.root)
    # entity 2 changed only w (b -> B): a change of w, no change of v
    for compared, changed in ((["v"], [1]), (["w"], [2]), (None, [1, 2])):
        options = {"only_changed": True, "compared_columns": compared}
        got = reader.changes("t", since_sequence=2, **options)
        want = dataset.changes("t", since_sequence=2, **options)
        assert sorted(got.df["id"].to_list()) == changed
        assert sorted(r["id"] for r in want.df.collect()) == changed
    history = reader.history("t", columns=["w"])
    assert history.columns[:2] == ["id", "w"]
    # entity 1 never changed w: one version; entity 2 changed it once: two
    counts = dict(history.group_by("id").len().rows())
    assert counts[1] == 1 and counts[2] == 2
    spark_history = dataset.history("t", columns=["w"])
    assert spark_history.count() == history.height


def test_a_change_read_projects_like_a_state_read(dataset):
    """``columns`` on a change read is a projection, as on a state read: ``df`` has the
    ids, the projected columns and ``_deleted``, and no Parquet scan of the window or of the
    state before reads another value column (the stored row hashes count every column);
    ``compared_columns`` are read beside the projection and not returned."""
    reader = DatasetReader(dataset.root)
    window = {"since_sequence": 1, "only_changed": True}
    # since sequence 1: entity 1's v 5 -> 10, entity 2's w b -> B, entity 4 new
    cases = [
        ({"columns": ["v"]}, ["id", "v"], [(1, 10), (2, 6), (4, 1)]),
        ({"columns": ["w"], "compared_columns": ["v"]}, ["id", "w"], [(1, "a"), (4, "d")]),
        ({"columns": ["id"], "compared_columns": ["w"]}, ["id"], [(2,), (4,)]),
    ]
    for options, columns, want in cases:
        got = reader.changes("t", **window, **options).df
        assert got.columns == [*columns, "_deleted"]
        assert rows(got) == [(*r, False) for r in want]
        engine = dataset.changes("t", **window, **options).df
        assert engine.columns == got.columns and spark_rows(engine) == rows(got)
    plan = reader.scan("t").select("v").changes(**window).to_polars().explain()
    scans = plan.split("Parquet SCAN")[1:]
    assert len(scans) >= 3, plan  # the window's revisions and the state before
    for part in scans:
        assert "PROJECT" in part and '"w"' not in part, plan  # w is never read
    spark_plan = dataset.scan("t").select("v").changes(**window).to_spark()
    spark_plan = spark_plan._jdf.queryExecution().executedPlan().toString()
    spark_scans = [line for line in spark_plan.splitlines() if "FileScan parquet" in line]
    assert len(spark_scans) >= 2, spark_plan
    assert all("ReadSchema: struct<" in line and "w:" not in line for line in spark_scans)


def test_bad_projections_and_filters_are_refused(dataset):
    reader = DatasetReader(dataset.root)
    with pytest.raises(InvalidArgumentError, match=r"columns \['nope'\] are not columns"):
        reader.read("t", columns=["nope"])
    with pytest.raises(InvalidArgumentError, match=r"columns \['nope'\] are not columns"):
        dataset.read("t", columns=["nope"])
    with pytest.raises(ArgumentTypeError, match="filter must be a Polars expression"):
        reader.read("t", filter="v < 8")
    with pytest.raises(InvalidArgumentError, match="as_off is not an option of a state read"):
        reader.batches("t", as_off=day(1))  # type: ignore[call-arg]
    with pytest.raises(InvalidArgumentError, match="history\\(\\): columns"):
        reader.history("t", columns=["nope"])
    for handle in (reader, dataset):
        for option in ("columns", "compared_columns"):
            with pytest.raises(
                InvalidArgumentError,
                match=rf"changes\(\): {option} \['nope'\] are not columns of table 't'",
            ):
                handle.changes("t", since_sequence=1, **{option: ["nope"]})
        with pytest.raises(InvalidArgumentError, match="compared_columns must be a list"):
            handle.changes("t", since_sequence=1, compared_columns="v")
    with pytest.raises(InvalidArgumentError, match="compared_columns does not apply to a hist"):
        reader.scan("t").history().update(compared_columns=["v"])
    with pytest.raises(InvalidArgumentError, match="compared_columns does not apply to a state"):
        dataset.scan("t").update(compared_columns=["v"])


def test_a_point_in_time_join_is_a_scan(dataset):
    """``as_of_join`` is a scan like every other read: ``scan(...).as_of_join(...)`` gives
    the handle's rows, counts them, lists the files it may read, takes the projection, and
    refuses the options of a state read that do not apply to it."""
    reader = DatasetReader(dataset.root)
    events = pl.DataFrame({"id": [1, 1, 2], "at": [day(1), day(2.5), day(4)]})
    options = {"event_time": "at", "on": ["id"], "known_at": "all_committed"}
    joined = reader.scan("t", columns=["v"]).as_of_join(events, **options)
    got = joined.read().sort("at")
    assert got.equals(reader.as_of_join(events, "t", columns=["v"], **options).sort("at"))
    assert got.select("id", "v").rows() == [(1, 5), (1, 6), (2, 6)] and "w" not in got.columns
    assert joined.count() == 3
    assert [f.sequence for f in joined.plan_files()] == [1, 2, 3]
    with pytest.raises(InvalidArgumentError, match="as_of does not apply to a point-in-time"):
        reader.scan("t", as_of=day(1)).as_of_join(events, **options)
    with pytest.raises(InvalidArgumentError, match="filter does not apply to a point-in-time"):
        dataset.scan("t", filter="id = 1").as_of_join(events, **options)


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
reader.scan("t").to_polars().sink_parquet(sys.argv[2])
print(json.dumps({"above_mib": (kib("VmHWM") - before) / 1024}))
"""


@pytest.mark.slow
def test_a_streamed_read_holds_ids_not_the_state(tmp_path):
    """``scan().to_polars().sink_parquet()`` of a merged state runs on Polars' streaming
    engine: a fresh process peaks at less than two thirds of the state's Arrow size (about
    0.4 to 0.55 of it on an idle or a busy machine), where an in-memory fallback (of the
    plan, or of one join) holds the whole state and more. 4M
    entities of ~100 bytes (a major, a minor of 10% and one of 1% with tombstones), staged
    in the engine's file layout without Spark."""
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
    assert above < arrow_mib * 2 / 3, (
        f"peak {above:.0f} MiB above imports, state {arrow_mib:.0f} MiB"
    )


def test_conversions_of_a_scan_on_both_handles(dataset):
    """The conversions both handles offer give the same rows; ``count`` and ``plan_files``
    agree; ``to_changes`` gives what ``changes`` gives."""
    reader = DatasetReader(dataset.root)
    for scan in (reader.scan("t", as_of=day(2)), dataset.scan("t", as_of=day(2))):
        assert sorted(scan.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
            {"id": 1, "v": 6, "w": "a"},
            {"id": 2, "v": 6, "w": "b"},
            {"id": 3, "v": 7, "w": "c"},
            {"id": 4, "v": 1, "w": "d"},
        ]
        assert sorted(scan.select("w").to_pandas()["w"]) == ["a", "b", "c", "d"]
        assert scan.count() == 4
    assert reader.scan("t").filter(pl.col("v") > 6).count() == 2
    assert dataset.scan("t").filter("v > 6").count() == 2
    planned = reader.scan("t").plan_files()
    assert planned == dataset.scan("t").plan_files()
    assert [(f.revision, f.sequence, f.rows) for f in planned] == [
        (r.name, r.sequence, r.tables["t"].rows) for r in dataset.revisions("t")
    ]
    assert all(f.paths and f.bytes > 0 and not f.is_compaction for f in planned)
    assert len(reader.scan("t", at="HEAD~1").plan_files()) == 2
    changes = reader.scan("t").changes(since_sequence=2, only_changed=True).to_changes()
    same = reader.changes("t", since_sequence=2, only_changed=True)
    assert rows(changes.df) == rows(same.df) and changes.until_sequence == same.until_sequence
    stamped = dataset.scan("t").with_revision().to_arrow()
    assert str(stamped.schema.field("_revision_timestamp").type) == "timestamp[us, tz=UTC]"


def test_builders_return_new_scans_on_one_snapshot(dataset):
    reader = DatasetReader(dataset.root)
    scan = reader.scan("t")
    narrowed = scan.select("w").filter(pl.col("id") > 1).as_of(day(2)).with_revision()
    assert scan.request.columns is None and scan.request.filters == ()
    assert narrowed.snapshot is scan.snapshot
    assert narrowed.read().columns == ["id", "w", *REVISION_COLUMNS]
    assert rows(narrowed.select("id").read().select("id")) == [(2,), (3,), (4,)]
    history = scan.history(until=day(2))
    assert history.read().height == reader.history("t", until=day(2)).height
    with pytest.raises(InvalidArgumentError, match=r"changes\(\): as_of does not apply"):
        scan.as_of(day(2)).changes(since=day(1))
    with pytest.raises(InvalidArgumentError, match=r"to_changes\(\) converts a change read"):
        scan.to_changes()
    with pytest.raises(ArgumentTypeError, match="filter must be a Polars expression"):
        scan.filter("v < 8")
    with pytest.raises(ArgumentTypeError, match="filter must be a Spark Column or SQL text"):
        dataset.scan("t").filter(pl.col("v") < 8)


def test_conversions_a_handle_does_not_offer_name_the_handle_that_does(dataset):
    reader = DatasetReader(dataset.root)
    with pytest.raises(UnsupportedConversionError, match=r"open RevisionedDataset\(root\)"):
        reader.scan("t").to_spark()
    for conversion in ("to_polars", "to_batches", "download"):
        with pytest.raises(UnsupportedConversionError, match=r"open DatasetReader\(root\)"):
            getattr(dataset.scan("t"), conversion)()


def test_one_snapshot_serves_several_reads_while_commits_land(tmp_path):
    """Reads on one snapshot see one state of the log however many commits land; a
    snapshot taken without refresh costs no read of the log."""
    root = str(tmp_path / "ds")
    log = RevisionLog(open_storage(root))
    stage_revision(log, root, "r0", day(0), True, {(1,): {"v": 1}, (2,): {"v": 2}})
    reader = DatasetReader(root)
    snapshot = reader.snapshot(refresh=False)
    stage_revision(log, root, "r1", day(1), False, {(2,): {"v": 20}, (3,): {"v": 3}})
    assert snapshot.head_sequence == 1 and [r.name for r in snapshot.revisions()] == ["r0"]
    assert rows(snapshot.scan("t").read()) == [(1, 1), (2, 2)]
    assert rows(reader.read("t")) == [(1, 1), (2, 20), (3, 3)]  # a read catches up
    assert reader.snapshot().head_sequence == 2
    assert snapshot.scan("t").count() == 2


def test_the_file_gate_words_damage_alike_on_both_handles(spark, tmp_path):
    """A missing and a damaged data file: both handles raise the same error, with the same
    message, before any engine scans the files."""
    root = str(tmp_path / "ds")
    log = RevisionLog(open_storage(root))
    stage_revision(log, root, "r0", day(0), True, {(1,): {"v": 1}})
    stage_revision(log, root, "r1", day(1), False, {(1,): {"v": 2}})
    damaged = Path(root, "r1/t/part-00000.parquet")
    damaged.write_bytes(b"not parquet at all")
    for error in (CorruptFileError, MissingFileError):
        messages = set()
        for handle in (DatasetReader(root), RevisionedDataset(root, spark=spark, read_only=True)):
            with pytest.raises(error) as caught:
                handle.read("t")
            messages.add(str(caught.value))
        (message,) = messages
        assert "r1/t/part-00000.parquet" in message and "'r1'" in message
        assert "run `revisions verify`" in message
        damaged.unlink(missing_ok=True)  # then: missing
