"""A writer racing other processes (tests/core/test_concurrency.py): commits minors to ``t``.

``python race_writer.py ROOT WORK WRITER COMMITS WRITERS``: commit i writes ids i and i+1
with value 100 * WRITER + i, at colliding and out-of-order timestamps. It gets ready, waits
for the start line (harness.processes.race), lines each round's appends up with the other
writers (harness.race_points), prints ``sequence name`` per commit and finally
``lost_races N``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from harness.dates import day
from harness.frames import frame
from harness.race_points import align_appends, count_lost_races
from harness.sessions import PROCESS_CONF
from revisions_assets import RevisionedDataset
from revisions_assets.core.spark_session import build_spark_session

root, work, writer, commits = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
spark = build_spark_session(
    master="local[1]",
    app_name=f"writer-{writer}",
    conf=PROCESS_CONF,
)
ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
frames = [
    frame(spark, [(i, 100 * writer + i), (i + 1, 100 * writer + i)], "id long, v long")
    for i in range(commits)
]
lost = count_lost_races()
align_appends(work, writer, int(sys.argv[5]))  # each round's appends contend
(work / f"ready-{writer}").touch()
while not (work / "go").exists():
    time.sleep(0.01)
for i, df in enumerate(frames):
    rev = ds.commit(
        {"t": df},
        timestamp=day(1 + i % 3),
        is_major=False,
        version="v1",
        properties={"writer": str(writer), "i": str(i)},
    )
    print(rev.sequence, rev.name, flush=True)
print("lost_races", lost.count, flush=True)
spark.stop()
