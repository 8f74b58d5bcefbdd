"""``spark.read.format("revisions")`` and SQL's ``USING revisions`` on a Spark session: the
rows, columns and types of the library's reads, its errors, filters on the ids pushed into
the source, a read split in parallel parts, a SQL view.

The same reads of the source's own code without Spark run on every case of the
read-semantics property tests (tests/core/test_properties.py, through helpers.py); here
Spark is in the loop: its Python processes, the Arrow transfer, SQL.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from harness.dates import day
from harness.frames import frame
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import RevisionsError
from revisions_assets.spark import register

#: every kind of column a table may have, with a tombstone flag
RICH = (
    "id long, name string, score double, born date, seen timestamp, tags array<string>, "
    "point struct<x:int,y:string>, amount decimal(10,2), _deleted boolean"
)
BIG_ROWS = 40_000


def rich_rows(ids: range, bump: int) -> list[tuple]:
    return [
        (
            i,
            f"n{i + bump}",
            i / 4 + bump,
            day(i % 30).date(),
            day(bump + i / 24),
            [f"t{i}", f"b{bump}"],
            (i, f"y{bump}"),
            Decimal(f"{i}.{bump % 100:02d}"),
            False,
        )
        for i in ids
    ]


@pytest.fixture(scope="module")
def ds(spark, tmp_path_factory) -> RevisionedDataset:
    """Table ``rich``: a major of ids 0-39 (two files), a minor rewriting 30-49 and
    deleting 0-4, a minor adding a column. Table ``big``: a major of 40,000 rows (files of
    several row groups) and two minors."""
    register(spark)
    root = str(tmp_path_factory.mktemp("source") / "dataset")
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    major = frame(spark, rich_rows(range(40), 0), RICH).repartition(2)
    ds.commit({"rich": major}, day(1), True, "v1", name="r1")
    tombstones = [(i, *[None] * 7, True) for i in range(5)]
    minor = frame(spark, rich_rows(range(30, 50), 1) + tombstones, RICH)
    ds.commit({"rich": minor}, day(2), False, "v1", name="r2")
    added = frame(
        spark,
        [(45, "x", 1.0, None, None, None, None, None, False, "new")],
        f"{RICH}, extra string",
    )
    ds.commit({"rich": added}, day(3), False, "v1", name="r3")
    big = spark.range(BIG_ROWS, numPartitions=2).select(
        "id", (F.col("id") % 97).alias("v"), F.lit(False).alias("_deleted")
    )
    ds.commit({"big": big}, day(1), True, "v1", name="b1")
    for n in (2, 3):
        update = big.where(F.col("id") % 50 == n).withColumn("v", F.col("v") + 1000 * n)
        ds.commit({"big": update}, day(n), False, "v1", name=f"b{n}")
    return ds


def load(ds: RevisionedDataset, **options: object) -> DataFrame:
    reader = ds.spark.read.format("revisions")
    for name, value in options.items():
        reader = reader.option(name, str(value).lower() if isinstance(value, bool) else value)
    return reader.load(ds.root)


def rows(df: DataFrame) -> list:
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.mark.parametrize(
    "options, call",
    [
        ({}, {}),
        ({"with_revision": True}, {"with_revision": True}),
        ({"as_of": day(1.5).isoformat()}, {"as_of": day(1.5)}),
        ({"at": "HEAD~1", "columns": "name, tags"}, {"at": "HEAD~1", "columns": ["name", "tags"]}),
    ],
)
def test_a_read_is_the_librarys_read(ds, options, call):
    source, engine = load(ds, table="rich", **options), ds.read("rich", **call)
    assert source.schema == engine.schema
    assert rows(source) == rows(engine)


def test_changes_and_history_are_the_librarys(ds):
    source = load(ds, table="rich", changes=True, since_sequence=1)
    cs = ds.changes("rich", since_sequence=1, with_revision=True)
    assert source.columns == [*cs.df.columns, "_reset"]
    assert rows(source) == rows(cs.df.withColumn("_reset", F.lit(False)))
    reset = load(ds, table="rich", changes=True, with_revision=False)
    assert rows(reset) == rows(ds.changes("rich").df.withColumn("_reset", F.lit(True)))
    history = load(ds, table="rich", history=True, columns="score")
    assert rows(history) == rows(ds.history("rich", columns=["score"]))


def fingerprint(df: DataFrame) -> tuple:
    """The rows of a large read as a count and a hash sum (one job)."""
    return tuple(df.agg(F.count(F.lit(1)), F.sum(F.hash(*df.columns))).first())


def test_a_read_splits_in_parallel_parts(ds):
    engine = fingerprint(ds.read("big"))
    # a merge of three revisions, cut in ranges of ids from the files' row groups
    parts = load(ds, table="big", partitions=3)
    assert parts.rdd.getNumPartitions() == 3
    assert fingerprint(parts) == engine
    # a major alone: by its files
    major = load(ds, table="big", at="b1", partitions=4)
    assert major.rdd.getNumPartitions() == len(ds.revision("b1").tables["big"].files)
    assert fingerprint(major) == fingerprint(ds.read("big", at="b1"))


def test_filters_on_the_ids_reach_the_source(ds):
    df = load(ds, table="big", partitions=3).where("id >= 39000 AND v > 10")
    plan = df._jdf.queryExecution().executedPlan().toString()
    # the source took the condition on the ids: Spark evaluates only the other one
    assert "(v#" in plan and "39000" not in plan, plan
    # and the parts whose ids it excludes are not read
    assert df.rdd.getNumPartitions() == 1
    assert rows(df) == rows(ds.read("big").where("id >= 39000 AND v > 10"))


def test_sql_reads_a_view_of_a_table(ds, spark):
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW rich_at_r2 USING revisions "
        f"OPTIONS (path '{ds.root}', table 'rich', at 'r2', with_revision 'true')"
    )
    got = spark.sql("SELECT id, name, _revision FROM rich_at_r2 WHERE id BETWEEN 28 AND 32")
    want = ds.read("rich", at="r2", with_revision=True).where("id BETWEEN 28 AND 32")
    assert rows(got) == rows(want.select("id", "name", "_revision"))


def test_a_view_reads_the_log_as_it_was_when_made(spark, tmp_path):
    root = str(tmp_path / "dataset")
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    schema = "id long, v long, _deleted boolean"
    ds.commit({"t": frame(spark, [(1, 1, False)], schema)}, day(1), True, "v1")
    view = f"CREATE OR REPLACE TEMPORARY VIEW t USING revisions OPTIONS (path '{root}', table 't')"
    spark.sql(view)
    ds.commit({"t": frame(spark, [(2, 2, False)], schema)}, day(2), False, "v1")
    assert spark.sql("SELECT count(*) FROM t").first()[0] == 1  # one snapshot
    spark.sql(view)
    assert spark.sql("SELECT count(*) FROM t").first()[0] == 2


def test_a_schema_given_chooses_columns(ds):
    df = ds.spark.read.format("revisions").schema("id long, name string").option("table", "rich")
    assert rows(df.load(ds.root)) == rows(ds.read("rich", columns=["name"]))


def test_errors_are_the_librarys(ds):
    """The library's error, class and message, inside Spark's exception (the source's errors
    against the library's, case by case: test_source_planning.py)."""
    with pytest.raises(RevisionsError) as python:
        ds.read("nope")
    with pytest.raises(AnalysisException) as spark:
        load(ds, table="nope")
    assert f"UnknownTableError: {python.value.args[0]}" in str(spark.value)
