"""Crash safety (SPEC §4): a writer SIGKILLed at each point of a commit leaves a consistent dataset.

The kill points are deterministic (tests/harness/processes.py): the writer process patches
one step of its own commit so that, on reaching it, it drops a marker file and blocks; the
test waits for the marker and kills the writer's whole process group (Python driver, JVM,
Python workers) with SIGKILL. All writers start at once (one JVM each) against copies of
one prepared dataset.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
from harness.dates import day
from harness.processes import kill_at_markers, start_victim

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import DuplicateRevisionNameError

from .helpers import frame, input_files, top_dirs, tree

pytestmark = pytest.mark.slow  # writer processes with their own JVMs, SIGKILLed

CRASHED = "crashed"

# the commit's steps, in order; the first three die before the log entry exists
BEFORE_ENTRY = ("spark_write", "before_log_entry", "inside_log_entry")
AFTER_ENTRY = ("before_description", "inside_description")

WRITER = r"""
import os, sys
from datetime import datetime, timezone
from pathlib import Path
from pyspark.sql import functions as F
from harness.kill_points import stop_at, stop_here
from revisions_assets import RevisionedDataset
from revisions_assets.core.storage import base as storage
from revisions_assets.core.spark_session import build_spark_session

root, marker, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]

def patch(owner, attr, hit):
    stop_at(owner, attr, hit, marker, mode)

spark = build_spark_session(master="local[1]", app_name=f"crash-{mode}", conf={
    "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1", "spark.driver.memory": "512m"})
ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
entry = lambda path: "_log" in str(path) and str(path).endswith(".json")
if mode == "spark_write":
    revision_dir = os.path.join(root, "crashed")
    @F.udf("long")
    def value(part):  # runs inside the write job; blocks once Spark created the output dir
        if part == 1 and os.path.isdir(revision_dir):
            stop_here(marker, mode)
        return 100 + part
    df = spark.range(0, 4, 1, 2).select("id", value(F.spark_partition_id()).alias("v"))
else:
    df = spark.createDataFrame([(i, 100) for i in range(4)], "id long, v long")
if mode == "before_log_entry":
    patch(storage.LocalStorage, "create_exclusive", lambda self, rel, data: entry(rel))
elif mode == "inside_log_entry":  # the entry's temporary file is written, not yet linked
    patch(storage.os, "link", lambda src, dst, *a, **k: entry(dst))
elif mode == "before_description":
    patch(storage.LocalStorage, "write", lambda self, rel, data: rel == "description.parquet")
elif mode == "inside_description":  # the new description is written, not yet renamed
    patch(storage.os, "replace", lambda src, dst, *a, **k: str(dst).endswith("description.parquet"))
ds.commit({"t": df}, timestamp=datetime(2020, 1, 4, tzinfo=timezone.utc), is_major=False,
          name="crashed")
print("commit returned: the kill point was never reached", flush=True)
"""


def snapshot(root: str, spark) -> dict:
    ds = RevisionedDataset(root, spark=spark)
    df = ds.read("t", with_revision=True)
    return {
        "log": ds.log().drop(columns=["tables"]).to_dict("list"),
        "entries": [p for p in tree(root, "_log") if p.endswith(".json")],
        "state": sorted(map(tuple, df.collect())),
        "files_read": input_files(df, root),
    }


@pytest.fixture(scope="module")
def crashed(spark, tmp_path_factory):
    """{mode: (dataset root, snapshot before the crash)} after killing one writer per mode."""
    base = tmp_path_factory.mktemp("crash")
    template = str(base / "template")
    ds = RevisionedDataset(template, spark=spark, id_columns=["id"])
    rows = "id long, v long"
    ds.commit(
        {"t": frame(spark, [(i, 0) for i in range(6)], rows)}, timestamp=day(0), is_major=True
    )
    ds.commit({"t": frame(spark, [(2, 1), (9, 1)], rows)}, timestamp=day(1), is_major=False)
    before = snapshot(template, spark)

    victims = {}
    for mode in BEFORE_ENTRY + AFTER_ENTRY:
        root = str(base / mode)
        shutil.copytree(template, root)
        command = [sys.executable, "-c", WRITER, root, str(base / f"{mode}.marker"), mode]
        victims[mode] = start_victim(command, base / f"{mode}.marker", base / f"{mode}.log")
    kill_at_markers(victims)
    return {mode: (str(base / mode), before) for mode in victims}


@pytest.mark.parametrize("mode", BEFORE_ENTRY)
def test_killed_before_the_log_entry_leaves_the_dataset_as_it_was(crashed, spark, mode):
    root, before = crashed[mode]
    assert Path(root, CRASHED).is_dir(), "the writer died before writing anything"
    if mode != "spark_write":  # complete data files of the uncommitted revision are on disk
        assert any(p.endswith(".parquet") for p in tree(root, CRASHED))
    after = snapshot(root, spark)
    assert after == before
    assert CRASHED not in top_dirs(after["files_read"])
    # the dataset takes new commits at the next sequence; the crashed files stay unread
    ds = RevisionedDataset(root, spark=spark)
    rev = ds.commit(
        {"t": frame(spark, [(3, 7)], "id long, v long")}, timestamp=day(2), is_major=False
    )
    assert rev.sequence == 3 and [r.sequence for r in ds.revisions()] == [1, 2, 3]
    df = ds.read("t")
    assert CRASHED not in top_dirs(input_files(df, root))
    assert {r.id: r.v for r in df.collect()} == {0: 0, 1: 0, 2: 1, 3: 7, 4: 0, 5: 0, 9: 1}
    # the crashed attempt's claimed folder keeps its name taken: a retry with it is refused
    # (README: pick another name; vacuum reclaims the folder) and commits nothing
    with pytest.raises(DuplicateRevisionNameError, match=f"{CRASHED!r} already exists"):
        ds.commit(
            {"t": frame(spark, [(4, 8)], "id long, v long")},
            timestamp=day(2),
            is_major=False,
            name=CRASHED,
        )
    assert ds.head_sequence == 3 and Path(root, CRASHED).is_dir()


@pytest.mark.parametrize("mode", AFTER_ENTRY)
def test_killed_after_the_log_entry_leaves_exactly_the_new_revision(crashed, spark, mode):
    root, before = crashed[mode]
    # the description is stale (the writer died rewriting it) but still a readable parquet
    stale = pd.read_parquet(Path(root) / "description.parquet")
    assert list(stale["name"]) == before["log"]["name"]
    ds = RevisionedDataset(root, spark=spark)  # opening a handle brings it current
    records = ds.revisions()
    assert [r.sequence for r in records] == [1, 2, 3]
    new = records[2]
    assert (new.name, new.is_major, new.tables["t"].rows) == (CRASHED, False, 4)
    assert all(Path(root, f).is_file() for f in new.tables["t"].files)
    desc = pd.read_parquet(Path(root) / "description.parquet")
    assert list(desc["name"]) == [r.name for r in records]
    after = snapshot(root, spark)
    assert {k: v[:2] for k, v in after["log"].items()} == before["log"]
    assert top_dirs(after["files_read"]) == top_dirs(before["files_read"]) | {CRASHED}
    got = {r[0]: r[1] for r in after["state"]}
    assert got == {0: 100, 1: 100, 2: 100, 3: 100, 4: 0, 5: 0, 9: 1}
