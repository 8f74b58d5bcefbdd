"""Row hashes: the hash's stability, skip-unchanged minors, change reads filtered
to real changes and soft majors, by worked examples and against tests/core/model.py."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from harness.dates import day
from harness.examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from revisions_assets import DatasetReader, RevisionedDataset, UpstreamPosition
from revisions_assets.core.columns import ROW_HASH
from revisions_assets.core.errors import CarriedStateError, InvalidNameError
from revisions_assets.core.hashing import row_hash
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.read.execute import changes
from revisions_assets.core.read.plan.schema import value_columns
from revisions_assets.core.spark_columns import quoted
from revisions_assets.core.storage.backends import open_storage
from revisions_assets.core.write import file_size, transaction
from revisions_assets.core.write.commit import CommitPlanner

from .damage import as_earlier_release
from .helpers import by_id, frame, stage_revision
from .model import Model, ModelNoMajorError, unchanged_skipped, value_changes

SCHEMA = "id long, v long, w string"


def hashes(df, columns=None):
    """{id: hash} of a tiny frame's value columns (all but ``id`` unless given)."""
    columns = columns or value_columns(df.schema, ["id"])
    return by_id(df.withColumn("h", row_hash(df.schema, columns)), "h")


# -- the hash ---------------------------------------------------------------------------------


def test_hash_ignores_column_order_and_null_columns(spark):
    base = frame(spark, [(1, 5, "a"), (2, None, "b")], SCHEMA)
    reordered = base.select("w", "id", "v")
    added = base.withColumn("extra", F.lit(None).cast("double"))
    got = hashes(base)
    assert got == hashes(reordered) == hashes(added)
    assert got[1] != got[2]
    # a null column contributes nothing: (v=null, w='b') hashes like a row without v
    assert got[2] == hashes(base.drop("v"))[2]
    # but a value moved to another column is another row
    swapped = frame(spark, [(1, None, "a")], "id long, v long, x string")
    assert hashes(swapped)[1] != hashes(frame(spark, [(1, None, "a")], SCHEMA))[1]


def test_hash_types_are_canonical(spark):
    as_int = frame(spark, [(1, 7, 0.5)], "id long, v int, f float")
    as_long = frame(spark, [(1, 7, 0.5)], "id long, v long, f double")
    as_short = frame(spark, [(1, 7, 0.5)], "id long, v short, f double")
    assert hashes(as_int) == hashes(as_long) == hashes(as_short)
    as_string = frame(spark, [(1, "7", 0.5)], "id long, v string, f double")
    assert hashes(as_string) != hashes(as_long)


def test_hash_is_a_fixed_value(spark):
    """The hash is part of the files: a change of its definition must be deliberate."""
    row = frame(spark, [(1, 5, "a")], SCHEMA)
    assert hashes(row)[1] == (FIXED_HASH,)


#: xxhash64(seed 42) of struct('v', 5L), struct('w', 'a'): the definition, frozen
FIXED_HASH = -6403949528138353663

MAPS = (
    "id long, m map<string,int>, s struct<a:int,n:map<string,array<int>>>, l array<map<int,string>>"
)


def test_maps_hash_by_their_entries(spark, root):
    """Spark refuses to hash a map (equal maps may list their entries in another order):
    a map, at the top or nested, hashes as its entries sorted by key, so a map column can
    be committed, and a skip-unchanged minor of the same maps in another order writes
    nothing, while a changed entry is a change; readers give the maps back."""
    ab = [("a", 1), ("b", 2)]
    rows = [
        (1, ab, (1, [("x", [1, 2]), ("y", [])]), [[(1, "p"), (2, "q")]]),
        (2, ab[::-1], (1, [("y", []), ("x", [1, 2])]), [[(2, "q"), (1, "p")]]),
        (3, [("a", 1), ("b", 3)], (1, [("x", [1, 2]), ("y", [])]), [[(1, "p"), (2, "q")]]),
        (4, [], None, None),
        (5, None, None, None),
    ]
    got = hashes(frame(spark, rows, MAPS))
    assert got[1] == got[2]  # the same maps, entries in another order
    assert got[3] != got[1]  # one value differs
    assert got[4] != got[5]  # an empty map is a value, a null one is not

    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    ds.commit({"t": frame(spark, rows[:2], MAPS)}, day(0), True)
    again = [(1, ab[::-1], rows[1][2], rows[1][3]), (2, ab, rows[0][2], rows[0][3])]
    assert ds.commit({"t": frame(spark, again, MAPS)}, day(1), False, skip_unchanged=True) is None
    changed = [(2, [("a", 1), ("b", 9)], rows[0][2], rows[0][3])]
    ds.commit({"t": frame(spark, changed, MAPS)}, day(2), False, skip_unchanged=True)
    read = DatasetReader(root).read("t").sort("id")
    assert read["m"].to_list() == [
        [{"key": "a", "value": 1}, {"key": "b", "value": 2}],
        [{"key": "a", "value": 1}, {"key": "b", "value": 9}],
    ]
    assert sorted(r["id"] for r in ds.read("t").collect()) == [1, 2]


