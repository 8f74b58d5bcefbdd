"""Crash safety of purge: SIGKILL leaves either the old state or the purged one.

Same method as tests/core/test_lifecycle_crash.py (tests/harness/processes.py): each
process patches one step of its own purge to drop a marker and block there, and is
killed with its JVM. Killed after rewriting the files but before its entry: the old
state, and folders the next vacuum reclaims as orphans. Killed after its entry, before
the description is rewritten: the purged state.
"""

from __future__ import annotations

import shutil
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from harness.dates import day
from harness.processes import kill_at_markers, start_victim

from revisions_assets import RevisionedDataset

from .helpers import by_id, frame

MODES = ("purge_before_entry", "purge_after_entry")

WORKER = r"""
from harness.kill_points import local_victim

ds, spark, patch, mode = local_victim()
if mode == "purge_before_entry":  # its files are rewritten, its entry is not committed
    patch("create_exclusive", lambda rel, data: rel.startswith("_log/"))
else:  # committed, description.parquet not rewritten
    patch("write", lambda rel, data: rel == "description.parquet")
ds.purge("t", spark.createDataFrame([(3,)], "id long"), reason="crash test")
print("returned: the kill point was never reached", flush=True)
"""

ROWS = "id long, v long"


@pytest.fixture(scope="module")
def crashed(spark, tmp_path_factory):
    """{mode: root} after killing one purge per mode, and the state before."""
    base = tmp_path_factory.mktemp("purge-crash")
    template = str(base / "template")
    ds = RevisionedDataset(template, spark=spark, id_columns=["id"], compact_after=None)
    ds.commit({"t": frame(spark, [(i, 0) for i in range(5)], ROWS)}, day(0), True, name="m")
    ds.commit({"t": frame(spark, [(3, 1), (4, 1)], ROWS)}, day(1), False, name="minor")
    before = by_id(ds.read("t"), "v")
    victims = {}
    for mode in MODES:
        root = str(base / mode)
        shutil.copytree(template, root)
        marker = base / f"{mode}.marker"
        command = [sys.executable, "-c", WORKER, root, str(marker), mode]
        victims[mode] = start_victim(command, marker, base / f"{mode}.log")
    kill_at_markers(victims)
    return {mode: str(base / mode) for mode in MODES}, before


@pytest.mark.slow
def test_killed_before_its_entry_leaves_the_old_state(crashed, spark):
    roots, before = crashed
    root = roots["purge_before_entry"]
    ds = RevisionedDataset(root, spark=spark)
    assert [r.kind for r in ds.revisions()] == ["major", "minor"]
    assert by_id(ds.read("t"), "v") == before and 3 in before
    orphans = sorted(p.name for p in Path(root).glob("purge-*"))
    assert len(orphans) == 2  # the rewritten files of both revisions
    report = ds.vacuum(grace=timedelta(0), retain=timedelta(days=1))
    assert sorted(report.orphans) == orphans and not any(Path(root).glob("purge-*"))
    assert by_id(ds.read("t"), "v") == before
    assert ds.verify() == []


@pytest.mark.slow
def test_killed_after_its_entry_leaves_the_purged_state(crashed, spark):
    roots, before = crashed
    root = roots["purge_after_entry"]
    ds = RevisionedDataset(root, spark=spark)  # heals description.parquet
    assert ds.log()["kind"].tolist() == ["major", "minor", "purge"]
    assert by_id(ds.read("t"), "v") == {k: v for k, v in before.items() if k != 3}
    assert ds.verify() == []
