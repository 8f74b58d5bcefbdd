"""A streamed read merged one id range at a time (``read/plan/ranges.py``): worked examples
where the range merge is chosen, each against the rows the merge of the whole table gives
and against the rows worked out by hand. Thresholds are lowered so that a few dozen rows
make several ranges; the files are staged in the engine's layout without Spark (majors in
files of 20 ids), but for a compaction base, which the engine writes.
"""

from __future__ import annotations

import polars as pl
import pytest
from harness.dates import day
from pyspark.sql.types import LongType, StructField, StructType

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.read.execute import polars as polars_executor
from revisions_assets.core.read.plan import ranges
from revisions_assets.core.read.plan.requests import plan_state
from revisions_assets.core.storage.backends import open_storage

from . import helpers
from .helpers import frame, stage_frame

SCHEMA = StructType([StructField("id", LongType()), StructField("v", LongType())])


@pytest.fixture
def small_ranges(monkeypatch):
    """Ranges of 20 base rows, chosen from one newer row on; files of 20 rows."""
    monkeypatch.setattr(ranges, "RANGE_ROWS", 20)
    monkeypatch.setattr(ranges, "RANGED_FROM_ROWS", 1)
    monkeypatch.setattr(helpers, "FIRST_FILE_ROWS", 20)


def rows(values: dict[int, int | None]) -> pl.DataFrame:
    """Rows of ``id -> v`` (None: a tombstone)."""
    return pl.DataFrame(
        {
            "id": list(values),
            "v": list(values.values()),
            "_deleted": [v is None for v in values.values()],
        },
        schema={"id": pl.Int64, "v": pl.Int64, "_deleted": pl.Boolean},
    )


def state_of(*writes: dict[int, int | None]) -> list[tuple[int, int]]:
    """The state the writes leave, oldest first: the last value per id, tombstones gone."""
    state: dict[int, int | None] = {}
    for write in writes:
        state.update(write)
    return sorted((i, v) for i, v in state.items() if v is not None)


def merged_at_once(read, monkeypatch):
    """What ``read()`` gives with the range merge off: the whole table merged at once."""
    with monkeypatch.context() as patch:
        patch.setattr(ranges, "RANGED_FROM_ROWS", 2**62)
        return read()


def as_rows(df: pl.DataFrame, *columns: str) -> list[tuple]:
    return sorted(df.select(columns or ("id", "v")).iter_rows())


def streamed(scan) -> pl.DataFrame:
    return pl.from_arrow(scan.to_batches(batch_size=7).read_all())


def test_ranges_give_the_merge_of_the_whole_table(small_ranges, monkeypatch, tmp_path):
    """A major of 100 ids in 5 files (ranges cut at 20, 40, 60, 80), a minor that updates
    the ids on each side of every cut, ids below and above the major's, and tombstones; a
    second minor that updates a cut id again, brings a deleted id back and deletes another:
    every conversion that streams gives the state worked out by hand, as the merge of the
    whole table does."""
    root = str(tmp_path / "ds")
    log = RevisionLog(open_storage(root))
    major = {i: i for i in range(100)}
    minor = {-5: 1, 0: 2, 19: 3, 20: 4, 39: 5, 40: 6, 55: 7, 79: 8, 80: None, 99: 9, 150: 10}
    minor |= {21: None, 60: None}
    later = {20: 11, 60: 12, 99: None, 40: None, 41: 13}
    stage_frame(log, root, "major", day(0), True, rows(major), SCHEMA)
    stage_frame(log, root, "minor", day(1), False, rows(minor), SCHEMA)
    stage_frame(log, root, "later", day(2), False, rows(later), SCHEMA)
    reader = DatasetReader(root)
    plan = plan_state(reader.snapshot(), "t").rows
    assert ranges.id_ranges(plan) == ((None, 20), (20, 40), (40, 60), (60, 80), (80, None))

    expected = state_of(major, minor, later)
    assert as_rows(streamed(reader.scan("t"))) == expected
    with monkeypatch.context() as patch:  # a read collected whole merges in one pass
        patch.setattr(polars_executor, "_by_id_range", None)
        assert as_rows(reader.read("t")) == expected
    sunk = tmp_path / "state.parquet"
    reader.scan("t").to_polars().sink_parquet(sunk)
    assert as_rows(pl.read_parquet(sunk)) == expected
    whole = merged_at_once(lambda: reader.read("t", with_revision=True), monkeypatch)
    by_range = streamed(reader.scan("t", with_revision=True))
    assert as_rows(by_range, "id", "v", "_revision") == as_rows(whole, "id", "v", "_revision")
    assert as_rows(whole) == expected

    # a filter on a value column never brings an older row back; one on the ids prunes too
    old_values = pl.col("v") < 20
    assert as_rows(streamed(reader.scan("t").filter(old_values))) == [
        (i, v) for i, v in expected if v < 20
    ]
    some = reader.scan("t").filter(pl.col("id").is_between(19, 41))
    assert as_rows(streamed(some)) == [(i, v) for i, v in expected if 19 <= i <= 41]
    assert reader.scan("t").count() == len(expected)
    # a lookup of a few ids merges once: its newer ids are few whatever the table's size
    few = reader.scan("t").filter(pl.col("id").is_in([20, 60, 150, 7]))
    assert ranges.id_ranges(few._plan.rows) is None
    assert as_rows(few.read()) == [(i, v) for i, v in expected if i in (20, 60, 150, 7)]
    assert ranges.id_ranges(some._plan.rows) is not None  # a range is no lookup