# -- skip-unchanged minors -----------------------------------------------------------------------


def test_hash_of_awkward_column_names(spark):
    """Names with quotes, backslashes or backticks hash as their own text, whatever the
    parser's escape setting (the hash is built from Column objects, never SQL text)."""
    schema = "id long, `it's` long, `back\\slash` string, `tick``s` double"
    df = frame(spark, [(1, 5, "a", 0.5), (2, None, "b", None)], schema)
    names = value_columns(df.schema, ["id"])
    by_columns = F.xxhash64(
        *[
            F.when(F.col(quoted(n)).isNotNull(), F.struct(F.lit(n), F.col(quoted(n))))
            for n in sorted(names)
        ]
    )
    want = [r[0] for r in df.orderBy("id").select(by_columns).collect()]
    for escaped in ("false", "true"):
        spark.conf.set("spark.sql.parser.escapedStringLiterals", escaped)
        try:
            got = [r[0] for r in df.orderBy("id").select(row_hash(df.schema, names)).collect()]
        finally:
            spark.conf.unset("spark.sql.parser.escapedStringLiterals")
        assert got == want, escaped


def test_skip_unchanged_minor(spark, root):
    ds = RevisionedDataset(root, spark, id_columns=["id"])
    ds.commit({"t": frame(spark, [(1, 1, "a"), (2, 2, "b"), (3, 3, "c")], SCHEMA)}, day(0), True)
    rows = frame(spark, [(1, 1, "a"), (2, 20, "b"), (4, 4, "d")], SCHEMA)
    written = ds.commit({"t": rows}, day(1), False, skip_unchanged=True)
    assert (written.tables["t"].rows, written.tables["t"].rows_offered) == (2, 3)
    assert ds.inspect.log()["rows"].tolist()[-1] == 2
    assert by_id(ds.read("t"), "v") == {1: (1,), 2: (20,), 3: (3,), 4: (4,)}
    assert ROW_HASH not in ds.read("t").columns
    # every row unchanged: nothing is committed ...
    assert ds.commit({"t": rows}, day(2), False, skip_unchanged=True) is None
    # ... unless it moves a consumer position: an empty revision records it
    moved = ds.commit(
        {"t": rows}, day(2), False, skip_unchanged=True, upstream=[UpstreamPosition("up", "u", 3)]
    )
    assert moved is not None and moved.rows == 0 and ds.inspect.upstream_position("up", "u") == 3
    # without skipping (the handle's default) every offered row is written
    plain = ds.commit({"t": rows}, day(3), False)
    assert (plain.tables["t"].rows, plain.tables["t"].rows_offered) == (3, None)
    # a handle whose default is to skip; a tombstone is always written
    skipping = RevisionedDataset(root, spark, skip_unchanged=True)
    gone = frame(spark, [(1, 1, "a", False), (3, None, None, True)], SCHEMA + ", _deleted boolean")
    written = skipping.commit({"t": gone}, day(4), False)
    assert (written.tables["t"].rows, written.tables["t"].tombstones) == (1, 1)


def test_skip_compares_with_the_state_as_of_the_minor(spark, root):
    """A backfill stamped before a newer minor replaces the row of its own time."""
    ds = RevisionedDataset(root, spark, id_columns=["id"], skip_unchanged=True)
    ds.commit({"t": frame(spark, [(1, 1, "a")], SCHEMA)}, day(0), True)
    ds.commit({"t": frame(spark, [(1, 2, "a")], SCHEMA)}, day(2), False)
    # the latest row is v=2, but as of day 1 it is v=1: v=2 at day 1 is a change
    backfill = ds.commit({"t": frame(spark, [(1, 2, "a")], SCHEMA)}, day(1), False)
    assert backfill is not None and backfill.tables["t"].rows == 1
    assert by_id(ds.read("t", as_of=day(1)), "v") == {1: (2,)}
    # and v=1 at day 1 again is unchanged only against that backfill
    assert ds.commit({"t": frame(spark, [(1, 2, "a")], SCHEMA)}, day(1.5), False) is None


