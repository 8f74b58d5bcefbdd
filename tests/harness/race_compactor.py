"""A compactor racing the writers (tests/core/test_concurrency.py): compacts ``t`` over and over.

``python race_compactor.py ROOT WORK ME TARGET DATA``: after the start line it compacts
until TARGET compactions landed, or until the log holds DATA data revisions (the writers
are done) and nothing is left to compact; prints ``sequence name`` per compaction and
finally ``lost_races N``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from harness.race_points import count_lost_races
from harness.sessions import PROCESS_CONF
from revisions_assets import RevisionedDataset
from revisions_assets.core.spark_session import build_spark_session

root, work, me = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
target, data = int(sys.argv[4]), int(sys.argv[5])
spark = build_spark_session(
    master="local[1]",
    app_name="compactor",
    conf=PROCESS_CONF,
)
ds = RevisionedDataset(root, spark=spark, compact_after=None)
ds.read("t").count()  # warm up
lost = count_lost_races()
(work / f"ready-{me}").touch()
while not (work / "go").exists():
    time.sleep(0.01)
done = 0
while done < target:
    rev = ds.maintenance.compact("t")
    if rev is not None:
        done += 1
        print(rev.sequence, rev.name, flush=True)
    elif sum(r.is_data for r in ds.revisions()) == data:
        break  # the writers are done and so is the compaction
    else:
        time.sleep(0.1)
print("lost_races", lost.count, flush=True)
spark.stop()
