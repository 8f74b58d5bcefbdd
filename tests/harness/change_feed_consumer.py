"""A consumer of a table's change feed, for the exactly-once test (tests/spark_source/
test_exactly_once.py): ``python change_feed_consumer.py ROOT CHECKPOINT OUT MARKER KILL``.

Each line on stdin runs the feed of table ``t`` once with ``trigger(availableNow=True)``
(at most 5 revisions a micro-batch) through Spark's checkpoint, into an idempotent sink:
one Parquet file per batch id, replaced whole on a retry; then prints ``done``. ``KILL``
stops it mid-batch, at ``torn:<batch id>`` (after writing half the batch's file, as a crash
mid-write leaves it) or ``written:<batch id>`` (the file written, Spark's commit of the batch
not yet): it drops the marker and waits to be killed with its whole process group.

Its Spark session is the product's (``build_spark_session``) and nobody registers the
format in it: Spark finds it on its own (``pyspark_revisions``), as in ``spark-sql``. The
test runs it without ``PYSPARK_PYTHON`` and with no virtualenv on its ``PATH``, so Spark's
Python processes get this interpreter from the session alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq

from harness.kill_points import stop_here
from harness.sessions import PROCESS_CONF
from revisions_assets.core.spark_session import build_spark_session

#: at most this many revisions of the table a micro-batch
PER_TRIGGER = "5"


def main(root: str, checkpoint: str, out: str, marker: Path, kill: str) -> None:
    spark = build_spark_session(master="local[1]", app_name="feed-consumer", conf=PROCESS_CONF)
    mode, _, at = kill.partition(":")

    def sink(df, batch_id: int) -> None:
        rows = df.toArrow()
        target = Path(out) / f"batch-{batch_id:05d}.parquet"
        if mode == "torn" and batch_id == int(at):
            pq.write_table(rows.slice(0, rows.num_rows // 2), target)
            stop_here(marker, kill)
        partial = target.with_suffix(".partial")
        pq.write_table(rows, partial)
        partial.replace(target)
        if mode == "written" and batch_id == int(at):
            stop_here(marker, kill)

    for _ in sys.stdin:
        feed = (
            spark.readStream.format("revisions")
            .option("table", "t")
            .option("changes", "true")
            .option("maxRevisionsPerTrigger", PER_TRIGGER)
            .load(root)
        )
        query = (
            feed.writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        print("done", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4], Path(sys.argv[4]), sys.argv[5])