def test_a_small_offer_is_compared_with_the_state_of_its_ids_only(spark, monkeypatch):
    """Up to SMALL_ROWS offered rows, the state is narrowed to their ids before the
    anti-join (its hashes are not shuffled whole); both plans keep the same rows."""
    state = frame(spark, [(i, i, "s") for i in range(1, 7)], SCHEMA)
    state = state.withColumn(ROW_HASH, row_hash(state.schema, value_columns(state.schema, ["id"])))
    offer = frame(spark, [(2, 2, "s"), (3, 30, "s"), (9, 9, "s")], SCHEMA)
    offer = offer.withColumn(ROW_HASH, row_hash(offer.schema, value_columns(offer.schema, ["id"])))
    narrowed = transaction.skip_unchanged(offer, state, ["id"], offered=3)
    monkeypatch.setattr(transaction, "SMALL_ROWS", 2)
    whole = transaction.skip_unchanged(offer, state, ["id"], offered=3)
    plans = [df._jdf.queryExecution().optimizedPlan().toString() for df in (narrowed, whole)]
    assert ["LeftSemi" in p for p in plans] == [True, False]
    assert by_id(narrowed, "v") == by_id(whole, "v") == {3: (30,), 9: (9,)}


def test_files_are_sized_by_rows(spark, root, monkeypatch):
    """A small skip-unchanged minor writes one file, though its rows come from a shuffle of
    several partitions (cached, so adaptive execution does not coalesce them); a revision of
    more rows than a file's target writes files of at most that many rows."""

    def grouped(n: int, value: int):  # n rows out of a shuffle, as a featurizer gives them
        rows = spark.range(3 * n).select((F.col("id") % n).alias("id"), F.lit(value).alias("v"))
        return rows.groupBy("id").agg(F.max("v").alias("v"))

    ds = RevisionedDataset(root, spark, id_columns=["id"], skip_unchanged=True)
    major = ds.commit({"t": grouped(500, 1)}, day(0), True)
    minor = ds.commit({"t": grouped(49, 2)}, day(1), False)
    assert [len(r.tables["t"].files) for r in (major, minor)] == [1, 1]
    # a file holds about DEFAULT_TARGET_FILE_BYTES at the bytes per row of the largest write
    written = major.tables["t"]
    target = file_size.DEFAULT_TARGET_FILE_BYTES * written.rows // written.bytes
    assert file_size.rows_per_file(ds.revisions("t"), "t") == target
    assert file_size.rows_per_file([], "t") == file_size.FIRST_FILE_ROWS

    # with a target of 10 rows: files of at most 10 rows (a task's rows split at the target)
    monkeypatch.setattr("revisions_assets.core.write.commit.rows_per_file", lambda *_: 10)
    minor = ds.commit({"t": grouped(49, 3)}, day(2), False)
    major = ds.commit({"t": grouped(35, 4)}, day(3), True)

    def rows_per_written_file(revision) -> list[int]:
        return [
            pq.read_metadata(os.path.join(root, f)).num_rows for f in revision.tables["t"].files
        ]

    assert minor.tables["t"].rows == 49
    for revision in (minor, major):  # the major: 35 rows and tombstones of the 465 others
        files, rows = rows_per_written_file(revision), revision.tables["t"].rows
        assert max(files) <= 10 and sum(files) == rows and len(files) >= rows // 10


