"""Crash safety (docs/guides/engine.md): a writer SIGKILLed at each point of a commit leaves a
consistent dataset.

The kill points are deterministic (tests/harness/processes.py): the writer process patches
one step of its own commit so that, on reaching it, it drops a marker file and blocks; the
test waits for the marker and kills the writer's whole process group (Python driver, JVM,
Python workers) with SIGKILL. All writers start at once (one JVM each) against copies of
one prepared dataset.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from harness.dates import day
from harness.processes import CrashPlan

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import DuplicateRevisionNameError

from .helpers import frame, input_files, top_dirs, tree

pytestmark = pytest.mark.slow  # writer processes with their own JVMs, SIGKILLed

CRASHED = "crashed"

# the commit's steps, in order; the first three die before the log entry exists
BEFORE_ENTRY = ("spark_write", "before_log_entry", "inside_log_entry")
AFTER_ENTRY = ("before_description", "inside_description")


def snapshot(root: str, spark) -> dict:
    ds = RevisionedDataset(root, spark=spark)
    df = ds.read("t", with_revision=True)
    return {
        "log": ds.inspect.log().drop(columns=["tables"]).to_dict("list"),
        "entries": [p for p in tree(root, "_log") if p.endswith(".json")],
        "state": sorted(map(tuple, df.collect())),
        "files_read": input_files(df, root),
    }


def prepare(template: str, spark) -> dict:
    """The dataset every writer commits to: a major and a minor."""
    ds = RevisionedDataset(template, spark=spark, id_columns=["id"])
    rows = "id long, v long"
    ds.commit(
        {"t": frame(spark, [(i, 0) for i in range(6)], rows)}, timestamp=day(0), is_major=True
    )
    ds.commit({"t": frame(spark, [(2, 1), (9, 1)], rows)}, timestamp=day(1), is_major=False)
    return snapshot(template, spark)


@pytest.fixture(scope="module")
def crash_plan() -> CrashPlan:
    """One writer per mode (tests/harness/crash_commit.py) commits ``crashed`` and is killed."""
    return CrashPlan("crash_commit.py", BEFORE_ENTRY + AFTER_ENTRY, prepare)


@pytest.mark.parametrize("mode", BEFORE_ENTRY)
def test_killed_before_the_log_entry_leaves_the_dataset_as_it_was(crashed, spark, mode):
    roots, before = crashed
    root = roots[mode]
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
    roots, before = crashed
    root = roots[mode]
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
