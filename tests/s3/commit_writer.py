"""One racing writer of tests/s3/test_s3_concurrency.py (run as a separate process).

Commits ``commits`` revisions through the log layer (RevisionLog + Revision records) to
an S3 root: refresh, take ``head + 1``, conditional create; on a lost race, refresh and
retry at the new head. Prints one line per commit and the number of lost races.

Usage: python log_writer.py ROOT ENDPOINT WRITER COMMITS GO_FILE
(credentials come from the standard AWS environment variables).
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from revisions_assets.core.log import RevisionLog
from revisions_assets.core.records import Revision, TableWrite
from revisions_assets.core.s3 import S3Storage


def revision(writer: int, i: int, sequence: int) -> Revision:
    name = f"w{writer}-{i:03d}"
    return Revision(
        name=name,
        timestamp=datetime(2020, 1, 1, tzinfo=UTC) + timedelta(days=i % 3),
        is_major=i == 0,
        sequence=sequence,
        committed_at=datetime.now(UTC),
        tables={
            f"w{writer}": TableWrite(
                ("id",), '{"fields":[],"type":"struct"}', "v1", 2, 0, (f"{name}/t/p.parquet",), 1
            )
        },
        version="v1",
        properties={"writer": str(writer), "i": str(i)},
    )


def main(root: str, endpoint: str, writer: int, commits: int, go: Path) -> None:
    storage = S3Storage(root, endpoint_url=endpoint)
    log = RevisionLog(storage)
    go.with_name(f"ready-{writer}").touch()
    while not go.exists():
        time.sleep(0.005)
    lost_races = 0
    for i in range(commits):
        while True:
            log.refresh()
            record = revision(writer, i, log.head + 1)
            if log.try_append(record):
                break
            lost_races += 1
        log.after_commit()  # checkpoint when due, description.parquet rewrite
        print(f"commit {record.sequence} {record.name}", flush=True)
    print(f"lost_races {lost_races} retries {storage.retries}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5]))
