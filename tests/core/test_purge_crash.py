"""Crash safety of purge: SIGKILL leaves either the old state or the purged one.

Same method as tests/core/test_lifecycle_crash.py (tests/harness/processes.py): each
process patches one step of its own purge to drop a marker and block there, and is
killed with its JVM. Killed after rewriting the files but before its entry: the old
state, and folders the next vacuum reclaims as orphans. Killed after its entry, before
the description is rewritten: the purged state.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from harness.dates import day
from harness.processes import CrashPlan

from revisions_assets import RevisionedDataset

from .helpers import by_id, frame

MODES = ("purge_before_entry", "purge_after_entry")

ROWS = "id long, v long"


def prepare(template: str, spark) -> dict:
    """The dataset every purge runs on: a major and a minor; returns its state by id."""
    ds = RevisionedDataset(template, spark=spark, id_columns=["id"], compact_after=None)
    ds.commit({"t": frame(spark, [(i, 0) for i in range(5)], ROWS)}, day(0), True, name="m")
    ds.commit({"t": frame(spark, [(3, 1), (4, 1)], ROWS)}, day(1), False, name="minor")
    return by_id(ds.read("t"), "v")


@pytest.fixture(scope="module")
def crash_plan() -> CrashPlan:
    """One purge per mode (tests/harness/crash_purge.py), killed at its step."""
    return CrashPlan("crash_purge.py", MODES, prepare)


@pytest.mark.slow
def test_killed_before_its_entry_leaves_the_old_state(crashed, spark):
    roots, before = crashed
    root = roots["purge_before_entry"]
    ds = RevisionedDataset(root, spark=spark)
    assert [r.kind for r in ds.revisions()] == ["major", "minor"]
    assert by_id(ds.read("t"), "v") == before and 3 in before
    orphans = sorted(p.name for p in Path(root).glob("purge-*"))
    assert len(orphans) == 2  # the rewritten files of both revisions
    report = ds.maintenance.vacuum(grace=timedelta(0), retain=timedelta(days=1))
    assert sorted(report.orphans) == orphans and not any(Path(root).glob("purge-*"))
    assert by_id(ds.read("t"), "v") == before
    assert ds.maintenance.verify() == []


@pytest.mark.slow
def test_killed_after_its_entry_leaves_the_purged_state(crashed, spark):
    roots, before = crashed
    root = roots["purge_after_entry"]
    ds = RevisionedDataset(root, spark=spark)  # heals description.parquet
    assert ds.inspect.log()["kind"].tolist() == ["major", "minor", "purge"]
    assert by_id(ds.read("t"), "v") == {k: v for k, v in before.items() if k != 3}
    assert ds.maintenance.verify() == []
