"""``spark.readStream.format("revisions")``: a table's change feed as Structured Streaming
reads it, on a Spark session, through its checkpoint: the bootstrap, each revision's
changes, a major as a reset or as the query's end, ``maxRevisionsPerTrigger`` and
``trigger(availableNow=True)``. (How the feed moves through the log is tested without Spark
in test_source_planning.py; a query killed mid-batch in test_exactly_once.py.)
"""

from __future__ import annotations

import pytest
from harness.dates import day
from harness.frames import frame
from pyspark.errors import StreamingQueryException

from revisions_assets import RevisionedDataset
from revisions_assets.spark import register

SCHEMA = "id long, v long, _deleted boolean"


def commit(ds: RevisionedDataset, rows: list[tuple], when: float, major: bool, name: str):
    data = [(i, v, v is None) for i, v in rows]
    return ds.commit({"t": frame(ds.spark, data, SCHEMA)}, day(when), major, "v1", name=name)


class Sink:
    """A foreachBatch sink keeping each batch's rows by batch id (replaced on a retry)."""

    def __init__(self) -> None:
        self.batches: dict[int, list[dict]] = {}

    def __call__(self, df, batch_id: int) -> None:
        self.batches[batch_id] = [r.asDict() for r in df.collect()]


def run(ds: RevisionedDataset, checkpoint: str, sink: Sink, **options: str) -> None:
    """The feed of table ``t`` from where ``checkpoint`` left it, up to what is committed now."""
    reader = ds.spark.readStream.format("revisions").option("table", "t").option("changes", "true")
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (
        reader.load(ds.root)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def by_id(rows: list[dict]) -> dict:
    return {r["id"]: (r["v"], r["_deleted"], r["_revision"], r["_reset"]) for r in rows}


def changes(ds: RevisionedDataset, since: int, until: int) -> dict:
    cs = ds.changes("t", since_sequence=since, until_sequence=until, with_revision=True)
    return {r["id"]: (r["v"], r["_deleted"], r["_revision"], cs.is_reset) for r in cs.df.collect()}


def test_the_feed_bootstraps_then_follows_each_revision(spark, tmp_path):
    register(spark)
    ds = RevisionedDataset(str(tmp_path / "dataset"), spark=spark, id_columns=["id"])
    commit(ds, [(i, i) for i in range(6)], 1, True, "r1")
    commit(ds, [(4, 40), (5, None), (6, 60)], 2, False, "r2")
    sink, checkpoint = Sink(), str(tmp_path / "checkpoint")
    run(ds, checkpoint, sink, maxRevisionsPerTrigger="1")
    # the bootstrap: the state at the head, one batch, every row a reset
    assert list(sink.batches) == [0]
    assert by_id(sink.batches[0]) == changes(ds, 0, 2)
    assert {r["_reset"] for r in sink.batches[0]} == {True}

    commit(ds, [(1, 10), (2, None)], 3, False, "r3")
    ds.maintenance.compact("t")  # no data change: no batch
    commit(ds, [(7, 7), (8, 8)], 4, False, "r4")
    commit(ds, [(0, 100), (9, 9)], 5, True, "r5")  # a major: a reset
    run(ds, checkpoint, sink, maxRevisionsPerTrigger="1")
    # one revision a batch from where the checkpoint left off; the compaction made none
    sequences = {r.name: r.sequence for r in ds.revisions()}
    assert list(sink.batches) == [0, 1, 2, 3]
    assert by_id(sink.batches[1]) == changes(ds, 2, sequences["r3"])
    assert by_id(sink.batches[2]) == changes(ds, sequences["r3"], sequences["r4"])
    assert by_id(sink.batches[3]) == changes(ds, sequences["r4"], sequences["r5"])
    assert {r["_reset"] for r in sink.batches[3]} == {True}
    assert {r["_deleted"] for r in sink.batches[1]} == {False, True}

    # nothing new: an available-now run makes no batch
    run(ds, checkpoint, sink)
    assert list(sink.batches) == [0, 1, 2, 3]


def test_a_major_stops_a_feed_told_to_fail(spark, tmp_path):
    register(spark)
    ds = RevisionedDataset(str(tmp_path / "dataset"), spark=spark, id_columns=["id"])
    commit(ds, [(1, 1)], 1, True, "r1")
    commit(ds, [(1, 2)], 2, False, "r2")
    commit(ds, [(1, 3)], 3, True, "r3")
    sink = Sink()
    with pytest.raises(StreamingQueryException, match="major 'r3' \\(sequence 3\\).*onMajor=fail"):
        run(ds, str(tmp_path / "checkpoint"), sink, startingPosition="r1", onMajor="fail")
    assert by_id(sink.batches[0]) == changes(ds, 1, 2)  # the minor before it was delivered
