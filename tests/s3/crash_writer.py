"""A writer that commits to an S3 root and stops at a chosen point of the commit, to be killed.

Run as a separate process by tests/s3/test_s3_crash.py: on reaching the kill point it
writes MARKER and blocks; the test then SIGKILLs its process group (driver, JVM, workers).

Usage: python crash_writer.py ROOT ENDPOINT MARKER MODE
MODE: before_log_entry (data on S3, no log entry) | before_description (entry created,
description.parquet not yet rewritten). Credentials come from the AWS environment variables.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from harness.frames import frame
from harness.kill_points import stop_at
from harness.s3_writer_spark import writer_spark

from revisions_assets import RevisionedDataset
from revisions_assets.core.storage.s3 import S3Storage

CRASHED = "crashed"


def main(root: str, endpoint: str, marker: Path, mode: str) -> None:
    spark = writer_spark(endpoint, f"s3-crash-{mode}")
    ds = RevisionedDataset(root, spark=spark, storage_options={"endpoint_url": endpoint})
    if mode == "before_log_entry":
        hit = lambda self, rel, data: rel.startswith("_log/")  # noqa: E731
        stop_at(S3Storage, "create_exclusive", hit, marker, mode)
    elif mode == "before_description":
        hit = lambda self, rel, data: rel == "description.parquet"  # noqa: E731
        stop_at(S3Storage, "write", hit, marker, mode)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    df = frame(spark, [(i, 100) for i in range(4)], "id long, v long")
    ds.commit({"t": df}, timestamp=datetime(2020, 1, 4, tzinfo=UTC), is_major=False, name=CRASHED)
    print("commit returned: the kill point was never reached", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4])