def test_files_are_sorted_by_id_in_row_groups(spark, root, monkeypatch):
    """Every file a commit or a compaction writes is sorted by its ids and cut into row
    groups of at most ``ROW_GROUP_ROWS`` rows, so their min/max id ranges follow one
    another: an id filter skips the row groups whose range lacks the id."""
    monkeypatch.setattr(transaction, "ROW_GROUP_ROWS", 16)
    ds = RevisionedDataset(root, spark, id_columns=["k", "id"], compact_after=None)
    # rows out of a shuffle, in no order; two id columns: sorted by k, then id
    rows = spark.range(200).select(
        (F.col("id") % 3).alias("k"), (F.col("id") * 7919 % 200).alias("id"), F.lit(1).alias("v")
    )
    ds.commit({"t": rows.repartition(3)}, day(0), True)
    ds.commit(
        {"t": rows.where("id % 5 = 0").withColumn("v", F.lit(2)).repartition(2)}, day(1), False
    )
    compaction = ds.maintenance.compact("t")
    entries = [*ds.revisions("t"), compaction]
    files = [os.path.join(root, f) for entry in entries for f in entry.tables["t"].files]
    assert len(files) >= 3
    for path in files:
        metadata = pq.read_metadata(path)
        keys = pq.read_table(path, columns=["k", "id"]).to_pylist()
        pairs = [(r["k"], r["id"]) for r in keys]
        assert pairs == sorted(pairs), path
        sizes = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
        assert max(sizes) <= 16 and sum(sizes) == len(pairs), (path, sizes)
        if len(pairs) > 16:  # row groups in key order: the first column's ranges follow on
            ranges = [
                (
                    metadata.row_group(g).column(0).statistics.min,
                    metadata.row_group(g).column(0).statistics.max,
                )
                for g in range(metadata.num_row_groups)
            ]
            assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:], strict=False)), ranges


def test_a_column_of_distinct_values_is_written_without_a_dictionary(spark, root):
    """A column chunk's dictionary is capped at ``DICTIONARY_PAGE_BYTES``: 5,000 distinct
    doubles (40 KB) in a row group of 15,000 rows are written plain (Parquet's default 1 MiB
    would hold them, filling a dictionary in every row group); a column of three values keeps
    its dictionary."""
    ds = RevisionedDataset(root, spark, id_columns=["id"])
    rows = spark.range(15_000).select(
        "id", (F.col("id") % 5_000 * 1.5).alias("x"), (F.col("id") % 3).cast("string").alias("c")
    )
    written = ds.commit({"t": rows.coalesce(1)}, day(0), True).tables["t"]
    metadata = pq.read_metadata(os.path.join(root, written.files[0]))
    names = [metadata.schema.column(i).name for i in range(metadata.num_columns)]
    chunks = {name: metadata.row_group(0).column(i) for i, name in enumerate(names)}
    assert 5_000 * 8 > file_size.DICTIONARY_PAGE_BYTES
    assert not chunks["x"].has_dictionary_page and chunks["c"].has_dictionary_page


