"""Purge on carrying majors: only the named entities disappear, on every history shape.

A carrying major (``carry=True``, or a major committed with ``skip_unchanged``) keeps the
state of earlier revisions under its own rows (``TableWrite.carries``). A purge that
rewrites its files must keep what it carries: before the fix, purging one plane of a
dataset shaped like the demo's ``planes`` (a major, minors, then a carrying major) left
424 of 1,894 rows in every read. The planes-shaped regression below pins the fix; the
random histories of test_properties.py cover the other shapes.

Datasets damaged by the purges of earlier releases are built by running that purge
(``earlier_release``: the swapped write rebuilt field by field, and applied wholesale):
reads heal as long as the carried files exist, and ``verify`` reports what they cannot
heal.
"""

from __future__ import annotations

import shutil
from dataclasses import fields
from datetime import timedelta

import pytest
from harness.dates import day

from revisions_assets import DatasetReader, RevisionedDataset, TableWrite
from revisions_assets.core.errors import RetentionError
from revisions_assets.core.log.records import PURGED_FIELDS, FileStats
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage

from .helpers import frame, stage_revision

ROWS = "id long, v long"

PLANES = 300  # entities of the major
TARGET = 10005  # the plane an erasure request names (in no minor but 3 and 6)


def plane(i: int) -> int:
    return 10000 + i


def spark_state(ds: RevisionedDataset, **where) -> dict:
    rows = ds.read("t", with_revision=True, **where).select("id", "v", "_revision").collect()
    return {r[0]: (r[1], r[2]) for r in rows}


def reader_state(reader: DatasetReader, **where) -> dict:
    df = reader.read("t", with_revision=True, **where)
    return {r[0]: (r[1], r[2]) for r in df.select("id", "v", "_revision").rows()}


def reader_history(reader: DatasetReader) -> set[tuple]:
    columns = ["id", "v", "valid_from", "valid_to", "is_deleted", "_revision"]
    return set(reader.history("t").select(columns).rows())


def without(rows, ids):
    if isinstance(rows, dict):
        return {k: v for k, v in rows.items() if k not in ids}
    return {r for r in rows if r[0] not in ids}


def test_a_purge_of_one_plane_removes_one_row_from_every_read(spark, root):
    """The demo's ``planes`` shape: a major of 300 planes (day 0) and six minors (days 1-6)
    that change 20 planes each, the target in the major and minors 3 and 6 (staged: no
    Spark job each); then a carrying major (day 7, carry=True) that changes 10 planes and
    the target, carrying the major and the six minors."""
    log = RevisionLog(open_storage(root))
    stage_revision(log, root, "m0", day(0), True, {(plane(i),): {"v": 0} for i in range(PLANES)})
    for n in range(1, 7):
        changed = {(plane(i),): {"v": n} for i in range(20 * n, 20 * n + 20)}
        changed |= {(TARGET,): {"v": n}} if n in (3, 6) else {}
        stage_revision(log, root, f"n{n}", day(n), False, changed)
    log.after_commit()
    ds = RevisionedDataset(root, spark=spark, compact_after=None)
    rows = [(plane(i), 99) for i in range(250, 260)] + [(TARGET, 99)]
    carrying = ds.commit({"t": frame(spark, rows, ROWS)}, day(7), True, "v2", "c7", carry=True)
    assert (carrying.tables["t"].carries, carrying.tables["t"].rows) == ((1, 2, 3, 4, 5, 6, 7), 11)
    reader = DatasetReader(root)
    before = {"latest": spark_state(ds), "as of day 3.5": spark_state(ds, as_of=day(3.5))}
    reader_before = {
        "latest": reader_state(reader),
        "HEAD~1": reader_state(reader, at="HEAD~1"),
        "as of day 7": reader_state(reader, as_of=day(7)),
        "history": reader_history(reader),
    }
    assert len(before["latest"]) == PLANES and before["latest"][TARGET] == (99, "c7")

    entry = ds.maintenance.purge("t", frame(spark, [(TARGET,)], "id long"), reason="erasure")
    # the target's rows in the major, minors 3 and 6, and the carrying major
    assert (entry.purge.rows_removed, len(entry.purge.swaps["t"])) == (4, 4)
    head = ds.revisions("t")[-1].tables["t"]  # as reads see it: the purged write
    assert (head.carries, head.rows) == ((1, 2, 3, 4, 5, 6, 7), 10)
    kept = [f.name for f in fields(TableWrite) if f.name not in PURGED_FIELDS]
    assert [getattr(head, f) for f in kept] == [getattr(carrying.tables["t"], f) for f in kept]

    after = {"latest": spark_state(ds), "as of day 3.5": spark_state(ds, as_of=day(3.5))}
    assert after == {kind: without(rows, {TARGET}) for kind, rows in before.items()}
    assert len(after["latest"]) == PLANES - 1  # 1 row fewer, not 290
    reader = DatasetReader(root)
    reader_after = {
        "latest": reader_state(reader),
        "HEAD~1": reader_state(reader, at="HEAD~1"),
        "as of day 7": reader_state(reader, as_of=day(7)),
        "history": reader_history(reader),
    }
    assert reader_after == {kind: without(v, {TARGET}) for kind, v in reader_before.items()}
    changes = ds.changes("t", since_sequence=1)  # a reset by the carrying major
    assert changes.is_reset and changes.df.count() == PLANES - 1
    assert ds.changes("t", since_sequence=8).df.count() == 0  # a purge changes nothing
    assert ds.maintenance.verify(deep=True) == []


