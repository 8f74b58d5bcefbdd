"""Crash safety of maintenance (SPEC §8): SIGKILL during a compaction and during a vacuum.

Same method as tests/core/test_crash.py (tests/harness/processes.py): each process
patches one step of its own compaction or vacuum to drop a marker and block there, and
is killed with its JVM. Whatever the point, the dataset reads as before; a compaction
killed before its entry leaves a folder the next vacuum reclaims, and a vacuum killed
after its entry leaves marked revisions whose files the next vacuum deletes.
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

from .helpers import frame, input_files, top_dirs

MODES = ("compaction_before_entry", "compaction_after_entry", "vacuum_marked", "vacuum_deleting")

WORKER = r"""
from datetime import timedelta
from harness.kill_points import local_victim

ds, spark, patch, mode = local_victim()
deletions = []
if mode == "compaction_before_entry":  # its files are written, its entry is not
    patch("create_exclusive", lambda rel, data: rel.startswith("_log/"))
elif mode == "compaction_after_entry":  # committed, description.parquet not rewritten
    patch("write", lambda rel, data: rel == "description.parquet")
elif mode == "vacuum_marked":  # the vacuum entry is committed, nothing deleted yet
    patch("delete_tree", lambda rel: True)
    patch("delete_files", lambda rels: True)
elif mode == "vacuum_deleting":  # one folder deleted, then killed
    patch("delete_tree", lambda rel: deletions.append(rel) or len(deletions) == 2)
if mode.startswith("compaction"):
    ds.compact()
else:
    ds.vacuum(retain=timedelta(0))
print("returned: the kill point was never reached", flush=True)
"""

ROWS = "id long, v long"


def state(root: str, spark) -> dict:
    df = RevisionedDataset(root, spark=spark).read("t", with_revision=True)
    return {r["id"]: (r["v"], r["_revision"]) for r in df.collect()}


@pytest.fixture(scope="module")
def crashed(spark, tmp_path_factory):
    """{mode: root} after killing one maintenance process per mode, and the state before."""
    base = tmp_path_factory.mktemp("lifecycle-crash")
    template = str(base / "template")
    ds = RevisionedDataset(template, spark=spark, id_columns=["id"], compact_after=None)
    ds.commit({"t": frame(spark, [(i, 0) for i in range(6)], ROWS)}, day(0), True, name="m")
    for n in (1, 2, 3):
        ds.commit({"t": frame(spark, [(n, n)], ROWS)}, day(n), False, name=f"minor{n}")
    ds.compact()
    ds.commit({"t": frame(spark, [(4, 4)], ROWS)}, day(4), False, name="minor4")
    before = state(template, spark)
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
def test_killed_compaction_before_its_entry(crashed, spark):
    roots, before = crashed
    root = roots["compaction_before_entry"]
    ds = RevisionedDataset(root, spark=spark)
    assert [r.kind for r in ds.revisions()].count("compaction") == 1  # only the template's
    (orphan,) = [
        p.name for p in Path(root).glob("compaction-*") if p.name not in ds.log()["name"].tolist()
    ]
    assert any(Path(root, orphan).rglob("*.parquet"))  # the killed one wrote its files
    assert state(root, spark) == before
    assert orphan not in top_dirs(input_files(ds.read("t"), root))
    report = ds.vacuum(grace=timedelta(0), retain=timedelta(days=1))
    assert report.orphans == (orphan,) and not Path(root, orphan).exists()
    assert state(root, spark) == before


@pytest.mark.slow
def test_killed_compaction_after_its_entry(crashed, spark):
    roots, before = crashed
    root = roots["compaction_after_entry"]
    ds = RevisionedDataset(root, spark=spark)  # heals description.parquet
    compactions = [r for r in ds.revisions() if r.kind == "compaction"]
    assert len(compactions) == 2 and compactions[-1].replaces["t"].revisions == 5
    assert ds.log()["kind"].tolist()[-1] == "compaction"
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
    dry = ds.vacuum(retain=timedelta(0), dry_run=True)
    assert set(dry.revisions) == left and dry.entry is None
    report = ds.vacuum(retain=timedelta(0))
    assert report.entry is None and set(report.revisions) == left
    assert not any(Path(root, name).exists() for name in marked)
    assert state(root, spark) == before
    assert ds.vacuum(retain=timedelta(0)).revisions == ()  # idempotent
