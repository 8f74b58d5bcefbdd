"""Every bad input of docs/guides/engine.md: its error class, a message naming the
table/column/value, and a
dataset left exactly as it was (log, description, reads, and the files those reads touch)."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest
from harness.dates import day

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import (
    DuplicateIdError,
    DuplicateRevisionNameError,
    IdColumnsError,
    InvalidNameError,
    NaiveTimestampError,
    NoMajorRevisionError,
    NullIdError,
    RevisionsError,
    SchemaMismatchError,
    UnknownTableError,
)
from revisions_assets.core.write import transaction

from .helpers import frame, input_files, top_dirs, tree

TABLE = "features_x"
SCHEMA = "entity_id long, score double, label string"
NAIVE = datetime(2020, 1, 3, 4, 5, 6)


def rows(spark, *entries, schema=SCHEMA):
    return frame(spark, entries, schema)


@pytest.fixture(scope="module")
def ds(spark, tmp_path_factory):
    """A declared table with one major and one minor; failed commits must not change it."""
    root = str(tmp_path_factory.mktemp("validation") / "dataset")
    dataset = RevisionedDataset(root, spark=spark, id_columns={TABLE: ["entity_id"]})
    dataset.commit(
        {TABLE: rows(spark, (1, 0.5, "a"), (2, 1.5, "b"))},
        timestamp=day(0),
        is_major=True,
        version="v1",
        name="first",
    )
    dataset.commit(
        {TABLE: rows(spark, (2, 2.5, "c"))}, timestamp=day(1), is_major=False, name="second"
    )
    return dataset


def snapshot(ds):
    """Everything a failed commit must leave alone, as plain values."""
    df = ds.read(TABLE, with_revision=True)
    return {
        "log": ds.inspect.log().drop(columns=["tables"]).to_dict("list"),
        "log_files": tree(ds.root, "_log"),
        "description": (Path(ds.root) / "description.parquet").read_bytes(),
        "state": sorted(map(tuple, df.collect())),
        "files_read": input_files(df, ds.root),
    }


@pytest.fixture
def unchanged(ds, spark):
    """Asserts after the test that neither this handle nor a fresh one sees any change."""
    before = snapshot(ds)
    yield
    assert snapshot(ds) == before
    fresh = RevisionedDataset(ds.root, spark=spark, id_columns={TABLE: ["entity_id"]})
    assert snapshot(fresh) == before
    assert top_dirs(before["files_read"]) <= {"first", "second"}


def commit(ds, tables, is_major=False, timestamp=None, **kw):
    return ds.commit(tables, timestamp=timestamp or day(2), is_major=is_major, **kw)


def test_null_ids(ds, spark, unchanged):
    with pytest.raises(NullIdError, match=rf"{TABLE}.*entity_id"):
        commit(ds, {TABLE: rows(spark, (3, 1.0, "x"), (None, 2.0, "y"))})


def test_null_in_one_of_composite_ids(spark, root):
    pair = RevisionedDataset(root, spark=spark, id_columns={"pairs": ["k1", "k2"]})
    with pytest.raises(NullIdError, match=r"pairs.*k2"):
        pair.commit(
            {"pairs": frame(spark, [(1, "a", 0), (1, None, 0)], "k1 long, k2 string, v int")},
            timestamp=day(0),
            is_major=True,
        )
    assert pair.head_sequence == 0


@pytest.mark.parametrize("check", ["one task", "shuffled", "a major's write"])
def test_duplicate_ids(ds, spark, unchanged, check, monkeypatch):
    if check == "shuffled":  # the plan of writes over ONE_TASK_CHECK_MAX_ROWS rows
        monkeypatch.setattr(transaction, "ONE_TASK_CHECK_MAX_ROWS", 0)
    data = rows(spark, (4242, 1.0, "x"), (7, 1.0, "x"), (4242, 2.0, "y"))
    with pytest.raises(DuplicateIdError, match=rf"{TABLE}.*4242.*2 times"):
        # a major's clustered write counts the rows of each id itself
        commit(ds, {TABLE: data}, is_major=check == "a major's write")


def test_duplicate_id_between_a_row_and_a_tombstone(ds, spark, unchanged):
    schema = SCHEMA + ", _deleted boolean"
    with pytest.raises(DuplicateIdError, match=rf"{TABLE}.*4243"):
        commit(
            ds,
            {TABLE: rows(spark, (4243, 1.0, "x", False), (4243, None, None, True), schema=schema)},
        )


def test_minor_dropping_a_column(ds, spark, unchanged):
    with pytest.raises(SchemaMismatchError, match=rf"{TABLE}.*label|label.*{TABLE}"):
        commit(ds, {TABLE: rows(spark, (3, 1.0), schema="entity_id long, score double")})


def test_minor_dropping_a_column_on_rows_that_are_not_tombstones(ds, spark, unchanged):
    schema = "entity_id long, score double, _deleted boolean"
    with pytest.raises(SchemaMismatchError, match=rf"{TABLE}.*label|label.*{TABLE}"):
        commit(ds, {TABLE: rows(spark, (1, None, True), (3, 1.0, False), schema=schema)})


def test_minor_changing_a_type(ds, spark, unchanged):
    with pytest.raises(SchemaMismatchError, match=rf"{TABLE}.*score|score.*{TABLE}"):
        commit(
            ds,
            {
                TABLE: rows(
                    spark, (3, "high", "x"), schema="entity_id long, score string, label string"
                )
            },
        )


def test_minor_with_a_new_nullable_column_is_allowed(spark, root):
    fresh = RevisionedDataset(root, spark=spark, id_columns=["entity_id"])
    fresh.commit({TABLE: rows(spark, (1, 0.5, "a"))}, timestamp=day(0), is_major=True)
    rev = fresh.commit(
        {TABLE: rows(spark, (1, 0.7, "a", 3), schema=SCHEMA + ", extra int")},
        timestamp=day(1),
        is_major=False,
    )
    assert rev is not None and rev.sequence == 2
    assert fresh.read(TABLE).columns == ["entity_id", "score", "label", "extra"]


def test_unknown_table(ds, spark, unchanged):
    with pytest.raises(UnknownTableError, match="scores_y"):
        commit(ds, {"scores_y": rows(spark, (1, 1.0, "x"))})
    with pytest.raises(UnknownTableError, match="scores_y"):
        commit(ds, {TABLE: rows(spark, (1, 1.0, "x")), "scores_y": rows(spark, (1, 1.0, "x"))})


def test_reading_a_table_that_does_not_exist(ds, unchanged):
    # README: UnknownTableError is "a table the dataset lacks"
    with pytest.raises(UnknownTableError, match="scores_y"):
        ds.read("scores_y")
    with pytest.raises(UnknownTableError, match="scores_y"):
        ds.changes("scores_y", since=day(0))


def test_id_columns_missing_from_the_data(ds, spark, unchanged):
    with pytest.raises(IdColumnsError, match=rf"{TABLE}.*entity_id"):
        commit(
            ds,
            {TABLE: rows(spark, (1, 1.0, "x"), schema="other_id long, score double, label string")},
        )


def test_table_names_that_could_escape_the_root(spark, root):
    open_ds = RevisionedDataset(root, spark=spark, id_columns=["entity_id"])
    for bad in ("..", "../escape", "a/b", "/abs", "x/../y", "a..b"):
        with pytest.raises(InvalidNameError, match=rf"table.*{re.escape(bad)}"):
            open_ds.commit({bad: rows(spark, (1, 1.0, "x"))}, timestamp=day(0), is_major=True)
    assert open_ds.head_sequence == 0 and tree(root) == []


def test_revision_names_that_are_invalid(ds, spark, unchanged):
    for bad in ("..", ".", "../escape", "a/b", "/abs", "_log", "bad name", "x/../y"):
        with pytest.raises(InvalidNameError, match=re.escape(bad)):
            commit(ds, {TABLE: rows(spark, (1, 1.0, "x"))}, name=bad)
    with pytest.raises(InvalidNameError, match="revision name"):
        commit(ds, {TABLE: rows(spark, (1, 1.0, "x"))}, name="")


def test_duplicate_custom_revision_name(ds, spark, unchanged):
    with pytest.raises(DuplicateRevisionNameError, match="second"):
        commit(ds, {TABLE: rows(spark, (9, 1.0, "x"))}, name="second")


def test_naive_timestamps(ds, spark, unchanged):
    with pytest.raises(NaiveTimestampError, match="2020-01-03"):
        commit(ds, {TABLE: rows(spark, (9, 1.0, "x"))}, timestamp=NAIVE)
    with pytest.raises(NaiveTimestampError, match="2020-01-03"):
        ds.read(TABLE, as_of=NAIVE)
    with pytest.raises(NaiveTimestampError, match="2020-01-03"):
        ds.changes(TABLE, since=NAIVE)
    with pytest.raises(NaiveTimestampError, match="2020-01-03"):
        ds.changes(TABLE, since=day(0), until=NAIVE)
    with pytest.raises(NaiveTimestampError, match="2020-01-03"):
        ds.read(TABLE, as_of="2020-01-03T04:05:06")


def test_minor_without_any_major(spark, root):
    empty = RevisionedDataset(root, spark=spark, id_columns=["entity_id"])
    with pytest.raises(NoMajorRevisionError, match=TABLE):
        empty.commit({TABLE: rows(spark, (1, 1.0, "x"))}, timestamp=day(0), is_major=False)
    assert empty.head_sequence == 0
    # per table: a major of another table does not allow a minor of this one
    empty.commit({"other": rows(spark, (1, 1.0, "x"))}, timestamp=day(0), is_major=True)
    with pytest.raises(NoMajorRevisionError, match=TABLE):
        empty.commit({TABLE: rows(spark, (1, 1.0, "x"))}, timestamp=day(1), is_major=False)
    assert empty.head_sequence == 1
    assert top_dirs(tree(root)) <= {"_log", "description.parquet", empty.revision(1).name}


def test_read_before_the_first_major(ds, unchanged):
    with pytest.raises(NoMajorRevisionError, match=TABLE):
        ds.read(TABLE, as_of=day(-1))
    with pytest.raises(NoMajorRevisionError, match=TABLE):
        ds.changes(TABLE, since=day(-3), until=day(-1))


def test_empty_output_commits_nothing(ds, spark, unchanged):
    assert commit(ds, {TABLE: rows(spark)}) is None
    assert commit(ds, {TABLE: rows(spark)}, is_major=True) is None
    assert commit(ds, {TABLE: rows(spark)}, name="empty_named") is None
    assert "empty_named" not in set(ds.inspect.log()["name"])


def test_failed_commit_raises_under_the_common_root(ds, spark, unchanged):
    with pytest.raises(RevisionsError):
        commit(ds, {TABLE: rows(spark, (None, 1.0, "x"))})