def test_every_other_field_of_a_write_survives_a_purge():
    """Iterates the fields of TableWrite: a field added later is covered without a change
    here, and must be added to PURGED_FIELDS to be rewritten."""
    write = TableWrite(
        id_columns=("id",),
        schema_json='{"fields":[{"metadata":{},"name":"id","nullable":true,"type":"long"}],'
        '"type":"struct"}',
        version="v3",
        rows=10,
        tombstones=2,
        files=("a/t/1.parquet", "a/t/2.parquet"),
        bytes=2048,
        rows_offered=40,
        compared_with=6,
        field_versions={"v": "v2"},
        carries=(1, 2, 5),
        file_stats=tuple(
            FileStats(f, 5, 1024, 1, 900, 116, "0" * 64, (0,), (9,))
            for f in ("a/t/1.parquet", "a/t/2.parquet")
        ),
    )
    unset = [f.name for f in fields(TableWrite) if getattr(write, f.name) == f.default]
    assert not unset, f"give {unset} a value other than the default"
    stats = (FileStats("p-9/t/1.parquet", 7, 1000, 1, 880, 112, "1" * 64, (0,), (8,)),)
    purged = write.purged(("p-9/t/1.parquet",), 7, 1, 1000, stats)
    assert {f: getattr(purged, f) for f in PURGED_FIELDS} == {
        "files": ("p-9/t/1.parquet",),
        "rows": 7,
        "tombstones": 1,
        "bytes": 1000,
        "file_stats": stats,
    }
    for f in fields(TableWrite):
        if f.name not in PURGED_FIELDS:
            assert getattr(purged, f.name) == getattr(write, f.name), f.name
    # what a purge of an earlier release recorded: the view takes only the purged fields
    recorded = TableWrite(write.id_columns, write.schema_json, write.version, 7, 1, (), 1000)
    assert write.with_purged_fields(recorded) == write.purged((), 7, 1, 1000, None)
    assert TableWrite.from_doc(purged.to_doc()) == purged


# -- datasets damaged by the purge of earlier releases ------------------------------------------


def earlier_release(monkeypatch) -> None:
    """The purge and the log view of earlier releases: the swapped write rebuilt field by
    field (without ``carries`` and the provenance fields), and applied wholesale."""

    def purged(self, files, rows, tombstones, size, file_stats):
        return TableWrite(
            self.id_columns, self.schema_json, self.version, rows, tombstones, files, size
        )

    monkeypatch.setattr(TableWrite, "purged", purged)
    monkeypatch.setattr(TableWrite, "with_purged_fields", lambda self, swapped: swapped)


SMALL = {i: 0 for i in range(40)}


def small(spark, root: str, kind: str) -> RevisionedDataset:
    """A major of 40 ids, two minors (5 and 2 new ids), then a carrying major that writes
    id 45 (``carry``: carry=True; ``skip``: a skip_unchanged complete offer; ``compacted``:
    a compaction first, then carry=True). 47 rows."""
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    rows = ROWS
    ds.commit({"t": frame(spark, sorted(SMALL.items()), rows)}, day(0), True, name="m")
    ds.commit({"t": frame(spark, [(i, 1) for i in range(40, 45)], rows)}, day(1), False, name="n1")
    ds.commit({"t": frame(spark, [(45, 2), (46, 2)], rows)}, day(2), False, name="n2")
    if kind == "compacted":
        assert ds.maintenance.compact() is not None
    if kind == "skip":
        offer = [*SMALL.items(), *((i, 1) for i in range(40, 45)), (45, 9), (46, 2)]
        ds.commit({"t": frame(spark, offer, rows)}, day(3), True, name="c", skip_unchanged=True)
    else:
        ds.commit({"t": frame(spark, [(45, 9)], rows)}, day(3), True, name="c", carry=True)
    assert ds.revision("c").tables["t"].carries == (1, 2, 3)
    return ds


