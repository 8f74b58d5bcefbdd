"""Crash safety of maintenance (docs/concepts/lifecycle.md): SIGKILL during a compaction and during
a vacuum.

Same method as tests/core/test_crash.py (tests/harness/processes.py): each process
patches one step of its own compaction or vacuum to drop a marker and block there, and
is killed with its JVM. Whatever the point, the dataset reads as before; a compaction
killed before its entry leaves a folder the next vacuum reclaims, and a vacuum killed
after its entry leaves marked revisions whose files the next vacuum deletes.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from harness.dates import day
from harness.processes import CrashPlan

from revisions_assets import RevisionedDataset

from .helpers import frame, input_files, top_dirs

MODES = ("compaction_before_entry", "compaction_after_entry", "vacuum_marked", "vacuum_deleting")

ROWS = "id long, v long"


def state(root: str, spark) -> dict:
    df = RevisionedDataset(root, spark=spark).read("t", with_revision=True)
    return {r["id"]: (r["v"], r["_revision"]) for r in df.collect()}


def prepare(template: str, spark) -> dict:
    """The dataset every process maintains: a major, three minors, a compaction of them and
    a minor after it; returns its state."""
    ds = RevisionedDataset(template, spark=spark, id_columns=["id"], compact_after=None)
    ds.commit({"t": frame(spark, [(i, 0) for i in range(6)], ROWS)}, day(0), True, name="m")
    for n in (1, 2, 3):
        ds.commit({"t": frame(spark, [(n, n)], ROWS)}, day(n), False, name=f"minor{n}")
    ds.maintenance.compact()
    ds.commit({"t": frame(spark, [(4, 4)], ROWS)}, day(4), False, name="minor4")
    return state(template, spark)


@pytest.fixture(scope="module")
def crash_plan() -> CrashPlan:
    """One compaction or vacuum per mode (tests/harness/crash_maintenance.py), killed at its
    step."""
    return CrashPlan("crash_maintenance.py", MODES, prepare)


@pytest.mark.slow
def test_killed_compaction_before_its_entry(crashed, spark):
    roots, before = crashed
    root = roots["compaction_before_entry"]
    ds = RevisionedDataset(root, spark=spark)
    assert [r.kind for r in ds.revisions()].count("compaction") == 1  # only the template's
    (orphan,) = [
        p.name
        for p in Path(root).glob("compaction-*")
        if p.name not in ds.inspect.log()["name"].tolist()
    ]
    assert any(Path(root, orphan).rglob("*.parquet"))  # the killed one wrote its files
    assert state(root, spark) == before
    assert orphan not in top_dirs(input_files(ds.read("t"), root))
    report = ds.maintenance.vacuum(grace=timedelta(0), retain=timedelta(days=1))
    assert report.orphans == (orphan,) and not Path(root, orphan).exists()
    assert state(root, spark) == before


@pytest.mark.slow
def test_killed_compaction_after_its_entry(crashed, spark):
    roots, before = crashed
    root = roots["compaction_after_entry"]
    ds = RevisionedDataset(root, spark=spark)  # heals description.parquet
    compactions = [r for r in ds.revisions() if r.kind == "compaction"]
    assert len(compactions) == 2 and compactions[-1].replaces["t"].revisions == 5
    assert ds.inspect.log()["kind"].tolist()[-1] == "compaction"
    assert state(root, spark) == before
    assert top_dirs(input_files(ds.read("t"), root)) == {compactions[-1].name}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["vacuum_marked", "vacuum_deleting"])
def test_killed_vacuum_is_finished_by_the_next(crashed, spark, mode):
    roots, before = crashed
    root = roots[mode]
    ds = RevisionedDataset(root, spark=spark)
    (entry,) = [r for r in ds.revisions() if r.kind == "vacuum"]
    marked = {ds.revisions()[s - 1].name for s in entry.vacuum.removed}
    assert marked == {"minor1", "minor2", "minor3"}
    left = {name for name in marked if Path(root, name).exists()}
    assert left if mode == "vacuum_marked" else 0 < len(left) < 3
    assert state(root, spark) == before
    dry = ds.maintenance.vacuum(retain=timedelta(0), dry_run=True)
    assert set(dry.revisions) == left and dry.entry is None
    report = ds.maintenance.vacuum(retain=timedelta(0))
    assert set(report.revisions) == left  # finished, and recorded: it marks nothing new
    mark = report.entry.vacuum
    assert mark.removed == () and set(mark.deleted.folders) == left
    assert not any(Path(root, name).exists() for name in marked)
    assert state(root, spark) == before
    assert ds.maintenance.vacuum(retain=timedelta(0)).revisions == ()  # idempotent