def test_entries_without_stats_merge_the_whole_table_at_once(small_ranges, tmp_path):
    """A minor whose entry records no file statistics (an earlier release's): no range can
    leave its files out, so the merge runs once, and gives the state."""
    root = str(tmp_path / "ds")
    log = RevisionLog(open_storage(root))
    major, minor = {i: i for i in range(60)}, {20: 100, 21: None, 70: 7}
    stage_frame(log, root, "major", day(0), True, rows(major), SCHEMA)
    stage_frame(log, root, "minor", day(1), False, rows(minor), SCHEMA, stats=False)
    reader = DatasetReader(root)
    assert ranges.id_ranges(plan_state(reader.snapshot(), "t").rows) is None
    assert as_rows(streamed(reader.scan("t"))) == state_of(major, minor)


def test_a_compaction_base_merges_by_range(spark, small_ranges, monkeypatch, tmp_path):
    """A minor on a compaction the engine wrote (one file of 12 ids, cut into ranges of 3
    ids): the range merge gives the state worked out by hand, each row with the revision
    that wrote it (a compaction's rows keep theirs)."""
    monkeypatch.setattr(ranges, "RANGE_ROWS", 3)
    ds = RevisionedDataset(str(tmp_path / "ds"), spark=spark, id_columns=["id"])
    schema = "id long, v long, _deleted boolean"
    major, minor = {i: i for i in range(12)}, {3: 30, 7: None}
    on_top = {3: 31, 6: 60, 11: None, 20: 2, 8: 80}
    for name, at, is_major, values in [
        ("major", day(0), True, major),
        ("minor", day(1), False, minor),
    ]:
        data = [(i, v, v is None) for i, v in values.items()]
        ds.commit({"t": frame(spark, data, schema)}, at, is_major, name=name)
    ds.maintenance.compact("t")
    data = [(i, v, v is None) for i, v in on_top.items()]
    ds.commit({"t": frame(spark, data, schema)}, day(2), False, name="on_top")
    reader = DatasetReader(ds.root)
    plan = plan_state(reader.snapshot(), "t").rows
    assert plan.base.is_compaction and len(ranges.id_ranges(plan) or ()) == 4
    wrote = {i: name for name, values in [("major", major), ("minor", minor), ("on_top", on_top)]
             for i in values}  # fmt: skip
    expected = [(i, v, wrote[i]) for i, v in state_of(major, minor, on_top)]
    annotated = streamed(reader.scan("t", with_revision=True))
    assert as_rows(annotated, "id", "v", "_revision") == expected
