"""``format("revisions")`` without a JVM: its options read as the library's reads, the filters
it takes, how it splits a read, what a part reads, and how its change feed moves through the
log — on the shipped sample dataset (the read-semantics worked example, no Spark needed to
write it) and on files written here with PyArrow.

The source's code runs in this process exactly as Spark's Python processes run it; the
tests on a Spark session (``test_batch_reads.py``, ``test_change_feed.py``) add Spark.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from core.helpers import stage_frame
from pyspark.sql.datasource import (
    CaseInsensitiveDict,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from pyspark.sql.types import LongType, StringType, StructField, StructType

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import (
    ChangeFeedError,
    InvalidArgumentError,
    NaiveTimestampError,
    RetentionError,
    RevisionsError,
    UnknownRevisionError,
)
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.read.plan.scans import ScanTask
from revisions_assets.core.read.plan.schema import Field
from revisions_assets.core.storage.backends import open_storage
from revisions_assets.core.storage.base import LocalStorage
from revisions_assets.samples import copy_sample
from revisions_assets.spark import RevisionsDataSource
from revisions_assets.spark.filters import polars_condition, range_may_hold, taken
from revisions_assets.spark.options import parse_options
from revisions_assets.spark.planning import check_schema, id_ranges, split
from revisions_assets.spark.stream import ChangeFeedReader
from revisions_assets.spark.worker import RESET, read_part

from .helpers import planned, read_parts, sorted_rows, source_rows

TABLE = "featurizer_A"


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> str:
    """The worked example: revision_0 (major, ids 0-4), revision_2 (2-6), revision_4 (major,
    4-8), revision_6 (6-10), stamped 2020-01-01, -03, -05, -07; sequences 1 to 4."""
    return str(copy_sample("features", tmp_path_factory.mktemp("sample") / "features"))


def day(n: int) -> str:
    return (datetime(2020, 1, 1, tzinfo=UTC) + timedelta(days=n)).isoformat()


# -- options ---------------------------------------------------------------------------------


def test_options_are_the_library_reads_options():
    root = "/data/features"
    state = parse_options({"path": root, "TABLE": "t", "As_Of": day(3), "columns": "a, b"})
    assert (state.root, state.table, state.kind) == (root, "t", "state")
    assert state.request.as_of == datetime(2020, 1, 4, tzinfo=UTC)
    assert state.request.columns == ("a", "b") and state.request.with_revision is False
    changes = parse_options({"path": root, "table": "t", "changes": "TRUE", "since_sequence": "3"})
    assert changes.kind == "changes" and changes.request.since_sequence == 3
    assert changes.request.with_revision is True  # a change read names each row's revision
    plain = parse_options({"path": root, "table": "t", "changes": "true", "with_revision": "false"})
    assert plain.request.with_revision is False
    history = parse_options({"path": root, "table": "t", "history": "true", "since": day(1)})
    assert history.kind == "history" and history.request.since == datetime(2020, 1, 2, tzinfo=UTC)
    stream = parse_options(
        {"path": root, "table": "t", "startingPosition": "HEAD~2", "maxRevisionsPerTrigger": "5"}
    )
    assert stream.stream.starting_position == "HEAD~2" and stream.stream.max_revisions == 5
    assert stream.stream.given == ("startingPosition", "maxRevisionsPerTrigger")
    s3 = parse_options({"path": "s3://b/p", "table": "t", "storage.endpoint_url": "http://x"})
    assert s3.storage_options == {"endpoint_url": "http://x"}


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"table": "t", "asof": day(1)}, InvalidArgumentError, "unknown options ['asof']"),
        ({"table": "t", "path": None}, InvalidArgumentError, "needs the dataset's root"),
        ({"table": "t", "changes": "true", "history": "true"}, InvalidArgumentError, "not both"),
        ({"table": "t", "changes": "yes"}, InvalidArgumentError, "changes must be true or false"),
        ({"table": "t", "changes": "true", "since_sequence": "-1"}, InvalidArgumentError, ">= 0"),
        ({"table": "t", "partitions": "0"}, InvalidArgumentError, "partitions must be"),
        ({"table": "t", "columns": "a,,b"}, InvalidArgumentError, "separated by commas"),
        ({"table": "t", "onMajor": "skip"}, InvalidArgumentError, "onMajor must be reset or fail"),
        ({"table": "t", "startingPosition": " "}, InvalidArgumentError, "is empty"),
        ({"table": "t", "maxRevisionsPerTrigger": "x"}, InvalidArgumentError, "maxRevisions"),
        # the engine's own refusals of the request, word for word
        ({"table": "t", "as_of": "2020-01-02"}, NaiveTimestampError, "has no timezone"),
        (
            {"table": "t", "changes": "true", "as_of": day(1)},
            InvalidArgumentError,
            "as_of does not apply to a change read of table 't'",
        ),
        (
            {"table": "t", "changes": "true", "since": day(3), "until": day(1)},
            InvalidArgumentError,
            "the window is (since, until]",
        ),
    ],
)
def test_bad_options_are_refused_naming_the_option(options, error, message):
    given = {"path": "/data/features", **options}
    with pytest.raises(error, match=None) as caught:
        parse_options({k: v for k, v in given.items() if v is not None})
    assert message in str(caught.value)


def test_a_read_without_a_table_names_the_tables(sample):
    with pytest.raises(InvalidArgumentError, match="'featurizer_A', 'featurizer_B'"):
        planned(sample)


@pytest.mark.parametrize(
    "options, call",
    [
        ({"table": "nope"}, lambda r: r.read("nope")),
        ({"table": TABLE, "as_of": "2020-01-02"}, lambda r: r.read(TABLE, as_of="2020-01-02")),
        ({"table": TABLE, "at": "HEAD~9"}, lambda r: r.read(TABLE, at="HEAD~9")),
        (
            {"table": TABLE, "changes": "true", "since_sequence": "5", "until_sequence": "2"},
            lambda r: r.changes(TABLE, since_sequence=5, until_sequence=2),
        ),
        (
            {"table": TABLE, "changes": "true", "as_of": day(2)},
            lambda r: r.scan(TABLE, as_of=day(2)).changes(),
        ),
        (
            {"table": TABLE, "history": "true", "columns": "nope"},
            lambda r: r.history(TABLE, columns=["nope"]),
        ),
    ],
)
def test_the_source_refuses_what_the_library_refuses(sample, options, call):
    with pytest.raises(RevisionsError) as library:
        call(DatasetReader(sample))
    with pytest.raises(type(library.value)) as source:
        RevisionsDataSource(CaseInsensitiveDict({"path": sample, **options})).schema()
    assert library.value.args[0].split("(): ", 1)[-1] in source.value.args[0]


def test_a_batch_read_refuses_the_options_of_a_stream(sample):
    source = RevisionsDataSource(
        CaseInsensitiveDict({"path": sample, "table": TABLE, "startingPosition": "latest"})
    )
    with pytest.raises(InvalidArgumentError, match=r"\['startingPosition'\].*readStream only"):
        source.reader(source.schema())


# -- filters ---------------------------------------------------------------------------------


def test_the_source_takes_the_filters_on_the_ids():
    ids = ("id", "part")
    assert taken(EqualTo(("id",), 3), ids) and taken(EqualTo(("ID",), 3), ids)
    assert taken(In(("part",), ("a", "b")), ids) and taken(IsNotNull(("id",)), ids)
    assert taken(GreaterThan(("id",), 3), ids) and taken(Not(EqualTo(("id",), 3)), ids)
    assert taken(LessThanOrEqual(("id",), date(2020, 1, 1)), ids)
    # left to Spark: other columns, values Spark and Polars may compare differently
    assert not taken(EqualTo(("v",), 3), ids)
    assert not taken(EqualTo(("id",), 3.5), ids)
    assert not taken(EqualTo(("id",), datetime(2020, 1, 1)), ids)
    assert not taken(EqualTo(("id", "x"), 3), ids)
    assert not taken(Not(GreaterThan(("id",), 3)), ids)
    assert not taken(StringStartsWith(("part",), "a"), ids)
    assert not taken(In(("id",), ()), ids)


def test_taken_filters_keep_the_rows_spark_keeps():
    frame = pl.DataFrame({"id": [1, 2, 3, 4, 5]})
    cases = {
        EqualTo(("id",), 3): [3],
        In(("id",), (1, 5, 9)): [1, 5],
        GreaterThan(("id",), 3): [4, 5],
        GreaterThanOrEqual(("id",), 3): [3, 4, 5],
        LessThan(("id",), 3): [1, 2],
        LessThanOrEqual(("id",), 3): [1, 2, 3],
        Not(EqualTo(("id",), 3)): [1, 2, 4, 5],
        Not(In(("id",), (1, 2))): [3, 4, 5],
        IsNotNull(("id",)): [1, 2, 3, 4, 5],
    }
    for condition, kept in cases.items():
        assert frame.filter(polars_condition(condition, ("id",)))["id"].to_list() == kept


def test_a_part_no_row_of_may_meet_the_filters_is_not_read():
    assert not range_may_hold([EqualTo(("id",), 9)], "id", 0, 5)
    assert range_may_hold([EqualTo(("id",), 4)], "id", 0, 5)
    assert not range_may_hold([In(("id",), (7, 9))], "id", None, 5)
    assert not range_may_hold([GreaterThanOrEqual(("id",), 5)], "id", 0, 5)
    assert not range_may_hold([LessThan(("id",), 5)], "id", 5, None)
    assert not range_may_hold([LessThanOrEqual(("id",), 4)], "id", 5, None)
    assert range_may_hold([LessThanOrEqual(("id",), 5)], "id", 5, None)
    assert range_may_hold([EqualTo(("v",), 9)], "id", 0, 5)  # another column: may hold


# -- splitting -------------------------------------------------------------------------------


def sorted_file(folder, name: str, ids: list, group_rows: int) -> None:
    pq.write_table(
        pa.table({"id": ids, "v": list(range(len(ids)))}), folder / name, row_group_size=group_rows
    )


def task(files: list[str], id_type: str = '"long"', rows: int = 0) -> ScanTask:
    schema = (Field("id", id_type), Field("v", '"long"'))
    stamp = datetime(2020, 1, 1, tzinfo=UTC)
    return ScanTask("r", 1, stamp, tuple(files), schema, rows, 0, 0, 0)


def test_id_ranges_cut_a_revision_in_parts_of_about_equal_rows(tmp_path):
    # two files, each sorted by id, ids interleaved between them (as a major's tasks write)
    sorted_file(tmp_path, "a.parquet", list(range(0, 2000, 2)), 100)
    sorted_file(tmp_path, "b.parquet", list(range(1, 2000, 2)), 100)
    storage = LocalStorage(tmp_path)
    ranges = id_ranges(storage, task(["a.parquet", "b.parquet"]), "id", 4)
    assert len(ranges) == 4 and ranges[0].low is None and ranges[-1].high is None
    ids = pl.DataFrame({"id": range(2000)})
    counts = [ids.filter(r.condition()).height for r in ranges]
    # even to within the rows of a row group of each file (the cuts are row groups' minima)
    assert sum(counts) == 2000 and all(abs(c - 500) <= 2 * 100 for c in counts), counts
    # string ids cut as well; a type whose order the statistics may not share does not
    sorted_file(tmp_path, "s.parquet", [f"k{i:05d}" for i in range(1000)], 100)
    assert len(id_ranges(storage, task(["s.parquet"], '"string"'), "id", 3)) == 3
    assert len(id_ranges(storage, task(["a.parquet"], '"double"'), "id", 3)) == 1
    # one row group: nothing to cut
    sorted_file(tmp_path, "one.parquet", list(range(50)), 100)
    assert len(id_ranges(storage, task(["one.parquet"]), "id", 3)) == 1


def test_a_read_splits_by_file_or_by_id_range(sample):
    # small: one part
    assert [p.id_range for p in split(planned(sample, table=TABLE), ())] == [None]
    # a merge (revision_4 and revision_6) by id ranges: one here, its files have one row
    # group each (test_id_ranges_... cuts larger ones)
    merged = split(planned(sample, table=TABLE, partitions=3), ())
    assert [(p.id_range.low, p.id_range.high) for p in merged] == [(None, None)]
    # a major alone, by its files (one here)
    major = split(planned(sample, table=TABLE, at="revision_4", partitions=4), ())
    assert [p.plan.rows.base.files for p in major] == [major[0].plan.rows.base.files]
    assert major[0].id_range is None
    # the filters the source took travel with every part
    (part,) = split(planned(sample, table=TABLE), (EqualTo(("id",), 5),))
    assert part.conditions == (EqualTo(("id",), 5),)


# -- what a part reads: the library's rows ------------------------------------------------------


def reader_cases(reader: DatasetReader):
    """(source options, the library's read with the same meaning) pairs."""
    cs = reader.changes
    return [
        ({}, lambda: reader.read(TABLE)),
        ({"with_revision": True}, lambda: reader.read(TABLE, with_revision=True)),
        ({"as_of": day(3)}, lambda: reader.read(TABLE, as_of=day(3))),
        ({"at": "HEAD~1"}, lambda: reader.read(TABLE, at="HEAD~1")),
        ({"at": "2"}, lambda: reader.read(TABLE, at=2)),
        ({"columns": "day"}, lambda: reader.read(TABLE, columns=["day"])),
        (
            {"changes": True, "since": day(1), "until": day(3)},
            lambda: cs(TABLE, since=day(1), until=day(3), with_revision=True).df,
        ),
        (
            {"changes": True, "since": day(1), "until": day(5)},
            lambda: cs(TABLE, since=day(1), until=day(5), with_revision=True).df,
        ),
        (
            {"changes": True, "since_sequence": 3, "with_revision": False},
            lambda: cs(TABLE, since_sequence=3).df,
        ),
        ({"changes": True}, lambda: cs(TABLE, with_revision=True).df),
        ({"history": True}, lambda: reader.history(TABLE)),
        ({"history": True, "since": day(4)}, lambda: reader.history(TABLE, since=day(4))),
    ]


def test_each_part_reads_the_library_rows(sample):
    reader = DatasetReader(sample)
    for options, expected in reader_cases(reader):
        rows = source_rows(sample, table=TABLE, **options)
        want = expected()
        if options.get("changes"):
            is_reset = reader.changes(
                TABLE,
                **{k: v for k, v in options.items() if k in ("since", "until", "since_sequence")},
            ).is_reset
            assert set(rows.column(RESET).to_pylist()) <= {is_reset}, options
            rows = rows.drop_columns([RESET])
        assert rows.column_names == want.columns, options
        assert sorted_rows(rows) == sorted_rows(want), options


def test_a_schema_given_chooses_columns(sample):
    read = planned(sample, table=TABLE, with_revision=True)
    chosen = StructType([StructField("id", LongType()), StructField("_revision", StringType())])
    check_schema(read.fields, chosen, "a read")
    rows = pa.Table.from_batches([b for p in split(read, ()) for b in read_part(p, chosen)])
    assert rows.column_names == ["id", "_revision"]
    want = DatasetReader(sample).read(TABLE, with_revision=True).select("id", "_revision")
    assert sorted_rows(rows) == sorted_rows(want)
    source = RevisionsDataSource(CaseInsensitiveDict({"path": sample, "table": TABLE}))
    with pytest.raises(InvalidArgumentError, match=r"\['day string'\]"):
        source.reader(StructType([StructField("day", StringType())]))


# -- the change feed -------------------------------------------------------------------------


def feed(root: str, **options) -> ChangeFeedReader:
    read = planned(root, table=TABLE, changes=True, **options)
    return ChangeFeedReader(read.options, read.spark_schema)


def batch(reader: ChangeFeedReader, start: int, end: int) -> pa.Table:
    parts = reader.partitions(
        {"table": TABLE, "sequence": start}, {"table": TABLE, "sequence": end}
    )
    read = planned(reader.options.root, table=TABLE, changes=True)
    return read_parts(read, parts)


def offset(sequence: int) -> dict:
    return {"table": TABLE, "sequence": sequence}


def test_a_change_feed_bootstraps_then_follows_revision_by_revision(sample):
    reader, everything = feed(sample, maxRevisionsPerTrigger=1), ReadAllAvailable()
    assert reader.initialOffset() == offset(0)
    # the bootstrap is one batch whatever the limit: the state at the newest revision
    assert reader.latestOffset(offset(0), ReadMaxRows(1)) == offset(4)
    state = batch(reader, 0, 4)
    assert set(state.column(RESET).to_pylist()) == {True}
    assert sorted_rows(state.select(["day", "id"])) == sorted_rows(
        DatasetReader(sample).read(TABLE)
    )
    # then at most maxRevisionsPerTrigger revisions a batch, unless Spark asks for all
    assert reader.latestOffset(offset(1), ReadMaxRows(1)) == offset(2)
    assert reader.latestOffset(offset(1), everything) == offset(4)
    assert reader.latestOffset(offset(4), everything) == offset(4)  # nothing new: no batch
    minor = batch(reader, 1, 2)
    want = DatasetReader(sample).changes(
        TABLE, since_sequence=1, until_sequence=2, with_revision=True
    )
    assert not want.is_reset and set(minor.column(RESET).to_pylist()) == {False}
    assert sorted_rows(minor.drop_columns([RESET])) == sorted_rows(want.df)
    assert reader.partitions(offset(4), offset(4)) == []


def test_a_change_feed_starts_where_it_is_told(sample):
    assert feed(sample, startingPosition="latest").initialOffset() == offset(4)
    assert feed(sample, startingPosition="revision_2").initialOffset() == offset(2)
    assert feed(sample, startingPosition="HEAD~1").initialOffset() == offset(3)
    assert feed(sample, startingPosition="3").initialOffset() == offset(3)
    with pytest.raises(UnknownRevisionError):
        feed(sample, startingPosition="nope").initialOffset()


def test_a_major_resets_the_feed_or_stops_it(sample):
    # revision_4 (sequence 3) is a major: the batch after position 2 is the state at 3
    reset = batch(feed(sample), 2, 3)
    assert set(reset.column(RESET).to_pylist()) == {True}
    assert sorted_rows(reset.select(["day", "id"])) == sorted_rows(
        DatasetReader(sample).read(TABLE, at=3)
    )
    stopping = feed(sample, onMajor="fail")
    # what comes before a major is delivered first, then the major alone stops the feed
    assert stopping.latestOffset(offset(1), ReadAllAvailable()) == offset(2)
    assert stopping.latestOffset(offset(2), ReadAllAvailable()) == offset(3)
    with pytest.raises(ChangeFeedError, match="major 'revision_4' \\(sequence 3\\).*onMajor=fail"):
        stopping.partitions(offset(2), offset(3))
    # the bootstrap is a reset by nature, never refused
    assert feed(sample, onMajor="fail").partitions(offset(0), offset(4))


def test_a_feed_refuses_what_does_not_apply_to_it(sample):
    read = planned(sample, table=TABLE)
    with pytest.raises(InvalidArgumentError, match='add .option\\("changes", "true"\\)'):
        ChangeFeedReader(read.options, read.spark_schema)
    with pytest.raises(InvalidArgumentError, match="\\['since_sequence'\\] do not apply"):
        feed(sample, since_sequence=2)
    with pytest.raises(ChangeFeedError, match="checkpoint"):
        feed(sample).latestOffset({"table": "featurizer_B", "sequence": 2}, ReadAllAvailable())


def test_a_position_past_retention_names_the_oldest_readable(tmp_path):
    root = str(copy_sample("features", tmp_path / "features"))
    ds = RevisionedDataset(root)  # a vacuum needs no Spark
    ds.maintenance.vacuum(retain=timedelta(0), keep_majors=False)  # removes revision_0 and _2
    reader = feed(root)
    with pytest.raises(RetentionError, match="the oldest position still readable is 4"):
        reader.partitions(offset(1), offset(2))
    # the vacuum entry is no revision of the table: it makes no batch
    assert reader.latestOffset(offset(4), ReadAllAvailable()) == offset(4)


def test_a_feed_reads_its_columns_and_stops_at_new_ones(tmp_path):
    root = str(copy_sample("features", tmp_path / "features"))
    started = feed(root)  # its columns: day, id (and the change read's own)
    log = RevisionLog(open_storage(root))
    log.refresh()
    added = StructType(
        [
            StructField("day", LongType()),
            StructField("id", LongType()),
            StructField("extra", StringType()),
        ]
    )
    rows = pl.DataFrame({"day": [8], "id": [3], "extra": ["x"], "_deleted": [False]})
    stage_frame(
        log, root, "revision_8", datetime(2020, 1, 9, tzinfo=UTC), False, rows, added, TABLE
    )
    with pytest.raises(ChangeFeedError, match=r"\(added \['extra'\]\): restart the query"):
        started.partitions(offset(4), offset(5))
    # restarted, the query has the new column: batches of older revisions read it as null
    restarted = feed(root)
    assert "extra" in restarted.schema.fieldNames()
    parts = restarted.partitions(offset(1), offset(2))
    read = planned(root, table=TABLE, changes=True)
    older = pa.Table.from_batches([b for p in parts for b in read_part(p, restarted.schema)])
    assert older.num_rows and set(older.column("extra").to_pylist()) == {None}
    assert read.spark_schema == restarted.schema


def test_a_read_planned_before_a_vacuum_says_to_load_again(tmp_path):
    root = str(copy_sample("features", tmp_path / "features"))
    read = planned(root, table=TABLE, at="revision_2")  # reads revision_0 and revision_2
    RevisionedDataset(root).maintenance.vacuum(retain=timedelta(0), keep_majors=False)
    with pytest.raises(RetentionError, match="planned on the log at sequence 4.*load the"):
        split(read, ())
    assert split(planned(root, table=TABLE), ())  # planned now: what the vacuum left
