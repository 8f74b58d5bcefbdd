"""One racing writer of tests/s3/test_s3_concurrency.py (run as a separate process).

Commits ``commits`` revisions to an S3 root through ``RevisionedDataset.commit`` (Spark
writes the data through s3a; the engine appends the log entry put-if-absent and, on a lost
race, re-validates and retries). Its first commit is a major of its own table ``w<writer>``,
the rest minors. Each round's appends are lined up with the other writers'
(tests/harness/race_points.py), so they contend for one sequence. Prints one line per
commit, then the engine's count of lost races.

Usage: python commit_writer.py ROOT ENDPOINT WRITER COMMITS WRITERS WORK
(credentials come from the standard AWS environment variables).
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness.frames import frame
from harness.race_points import align_appends, count_lost_races
from harness.s3_writer_spark import writer_spark

from revisions_assets import RevisionedDataset


def main(root: str, endpoint: str, writer: int, commits: int, writers: int, work: Path) -> None:
    spark = writer_spark(endpoint, f"s3-writer-{writer}")
    ds = RevisionedDataset(
        root, spark=spark, id_columns=["id"], storage_options={"endpoint_url": endpoint}
    )
    frames = [
        frame(spark, [(i, 100 * writer + i), (i + 1, 100 * writer + i)], "id long, v long")
        for i in range(commits)
    ]
    lost = count_lost_races()
    align_appends(work, writer, writers)
    (work / f"ready-{writer}").touch()
    while not (work / "go").exists():
        time.sleep(0.005)
    for i, df in enumerate(frames):
        rev = ds.commit(
            {f"w{writer}": df},
            timestamp=datetime(2020, 1, 1, tzinfo=UTC) + timedelta(days=i % 3),
            is_major=i == 0,
            version="v1",
            name=f"w{writer}-{i:03d}",
            properties={"writer": str(writer), "i": str(i)},
        )
        print(f"commit {rev.sequence} {rev.name}", flush=True)
    print(f"lost_races {lost.count}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]),
        int(sys.argv[4]),
        int(sys.argv[5]),
        Path(sys.argv[6]),
    )
