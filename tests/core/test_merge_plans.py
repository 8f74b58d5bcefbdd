"""Every merge plan gives the state of the reference model (tests/core/model.py); ``auto``
picks by the sizes in the log."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest
from pyspark.sql import functions as F

from revisions_assets import RevisionedDataset
from revisions_assets.core.read.execute import spark_scan as merge
from revisions_assets.core.read.execute.spark import merge_kind
from revisions_assets.core.read.plan.scans import plan_merge, scan_task
from revisions_assets.core.read.plan.schema import table_schema
from revisions_assets.core.read.plan.selection import state_selection

from .helpers import frame
from .model import Model

START = datetime(2021, 3, 1, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    """A major and eight minors with overlapping ids, tombstones and out-of-order timestamps,
    committed to the engine and to the model alike."""
    root = str(tmp_path_factory.mktemp("plans") / "ds")
    ds = RevisionedDataset(root, spark=spark, id_columns=["k1", "k2"])
    model = Model()
    rng = random.Random(7)
    base = [(i % 7, i, float(i), False) for i in range(60)]
    schema = "k1 int, k2 int, value double, _deleted boolean"
    for n in range(9):
        if n == 0:
            rows, when = base, START
        else:
            ids = rng.sample(range(80), 12)
            rows = [(i % 7, i, float(100 * n + i), rng.random() < 0.25) for i in ids]
            when = START + timedelta(days=rng.choice([1, 2, 2, 3, 5]))
        name, is_major = f"m{n}", n == 0
        ds.commit(
            {"t": frame(spark, rows, schema)},
            timestamp=when,
            is_major=is_major,
            name=name,
        )
        written = {(k1, k2): None if gone else {"value": v} for k1, k2, v, gone in rows}
        model.commit(name, when, is_major, {"t": written})
    return root, model


def state(spark, root, strategy, **read):
    ds = RevisionedDataset(root, spark=spark, merge_strategy=strategy)
    return sorted(tuple(r) for r in ds.read("t", **read).collect())


@pytest.mark.parametrize("read", [{}, {"at": 5}, {"as_of": START + timedelta(days=2)}])
@pytest.mark.parametrize("strategy", ["window", "broadcast", "auto"])
def test_every_plan_gives_the_model_state(spark, history, read, strategy):
    root, model = history
    want = sorted(k + (row["value"],) for k, (row, _rev) in model.state("t", **read).rows.items())
    assert want  # the comparison is not vacuous
    assert state(spark, root, strategy, **read) == want


@pytest.mark.parametrize("strategy", ["window", "broadcast"])
def test_rows_find_their_revision_by_every_lookup(spark, history, strategy):
    """Above ``MAP_MAX_KEYS`` files a row's revision comes from a broadcast join instead of
    a map literal; a file whose URI Spark spells otherwise than predicted is found by its
    ``<revision>/<table>/<file>`` key: same states, same revision of each row."""
    root, model = history
    want = sorted(
        k + (row["value"], rev.name) for k, (row, rev) in model.state("t", at=6).rows.items()
    )

    def read() -> list[tuple]:
        df = RevisionedDataset(root, spark=spark, merge_strategy=strategy).read(
            "t", at=6, with_revision=True
        )
        return sorted(tuple(r) for r in df.select("k1", "k2", "value", "_revision").collect())

    for max_keys, spelled in [(None, None), (0, None), (None, "x:"), (0, "x:")]:
        with pytest.MonkeyPatch.context() as patch:
            if max_keys is not None:
                patch.setattr(merge, "MAP_MAX_KEYS", max_keys)
            if spelled is not None:
                patch.setattr(merge, "_reported_uri", lambda uri, s=spelled: s + uri)
            assert read() == want, (max_keys, spelled)


def test_spark_reports_a_file_as_predicted(spark, history):
    """The cheap lookup (no per-row string cutting) hits only when Spark reports a file's
    URI as ``_reported_uri`` predicts."""
    root, _model = history
    ds = RevisionedDataset(root, spark=spark)
    uri = ds.storage.spark_uri(ds.revisions("t")[0].tables["t"].files[0])
    reported = spark.read.parquet(uri).select("_metadata.file_path").first()[0]
    assert reported == merge._reported_uri(uri)


def test_a_major_that_changes_a_type_reads_with_older_revisions(spark, tmp_path):
    """Files of another column type are read in a relation of their own (a change read and
    the rows of every revision across a major that turned ``v`` from int into string)."""
    ds = RevisionedDataset(str(tmp_path / "ds"), spark=spark, id_columns=["id"])
    ds.commit({"t": frame(spark, [(1, 1)], "id long, v int")}, START, is_major=True)
    ds.commit({"t": frame(spark, [(1, "a")], "id long, v string")}, START, True)
    changes = ds.changes("t", since_sequence=0)
    assert changes.is_reset
    assert [tuple(r) for r in changes.df.select("id", "v").collect()] == [(1, "a")]
    revisions = ds.revisions("t")  # one per type
    tasks = [scan_task(r, "t", n) for n, r in enumerate(revisions)]
    rows = merge.revision_rows(spark, ds.storage, table_schema(revisions, "t"), tasks)
    assert sorted(tuple(r) for r in rows.select("id", merge.ORDER).collect()) == [(1, 0), (1, 1)]


@pytest.mark.parametrize("strategy", ["window", "broadcast"])
def test_change_reads_give_the_model_changes(spark, history, strategy):
    root, model = history
    expected = model.changes_since_sequence("t", 4)
    want = sorted(
        k + ((None, True) if row is None else (row["value"], False))
        for k, (row, _rev) in expected.rows.items()
    )
    changes = RevisionedDataset(root, spark=spark, merge_strategy=strategy).changes(
        "t", since_sequence=4
    )
    got = sorted(
        (r["k1"], r["k2"], None if r["_deleted"] else r["value"], r["_deleted"])
        for r in changes.df.collect()
    )
    assert changes.is_reset is expected.is_reset is False
    assert want and any(gone for *_, gone in want)  # rows and deletions in the window
    assert got == want


@pytest.mark.parametrize("strategy", ["window", "broadcast"])
def test_an_id_filter_reaches_every_parquet_scan(spark, history, strategy):
    """A filter on the ids of a read is pushed into every Parquet scan of the merge (the
    base, the newer revisions, the ids a broadcast anti-join is built on), where Parquet
    skips the row groups whose min/max ids exclude it; the state is the model's."""
    root, model = history
    df = RevisionedDataset(root, spark=spark, merge_strategy=strategy).read("t")
    picked = df.where((F.col("k1") == 3) & F.col("k2").isin(3, 10, 17, 24, 31))
    plan = picked._jdf.queryExecution().executedPlan().toString()
    scans = [line for line in plan.splitlines() if "FileScan parquet" in line]
    assert scans and all("PushedFilters: [" in s and "EqualTo(k1,3)" in s for s in scans), plan
    want = sorted(
        k + (row["value"],)
        for k, (row, _) in model.state("t").rows.items()
        if k[0] == 3 and k[1] in (3, 10, 17, 24, 31)
    )
    assert want and sorted(tuple(r) for r in picked.collect()) == want