def test_a_compaction_rewrites_an_old_base_into_the_layout(spark, root, monkeypatch):
    """A major an earlier release wrote (its rows unsorted, in one row group) with nothing on
    top: a compaction rewrites it sorted by the ids in row groups of ``ROW_GROUP_ROWS``;
    reads take the new files and return the same rows, and a second compaction finds
    nothing to do."""
    monkeypatch.setattr(transaction, "ROW_GROUP_ROWS", 16)
    monkeypatch.setattr(file_size, "ROW_GROUP_ROWS", 16)
    log = RevisionLog(open_storage(root))
    stage_revision(log, root, "old", day(0), True, {(i * 37 % 100,): {"v": i} for i in range(100)})
    (old,) = pq.read_metadata(os.path.join(root, "old/t/part-00000.parquet")).to_dict()[
        "row_groups"
    ]
    assert old["num_rows"] == 100  # one row group: what earlier releases wrote
    ds = RevisionedDataset(root, spark, compact_after=None)
    before = sorted(tuple(r) for r in ds.read("t").collect())
    assert ds.inspect.revisions_on_base("t") == 0
    compaction = ds.maintenance.compact("t")
    assert compaction is not None and compaction.replaces["t"].revisions == 1
    ids, sizes = [], []
    for path in compaction.tables["t"].files:
        local = os.path.join(root, path)
        ids += pq.read_table(local, columns=["id"])["id"].to_pylist()
        metadata = pq.read_metadata(local)
        sizes += [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
    assert ids == sorted(ids) and sorted(ids) == list(range(100)) and max(sizes) <= 16
    assert [f.is_compaction for f in ds.scan("t").plan_files()] == [True]
    assert sorted(tuple(r) for r in ds.read("t").collect()) == before
    assert ds.maintenance.compact("t") is None


def test_row_hash_is_a_reserved_column(spark, root):
    ds = RevisionedDataset(root, spark, id_columns=["id"])
    df = frame(spark, [(1, 1, "a")], SCHEMA).withColumn(ROW_HASH, F.lit(3).cast("long"))
    with pytest.raises(InvalidNameError, match="_row_hash"):
        ds.commit({"t": df}, day(0), True)


# -- change reads and soft majors ----------------------------------------------------------------


@pytest.mark.parametrize("window_max", [None, 0], ids=["narrowed", "shuffled"])
def test_change_reads_report_real_changes(spark, root, monkeypatch, window_max):
    """Both plans of the hash join: the state before narrowed to a small window's ids (a
    broadcast), and the plain join a window above SMALL_ROWS rows gets."""
    if window_max is not None:
        monkeypatch.setattr(changes, "SMALL_ROWS", window_max)
    ds = RevisionedDataset(root, spark, id_columns=["id"])
    ds.commit({"t": frame(spark, [(1, 1, "a"), (2, 2, "b"), (3, 3, "c")], SCHEMA)}, day(0), True)
    ds.commit({"t": frame(spark, [(1, 9, "a"), (2, 2, "b")], SCHEMA)}, day(1), False)  # 2 same
    ds.commit({"t": frame(spark, [(1, 1, "a")], SCHEMA)}, day(2), False)  # 1 back to 1
    tomb = frame(spark, [(3, None, None, True)], SCHEMA + ", _deleted boolean")
    ds.commit({"t": tomb}, day(3), False)
    all_touched = ds.changes("t", since_sequence=1)
    assert sorted(by_id(all_touched.df, "_deleted")) == [1, 2, 3]
    real = ds.changes("t", since_sequence=1, only_changed=True)
    assert by_id(real.df, "v", "_deleted") == {3: (None, True)}
    by_time = ds.changes("t", since=day(0), until=day(2), only_changed=True)
    assert by_id(by_time.df, "v") == {}
    assert by_id(ds.changes("t", since=day(1), only_changed=True).df, "v", "_deleted") == {
        1: (1, False),
        3: (None, True),
    }
    assert real.changed is None


def test_an_in_order_skip_minor_needs_no_hash_join_a_backfill_does(spark, root, monkeypatch):
    """A window of one skip-unchanged minor in logical order holds only real changes (its
    commit compared every row with the state before it): no join. A backfill was compared
    with the state as of its own time, not with the later rows that shadow it: joined."""
    joins = []
    state_hashes = changes._state_hashes

    def counted(*args, **kwargs):
        joins.append(args)
        return state_hashes(*args, **kwargs)

    monkeypatch.setattr(changes, "_state_hashes", counted)
    ds = RevisionedDataset(root, spark, id_columns=["id"], skip_unchanged=True)
    ds.commit({"t": frame(spark, [(1, 1, "a"), (2, 1, "b")], SCHEMA)}, day(0), True)
    ds.commit({"t": frame(spark, [(1, 2, "a")], SCHEMA)}, day(5), False)
    # a backfill at day 3: entity 1's row differs from day 3's but equals the day-5 row
    ds.commit({"t": frame(spark, [(1, 2, "a"), (2, 2, "b")], SCHEMA)}, day(3), False)
    joins.clear()
    assert by_id(ds.changes("t", since_sequence=2, only_changed=True).df, "v") == {2: (2,)}
    assert len(joins) == 1
    ds.commit({"t": frame(spark, [(1, 2, "a"), (2, 3, "b")], SCHEMA)}, day(6), False)
    joins.clear()
    assert by_id(ds.changes("t", since_sequence=3, only_changed=True).df, "v") == {2: (3,)}
    assert joins == []
    # a window of two revisions, and hashes of some columns only, still compare
    assert by_id(ds.changes("t", since_sequence=2, only_changed=True).df, "v") == {2: (3,)}
    assert (
        by_id(ds.changes("t", since_sequence=3, only_changed=True, compared_columns=["w"]).df) == {}
    )
    assert len(joins) == 2


def test_a_skip_minor_that_lost_a_race_is_compared_again(spark, root, monkeypatch):
    """A rival commit lands after a skip-unchanged minor compared its rows with the head:
    the minor (committed after the rival) may repeat the rival's values, so a change read
    since the rival joins instead of trusting the minor's own comparison."""
    ds = RevisionedDataset(root, spark, id_columns=["id"], skip_unchanged=True)
    ds.commit({"t": frame(spark, [(1, 1, "a"), (2, 1, "b")], SCHEMA)}, day(0), True)
    rival = RevisionedDataset(root, spark, id_columns=["id"])
    replaced_hashes = CommitPlanner.replaced_hashes

    def then_a_rival_commits(self, *args, **kwargs):
        hashes = replaced_hashes(self, *args, **kwargs)
        if self is ds._planner:
            rival.commit({"t": frame(spark, [(1, 2, "a")], SCHEMA)}, day(1), False)
        return hashes

    monkeypatch.setattr(CommitPlanner, "replaced_hashes", then_a_rival_commits)
    record = ds.commit({"t": frame(spark, [(1, 2, "a"), (2, 3, "b")], SCHEMA)}, day(2), False)
    assert (record.sequence, record.tables["t"].compared_with, record.tables["t"].rows) == (3, 1, 2)
    assert by_id(ds.changes("t", since_sequence=2, only_changed=True).df, "v") == {2: (3,)}


def test_old_rows_without_a_hash_count_as_changed(spark, root):
    ds = RevisionedDataset(root, spark, id_columns=["id"])
    first = ds.commit({"t": frame(spark, [(1, 1, "a"), (2, 2, "b")], SCHEMA)}, day(0), True)
    as_earlier_release(Path(root))  # entries without file stats, as before hashes too
    for path in glob.glob(os.path.join(root, first.name, "t", "*.parquet")):
        table = pq.read_table(path)  # as written before hashes existed
        pq.write_table(table.drop_columns([ROW_HASH]), path)
        crc = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.crc")
        if os.path.exists(crc):
            os.remove(crc)  # Hadoop's local checksum of the file as Spark wrote it
    ds = RevisionedDataset(root, spark, id_columns=["id"])  # the log as rewritten
    offered = frame(spark, [(1, 1, "a"), (2, 2, "b")], SCHEMA)
    written = ds.commit({"t": offered}, day(1), False, skip_unchanged=True)
    assert written.tables["t"].rows == 2  # null hashes never match
    assert ds.commit({"t": offered}, day(2), False, skip_unchanged=True) is None
    assert sorted(by_id(ds.changes("t", since_sequence=0).changed, "v")) == [1, 2]


def test_soft_major_since_the_consumer_position(spark, root):
    ds = RevisionedDataset(root, spark, id_columns=["id"])
    ds.commit({"t": frame(spark, [(1, 1, "a"), (2, 2, "b"), (3, 3, "c")], SCHEMA)}, day(0), True)
    ds.commit({"t": frame(spark, [(2, 20, "b")], SCHEMA)}, day(1), False)  # after position 1
    major = [(1, 1, "a"), (2, 20, "b"), (4, 4, "d")]  # 1 same, 2 as at seq 2, 3 gone, 4 new
    ds.commit({"t": frame(spark, major, SCHEMA)}, day(2), True, version="2")
    cs = ds.changes("t", since_sequence=1, only_changed=True)
    assert cs.is_reset and sorted(by_id(cs.df, "v")) == [1, 2, 4]
    assert list(cs.changed.columns) == ["id", "v", "w", "_deleted"]
    assert by_id(cs.changed, "v", "_deleted") == {2: (20, False), 3: (None, True), 4: (4, False)}
    assert by_id(ds.changes("t", since_sequence=2).changed, "v", "_deleted") == {
        3: (None, True),
        4: (4, False),
    }
    assert sorted(by_id(ds.changes("t").changed, "v")) == [1, 2, 4]  # no start: all
    ds.maintenance.compact("t")  # compactions carry the hashes
    assert by_id(ds.changes("t", since_sequence=2).changed, "_deleted") == {
        3: (True,),
        4: (False,),
    }


def test_changes_of_some_columns(spark, root):
    """``compared_columns``: a consumer that reads only ``v`` sees no change when only ``w``
    moves; on a reset, ``columns`` projects ``changed`` too."""
    ds = RevisionedDataset(root, spark, id_columns=["id"])
    ds.commit({"t": frame(spark, [(1, 1, "a"), (2, 2, "b")], SCHEMA)}, day(0), True)
    ds.commit({"t": frame(spark, [(1, 1, "x"), (2, 5, "b")], SCHEMA)}, day(1), False)
    only_v = ds.changes("t", since_sequence=1, only_changed=True, compared_columns=["v"])
    assert by_id(only_v.df, "v", "w") == {2: (5, "b")}
    assert sorted(by_id(ds.changes("t", since_sequence=1, only_changed=True).df)) == [1, 2]
    # a major that bumps only w: no entity changed for a consumer of v
    ds.commit({"t": frame(spark, [(1, 1, "X"), (2, 5, "B")], SCHEMA)}, day(2), True)
    assert by_id(ds.changes("t", since_sequence=2, compared_columns=["v"]).changed) == {}
    assert sorted(by_id(ds.changes("t", since_sequence=2).changed)) == [1, 2]
    reset = ds.changes("t", since_sequence=2, columns=["w"], compared_columns=["w"])
    assert reset.is_reset and reset.df.columns == ["id", "w", "_deleted"]
    assert reset.changed.columns == ["id", "w", "_deleted"]
    assert by_id(reset.changed, "w") == {1: ("X",), 2: ("B",)}
    # an id column is accepted and counts for nothing: an entity's ids never change
    assert by_id(ds.changes("t", since_sequence=2, compared_columns=["id", "v"]).changed) == {}
    # a compared column that a later minor added: null in the state before, on both engines
    wider = frame(spark, [(1, 1, "X", 5), (2, 6, "B", None)], "id long, v long, w string, x long")
    ds.commit({"t": wider}, day(3), False)
    options = {"since_sequence": 3, "only_changed": True, "compared_columns": ["x"]}
    assert by_id(ds.changes("t", **options).df, "x") == {1: (5,)}
    assert DatasetReader(root).changes("t", **options).df.select("id", "x").rows() == [(1, 5)]


# -- against the model ---------------------------------------------------------------------------

STEPS = st.lists(
    st.tuples(
        st.booleans(),  # major
        st.integers(0, 5),  # timestamp, in days: out of order on purpose
        st.booleans(),  # skip unchanged
        st.dictionaries(st.integers(0, 4), st.one_of(st.none(), st.integers(0, 1)), max_size=4),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=examples(8), deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=STEPS)
def test_value_changes_match_the_model(spark, tmp_path_factory, steps):
    root = str(tmp_path_factory.mktemp("hash") / "ds")
    ds = RevisionedDataset(root, spark, id_columns=["id"])
    model = Model()
    for n, (is_major, days, skip, rows) in enumerate(steps):
        stamp = day(days)
        if is_major:
            rows = {k: v for k, v in rows.items() if v is not None}
        if not is_major and not any(r.is_major for r in model.revisions):
            continue
        wanted = {(k,): None if v is None else {"v": v} for k, v in rows.items()}
        if skip and not is_major:
            wanted = unchanged_skipped(model, "t", stamp, wanted)
        data = [(k, v, v is None) for k, v in rows.items()]
        df = frame(spark, data, "id long, v long, _deleted boolean")
        carriers = (
            [r for r in ds.revisions("t") if r.is_major and r.tables["t"].carries]
            if model.revisions
            else []
        )
        voided = [
            r
            for r in carriers
            if r.timestamp > stamp
            and any(
                c.timestamp <= stamp
                for c in ds.revisions("t")
                if c.sequence in r.tables["t"].carries
            )
        ]
        if is_major and voided:  # a major may not void what a later-stamped major carries
            with pytest.raises(CarriedStateError):
                ds.commit({"t": df}, stamp, is_major, skip_unchanged=skip)
            continue
        record = ds.commit({"t": df}, stamp, is_major, skip_unchanged=skip)
        expected = model.commit(f"r{n}", stamp, is_major, {"t": wanted})
        assert (record is None) == (expected is None), f"step {n}: committed"
    if not model.revisions:
        return
    for since in range(model.head + 1):
        try:
            want = model.changes_since_sequence("t", since)
        except ModelNoMajorError:
            continue
        try:
            before = model.state("t", at=since) if since else None
        except ModelNoMajorError:
            before = None
        expected = value_changes(model, "t", want, before)
        cs = ds.changes("t", since_sequence=since, only_changed=True)
        got_df = cs.changed if cs.is_reset else cs.df
        got = {
            (r["id"],): None if r["_deleted"] else {"v": r["v"]}
            for r in got_df.select("id", "v", "_deleted").collect()
        }
        assert cs.is_reset == want.is_reset
        assert got == expected, f"changes since {since}"
