"""A writer that commits revision ``crashed`` and stops at one step of the commit, to be killed.

Run by tests/core/test_crash.py: ``python crash_commit.py ROOT MARKER MODE``. On reaching
MODE's step it writes MARKER and blocks; the test SIGKILLs its process group.

MODE: ``spark_write`` (inside the write job, once Spark created the revision's folder),
``before_log_entry``, ``inside_log_entry`` (the entry's temporary file written, not yet
linked), ``before_description``, ``inside_description`` (the new description written, not
yet renamed).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import functions as F

from harness.dates import day
from harness.frames import frame
from harness.kill_points import stop_at, stop_here
from harness.sessions import PROCESS_CONF
from revisions_assets import RevisionedDataset
from revisions_assets.core.spark_session import build_spark_session
from revisions_assets.core.storage import base as storage

root, marker, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]


def patch(owner, attr, hit):
    stop_at(owner, attr, hit, marker, mode)


def entry(path) -> bool:
    return "_log" in str(path) and str(path).endswith(".json")


spark = build_spark_session(
    master="local[1]",
    app_name=f"crash-{mode}",
    conf=PROCESS_CONF,
)
ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
if mode == "spark_write":
    revision_dir = os.path.join(root, "crashed")

    @F.udf("long")
    def value(part):  # runs inside the write job; blocks once Spark created the output dir
        if part == 1 and os.path.isdir(revision_dir):
            stop_here(marker, mode)
        return 100 + part

    df = spark.range(0, 4, 1, 2).select("id", value(F.spark_partition_id()).alias("v"))
else:
    df = frame(spark, [(i, 100) for i in range(4)], "id long, v long")
if mode == "before_log_entry":
    patch(storage.LocalStorage, "create_exclusive", lambda self, rel, data: entry(rel))
elif mode == "inside_log_entry":  # the entry's temporary file is written, not yet linked
    patch(storage.os, "link", lambda src, dst, *a, **k: entry(dst))
elif mode == "before_description":
    patch(storage.LocalStorage, "write", lambda self, rel, data: rel == "description.parquet")
elif mode == "inside_description":  # the new description is written, not yet renamed
    patch(storage.os, "replace", lambda src, dst, *a, **k: str(dst).endswith("description.parquet"))
ds.commit({"t": df}, timestamp=day(3), is_major=False, name="crashed")
print("commit returned: the kill point was never reached", flush=True)