def test_auto_uses_the_logged_row_counts(spark, history):
    ds = RevisionedDataset(history[0], spark=spark)
    view = ds.snapshot().view
    revisions = view.table_revisions("t")

    def kind(count: int) -> str:
        pinned = state_selection(revisions, "t", max_sequence=revisions[count - 1].sequence)
        return merge_kind(plan_merge(view, pinned, "a read"), "auto")

    assert kind(1) == "single"  # one revision: plain read
    assert kind(len(revisions)) == "window"  # 96 newer rows > 60 base rows
    assert kind(3) == "broadcast"  # 24 newer rows


def test_a_root_whose_name_needs_quoting(spark, tmp_path):
    """Spark reads, rewrites and purges a dataset under a folder with a space, a comma and a
    percent sign (Hadoop quotes a path itself: handed the escapes of ``Path.as_uri()``, it
    quoted them again and found nothing), and the cheap revision lookup hits."""
    ds = RevisionedDataset(str(tmp_path / "my data, 100%" / "ds"), spark=spark, id_columns=["id"])
    rows = "id long, v string"
    ds.commit({"t": frame(spark, [(1, "a"), (2, "b"), (3, "c")], rows)}, START, True)
    for day, (i, v) in enumerate([(2, "B"), (4, "d")], start=1):
        ds.commit({"t": frame(spark, [(i, v)], rows)}, START + timedelta(days=day), False)
    uris = [ds.storage.spark_uri(f) for r in ds.revisions("t") for f in r.tables["t"].files]
    reported = spark.read.parquet(*uris).select("_metadata.file_path").distinct()
    assert {r[0] for r in reported.collect()} <= {merge._reported_uri(u) for u in uris}

    def state() -> list[tuple]:
        return sorted(tuple(r) for r in ds.read("t").select("id", "v").collect())

    want = [(1, "a"), (2, "B"), (3, "c"), (4, "d")]
    assert state() == want
    assert sorted(r.id for r in ds.changes("t", since_sequence=1).df.collect()) == [2, 4]
    assert ds.maintenance.compact("t") is not None and state() == want
    ds.maintenance.purge("t", frame(spark, [(3,)], "id long"), reason="test")
    assert state() == [(1, "a"), (2, "B"), (4, "d")]
