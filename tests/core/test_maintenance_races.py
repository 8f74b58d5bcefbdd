"""Three guarantees of the lifecycle operations against concurrent work (README "Purge",
"Lifecycle"): a purge gives up when a commit lands between its scan and its entry; a
failed policy compaction never fails the commit it follows; a vacuum racing commits loses
nothing and removes nothing a commit or a read at the head needs.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from harness.dates import day

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import CommitConflictError, StorageError
from revisions_assets.core.maintain import compaction
from revisions_assets.core.maintain.purge import Purge

from .helpers import frame, tree

SCHEMA = "id long, v long"


def test_a_purge_gives_up_when_a_commit_lands_after_its_scan(spark, root, monkeypatch):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    ds.commit({"t": frame(spark, [(1, 10), (2, 20)], SCHEMA)}, day(0), is_major=True)
    other = RevisionedDataset(root, spark=spark, id_columns=["id"])
    scan = Purge._scan

    def scan_then_a_commit_lands(self, *args, **kwargs):
        hits = scan(self, *args, **kwargs)
        # another writer's minor lands while the purge rewrites the files it found
        other.commit({"t": frame(spark, [(1, 11)], SCHEMA)}, day(1), is_major=False, name="late")
        return hits

    monkeypatch.setattr(Purge, "_scan", scan_then_a_commit_lands)
    with pytest.raises(CommitConflictError, match="purge of table 't' gave up"):
        ds.maintenance.purge("t", frame(spark, [(1,)], "id long"), reason="erasure request")
    assert [r.name for r in ds.revisions()][-1] == "late"  # the commit, no purge entry
    assert not [p for p in tree(root) if p.startswith("purge-")]  # its rewrites removed
    monkeypatch.undo()
    ds.maintenance.purge(
        "t", frame(spark, [(1,)], "id long"), reason="erasure request"
    )  # run it again
    assert sorted(ds.read("t").toPandas()["id"]) == [2]


def test_a_failed_policy_compaction_never_fails_the_commit(spark, root, monkeypatch, caplog):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=1)
    ds.commit({"t": frame(spark, [(1, 10)], SCHEMA)}, day(0), is_major=True)
    ds.commit({"t": frame(spark, [(2, 20)], SCHEMA)}, day(1), is_major=False)

    def disk_full(storage, name):
        raise StorageError(f"{storage.uri}/{name}: no space left on device")

    monkeypatch.setattr(compaction, "claim_folder", disk_full)
    record = ds.commit({"t": frame(spark, [(3, 30)], SCHEMA)}, day(2), is_major=False)
    assert record is not None and ds.maintenance.last_compactions == ()
    assert ds.revisions()[-1].name == record.name  # committed, nothing compacted
    assert "compaction after revision" in caplog.text and "no space left" in caplog.text
    assert sorted(ds.read("t").toPandas()["id"]) == [1, 2, 3]


def test_a_vacuum_racing_commits_loses_nothing(spark, root):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=3)
    ds.commit({"t": frame(spark, [(0, 0)], SCHEMA)}, day(0), is_major=True)
    commits, errors = 12, []

    def writer() -> None:
        mine = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=3)
        try:
            for n in range(1, commits + 1):
                mine.commit({"t": frame(spark, [(n, n)], SCHEMA)}, day(n), is_major=False)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    vacuums = 0
    while thread.is_alive():
        RevisionedDataset(root, spark=spark).maintenance.vacuum(retain=timedelta(0))
        vacuums += 1
    thread.join()
    assert errors == []
    log = ds.inspect.log()
    kinds = list(log["kind"])
    # the race happened: vacuum entries landed between the writer's commits
    first, last = kinds.index("minor"), len(kinds) - 1 - kinds[::-1].index("minor")
    assert "vacuum" in kinds[first:last], kinds
    assert sorted(ds.read("t").toPandas()["id"]) == list(range(commits + 1))
    assert [f for f in ds.maintenance.verify() if f.severity == "error"] == []
    assert vacuums > 1
