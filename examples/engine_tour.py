"""A tour of the engine without Dagster: build a revisioned dataset, read it back in time.

Run it with ``./dev.sh python examples/engine_tour.py`` or, inside the venv,
``python examples/engine_tour.py [ROOT]``.
"""

from __future__ import annotations

import sys
import tempfile
from datetime import datetime, timedelta, timezone

from revisions_assets import RevisionedDataset, build_spark_session


def day(d: int) -> datetime:
    return datetime(2020, 1, d, tzinfo=timezone.utc)


def main(root: str) -> None:
    spark = build_spark_session(conf={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])

    def rows(lo: int, hi: int, d: int):
        return spark.range(lo, hi + 1).selectExpr("id", f"{d} AS day", f"id * {d} AS score")

    ds.commit({"features": rows(0, 4, 1)}, timestamp=day(1), is_major=True, version="v1")
    ds.commit({"features": rows(2, 6, 3)}, timestamp=day(3), is_major=False, version="v1")
    ds.commit({"features": rows(4, 8, 5)}, timestamp=day(5), is_major=True, version="v2")
    ds.commit({"features": rows(6, 10, 7)}, timestamp=day(7), is_major=False, version="v2")
    tombstone = spark.createDataFrame([(9, True)], "id long, _deleted boolean")
    ds.commit({"features": tombstone}, timestamp=day(8), is_major=False, version="v2")

    print("\nThe description log:")
    print(ds.inspect.log()[["sequence", "name", "timestamp", "is_major", "version", "rows"]])

    print("\nLatest state (r4 voided ids 0-3; id 9 deleted):")
    ds.read("features", with_revision=True).orderBy("id").show()
    print("As of 2020-01-04 (r0 + r2):")
    ds.read("features", as_of=day(4)).orderBy("id").show()
    print("Pinned at HEAD~2 (before the last minor and the deletion):")
    ds.read("features", at="HEAD~2").orderBy("id").show()

    changes = ds.changes("features", since=day(6))
    print(f"Changes after 2020-01-06 (reset={changes.is_reset}):")
    changes.df.orderBy("id").show()
    changes = ds.changes("features", since=day(2), until=day(6))
    print(f"Changes in (2020-01-02, 2020-01-06] (reset={changes.is_reset}: r4 is a major):")
    changes.df.orderBy("id").show()

    compaction = ds.maintenance.compact()  # the state in a few files; later reads start from it
    print(f"Compaction {compaction.name}: {compaction.replaces['features'].revisions} revisions")
    print("The same latest state, read from the compaction:")
    ds.read("features").orderBy("id").show()
    report = ds.maintenance.vacuum(retain=timedelta(0), dry_run=True)
    print(f"A vacuum would remove revisions {sorted(report.revisions)} ({report.bytes} bytes)")
    print(ds.inspect.log()[["sequence", "name", "kind", "vacuumed"]])
    print(f"Dataset root: {ds.root}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="revisions-tour-"))
