"""A revisioned dataset as a Spark data source: SQL over a view, then a change feed into
Parquet with Structured Streaming (docs/guides/spark-sql.md, docs/guides/change-feed.md).

Run it with ``./dev.sh python examples/spark_source.py`` or, inside the venv,
``python examples/spark_source.py [ROOT]``.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from revisions_assets import RevisionedDataset, build_spark_session
from revisions_assets.spark import register


def day(d: int) -> datetime:
    return datetime(2020, 1, d, tzinfo=timezone.utc)


def main(root: str) -> None:
    spark = build_spark_session(conf={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    features_root = f"{root}/features"
    ds = RevisionedDataset(features_root, spark=spark, id_columns=["id"])

    def rows(lo: int, hi: int, d: int):
        return spark.range(lo, hi + 1).selectExpr("id", f"{d} AS day", f"id * {d} AS score")

    ds.commit({"features": rows(0, 9, 1)}, timestamp=day(1), is_major=True, version="v1")
    ds.commit({"features": rows(5, 12, 2)}, timestamp=day(2), is_major=False, version="v1")

    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW features USING revisions "
        f"OPTIONS (path '{features_root}', table 'features', with_revision 'true')"
    )
    print("SQL over the latest state:")
    spark.sql("SELECT id, day, score, _revision FROM features WHERE id >= 8 ORDER BY id").show()
    print("The same table as of 2020-01-01, through the DataFrame reader:")
    reader = spark.read.format("revisions").option("table", "features")
    reader.option("as_of", "2020-01-01T12:00:00Z").load(features_root).orderBy("id").show(3)

    exports, checkpoint = f"{root}/exports/features", f"{root}/checkpoints/features"

    def follow() -> None:
        """Deliver what was committed since the last run into the Parquet sink, then stop."""
        feed = (
            spark.readStream.format("revisions")
            .option("table", "features")
            .option("changes", "true")
            .load(features_root)
        )
        query = (
            feed.writeStream.format("parquet")
            .option("path", exports)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    follow()  # the bootstrap: the state, every row with _reset true
    deleted = spark.createDataFrame([(0, True)], "id long, _deleted boolean")
    ds.commit({"features": deleted}, timestamp=day(3), is_major=False, version="v1")
    ds.commit({"features": rows(20, 21, 4)}, timestamp=day(4), is_major=False, version="v1")
    follow()  # the two revisions since: a deletion, two new entities
    print("The change feed in Parquet (one row per entity and batch):")
    delivered = spark.read.parquet(exports)
    delivered.orderBy("_revision_sequence", "id").select(
        "id", "score", "_deleted", "_reset", "_revision_sequence"
    ).show(30)
    assert delivered.where("NOT _reset").count() == 3  # id 0 deleted, ids 20 and 21 new
    print(f"Dataset root: {ds.root}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(tempfile.mkdtemp()) / "demo"))