def ids_of(ds, **where) -> set[int]:
    return {r[0] for r in ds.read("t", **where).select("id").collect()}


PURGED = [(1,), (41,), (45,)]  # from the major, the first minor and the carrying major
KEPT = set(range(47)) - {1, 41, 45}


@pytest.mark.parametrize("kind", ["carry", "skip", "compacted"])
def test_reads_heal_a_purge_of_an_earlier_release(spark, root, monkeypatch, kind):
    ds = small(spark, root, kind)
    earlier_release(monkeypatch)
    ds.maintenance.purge("t", frame(spark, PURGED, "id long"), reason="erasure")
    damaged = RevisionedDataset(root, spark=spark)
    assert len(ids_of(damaged)) == 0  # the loss, as the earlier release read it
    if kind == "carry":  # verify --deep sees it (once is enough: it is the same check)
        assert [f.kind for f in damaged.maintenance.verify(deep=True)] == ["purge_lost_rows"]
    monkeypatch.undo()

    ds = RevisionedDataset(root, spark=spark)
    assert ids_of(ds) == ids_of(ds, as_of=day(3)) == KEPT
    assert set(DatasetReader(root).read("t")["id"]) == KEPT
    if kind == "carry":
        assert ds.maintenance.verify(deep=True) == []


def test_verify_reports_what_reads_cannot_heal(spark, root, monkeypatch):
    """After the damaged purge, the earlier release went on: a compaction (built without
    the carried revisions), a vacuum (which removed them) and a carry=True major (which
    carries the state without them)."""
    ds = small(spark, root, "carry")
    earlier_release(monkeypatch)
    ds.maintenance.purge("t", frame(spark, PURGED, "id long"), reason="erasure")
    ds = RevisionedDataset(root, spark=spark, compact_after=None)
    ds.commit({"t": frame(spark, [(50, 5)], "id long, v long")}, day(4), False, name="n4")
    compaction = ds.maintenance.compact()
    assert compaction.replaces["t"].revisions == 2  # c and n4: c's carries were hidden
    monkeypatch.undo()

    # the compaction holds c and n4; reads take what c carries from their own files
    ds = RevisionedDataset(root, spark=spark, compact_after=None)
    assert ids_of(ds) == KEPT | {50}
    assert set(DatasetReader(root).read("t")["id"]) == KEPT | {50}
    findings = ds.maintenance.verify()
    assert [(f.kind, f.severity, f.path) for f in findings] == [
        ("compaction_partial", "warning", compaction.name)
    ]
    # a vacuum now keeps the carried revisions (the compaction does not hold them)
    report = ds.maintenance.vacuum(retain=timedelta(0), keep_majors=False)
    assert {"m", "n1", "n2"}.isdisjoint(report.revisions)
    assert ids_of(ds) == KEPT | {50}


def test_verify_reports_removed_and_incompletely_carried_state(spark, root, monkeypatch):
    ds = small(spark, root, "carry")
    earlier_release(monkeypatch)
    ds.maintenance.purge("t", frame(spark, PURGED, "id long"), reason="erasure")
    ds = RevisionedDataset(root, spark=spark, compact_after=None)
    report = ds.maintenance.vacuum(retain=timedelta(0), keep_majors=False)
    assert {"m", "n1", "n2"} <= set(report.revisions)  # voided, as the damaged view had it
    later = shutil.copytree(root, f"{root}-later")
    after = RevisionedDataset(later, spark=spark, compact_after=None)
    after.commit({"t": frame(spark, [(46, 6)], "id long, v long")}, day(4), True, carry=True)
    monkeypatch.undo()

    # the carried revisions are gone: reads fail instead of losing their rows
    ds = RevisionedDataset(root, spark=spark, compact_after=None)
    with pytest.raises(RetentionError, match="'m'"):
        ds.read("t")
    with pytest.raises(RetentionError):
        DatasetReader(root).read("t")
    [finding] = ds.maintenance.verify()
    assert (finding.kind, finding.severity, finding.path) == ("state_removed", "error", "c")
    assert "complete major" in finding.fix
    # the recovery step: the table recomputed, as a complete major
    ds.commit({"t": frame(spark, [(i, 0) for i in KEPT], "id long, v long")}, day(5), True)
    assert ids_of(ds) == KEPT and ds.maintenance.verify() == []

    # a carrying major committed on the damaged state carries it without m, n1, n2
    later_ds = RevisionedDataset(later, spark=spark)
    kinds = [(f.kind, f.path) for f in later_ds.maintenance.verify()]
    assert ("carried_state_incomplete", later_ds.revision("HEAD").name) in kinds
