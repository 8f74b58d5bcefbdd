"""docs/concepts/lifecycle.md on the engine: compaction, the compact_after policy, retention and
vacuum.

The first test is the README's worked example (the docs/concepts/read-semantics.md example
continued), step by
step; the others pin one rule each. Which files a read touches is checked through
``DataFrame.inputFiles()``: a read that uses a compaction must not read the revisions it
replaces.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest
from harness.dates import day

from revisions_assets import RevisionedDataset, UpstreamPosition
from revisions_assets.core.errors import InvalidArgumentError, RetentionError, UnknownTableError

from .helpers import by_id, frame, input_files, top_dirs, tree

ROWS = "id long, day int"
#: the docs/concepts/read-semantics.md example, continued: r8 after it, r5 a backfill committed
#: after the compaction
EXAMPLE = [
    ("r0", 0, True, range(0, 5)),
    ("r2", 2, False, range(2, 7)),
    ("r4", 4, True, range(4, 9)),
    ("r6", 6, False, range(6, 11)),
    ("r8", 8, False, range(8, 13)),
]


def expect(*spans: tuple[range, int]) -> dict:
    """{id: (day,)} from (ids, day) spans."""
    return {i: (d,) for ids, d in spans for i in ids}


def commit(ds, spark, name, d, major, ids, **kw):
    rows = [(i, d) for i in ids]
    return ds.commit(
        {"t": frame(spark, rows, ROWS)}, timestamp=day(d), is_major=major, name=name, **kw
    )


def folders_read(df, ds) -> set[str]:
    return top_dirs(input_files(df, ds.root))


def test_worked_example_compaction_then_vacuum(spark, root):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    for name, d, major, ids in EXAMPLE:
        commit(ds, spark, name, d, major, ids)
    latest = expect((range(4, 6), 4), (range(6, 8), 6), (range(8, 13), 8))
    assert by_id(ds.read("t"), "day") == latest

    # compaction: the state at the head (r4, r6, r8 on the major r4) in one new revision
    c1 = ds.maintenance.compact()
    assert (c1.kind, c1.sequence, c1.data_change, c1.is_major) == ("compaction", 6, False, False)
    assert c1.timestamp == day(8)  # the newest timestamp among the revisions it replaces
    covers = c1.replaces["t"]
    assert (covers.major, covers.through, covers.revisions) == (3, 5, 3)
    assert ds.maintenance.compact() is None  # nothing on top of the base any more
    df = ds.read("t", with_revision=True)
    assert folders_read(df, ds) == {c1.name}
    assert by_id(df, "day") == latest  # the same rows ...
    assert by_id(df, "_revision")[12] == ("r8",)  # ... from the same revisions
    assert by_id(ds.read("t", at=5), "day") == latest
    assert folders_read(ds.read("t", at=5), ds) == {c1.name}
    # addressing counts data revisions only; reads that do not contain r8 ignore c1
    assert by_id(ds.read("t", at="HEAD~1"), "day") == expect((range(4, 6), 4), (range(6, 11), 6))
    assert folders_read(ds.read("t", as_of=day(7)), ds) == {"r4", "r6"}
    assert ds.revision("HEAD").name == "r8"
    assert list(ds.inspect.log()["kind"]) == [
        "major",
        "minor",
        "major",
        "minor",
        "minor",
        "compaction",
    ]

    # r5: a backfill stamped 2020-01-06, committed after c1. It wins where
    # docs/concepts/read-semantics.md says so
    # (id 5, newer than r4), and loses to r6 for id 6 even though c1 holds r6's row.
    commit(ds, spark, "r5", 5, False, [5, 6])
    latest = {**latest, 5: (5,)}
    df = ds.read("t", with_revision=True)
    assert by_id(df, "day") == latest
    assert by_id(df, "_revision")[6] == ("r6",)
    assert folders_read(df, ds) == {c1.name, "r5"}
    # a consumer whose position (5) precedes c1 gets exactly r5: no reset, no rows of c1
    cs = ds.changes("t", since_sequence=5)
    assert (cs.is_reset, [r.name for r in cs.revisions], cs.until_sequence) == (False, ["r5"], 7)
    assert by_id(cs.df, "day", "_deleted") == {5: (5, False), 6: (6, False)}

    # a week later: vacuum. The horizon is sequence 6 (c1), time 2020-01-09 (r8).
    week_later = c1.committed_at + timedelta(days=7)
    dry = ds.maintenance.vacuum(retain=timedelta(days=7), now=week_later, dry_run=True)
    assert sorted(dry.revisions) == ["r2", "r6", "r8"]  # voided by r4, or held by c1
    assert dry.entry is None and ds.head_sequence == 7 and Path(root, "r2").is_dir()
    report = ds.maintenance.vacuum(retain=timedelta(days=7), now=week_later)
    assert (report.horizon.sequence, report.horizon.timestamp) == (6, day(8))
    assert sorted(report.revisions) == sorted(dry.revisions)
    assert (report.files, report.bytes, report.folders) == (dry.files, dry.bytes, dry.folders)
    assert report.entry.kind == "vacuum" and report.entry.sequence == 8
    assert not any(Path(root, name).exists() for name in ("r2", "r6", "r8"))
    log = ds.inspect.log().set_index("name")
    assert list(log.loc[["r2", "r6", "r8"], "vacuumed_by"]) == [8, 8, 8]
    assert not log.loc[["r0", "r4", "r5", c1.name], "vacuumed"].any()

    # every read at or after the horizon is unchanged ...
    assert by_id(ds.read("t"), "day") == latest
    assert by_id(ds.read("t", at=6), "day") == by_id(ds.read("t", at=5), "day")
    assert by_id(ds.changes("t", since_sequence=6).df, "day") == {5: (5,), 6: (6,)}
    # ... so is one that needs only kept data (the major r0) ...
    assert by_id(ds.read("t", as_of=day(1)), "day") == expect((range(0, 5), 0))
    # ... and one that needs removed data raises, naming the time or position and horizon
    with pytest.raises(RetentionError, match=r"as of 2020-01-04.*'r2'.*sequence 6"):
        ds.read("t", as_of=day(3))
    with pytest.raises(RetentionError, match=r"at sequence 4.*'r6'.*horizon was sequence 6"):
        ds.read("t", at=4)
    with pytest.raises(RetentionError, match=r"since sequence 3.*'r6'"):
        ds.changes("t", since_sequence=3)
    with pytest.raises(RetentionError, match="r2"):
        ds.changes("t", since=day(1), until=day(3))
    with pytest.raises(RetentionError, match=r"history of table 't'.*'r2'"):
        ds.history("t")  # every version needs every revision that was ever part of a state
    # a major stamped before removed data would be merged with it: refused, nothing changes
    with pytest.raises(RetentionError, match="stamp the major at or after 2020-01-09"):
        commit(ds, spark, "early", 5, True, [1])
    assert ds.head_sequence == 8


def test_compaction_keeps_tombstones_for_later_backfills(spark, root):
    """An entity deleted inside a compaction stays deleted against an older backfill."""
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    commit(ds, spark, "m", 0, True, range(3))
    tomb = frame(spark, [(1, None, True)], "id long, day int, _deleted boolean")
    ds.commit({"t": tomb}, timestamp=day(4), is_major=False, name="gone")
    c = ds.maintenance.compact("t")
    assert (c.tables["t"].rows, c.tables["t"].tombstones) == (3, 1)
    commit(ds, spark, "late", 2, False, [1, 2])  # stamped before the deletion
    assert by_id(ds.read("t"), "day") == {0: (0,), 2: (2,)}
    assert c.name in folders_read(ds.read("t"), ds)


def test_compact_after_policy(spark, root):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=2)
    commit(ds, spark, "m", 0, True, range(4))
    commit(ds, spark, "a", 1, False, [0])
    commit(ds, spark, "b", 2, False, [1])
    assert ds.maintenance.last_compactions == () and ds.inspect.revisions_on_base("t") == 2
    assert not ds.maintenance.compaction_due("t")
    commit(ds, spark, "c", 3, False, [2])  # three on top of the major: past the policy
    (compaction,) = ds.maintenance.last_compactions
    assert compaction.replaces["t"].revisions == 4
    assert ds.inspect.revisions_on_base("t") == 0 and not ds.maintenance.compaction_due("t")
    assert [r.name for r in ds.revisions("t")] == ["m", "a", "b", "c"]
    assert by_id(ds.read("t"), "day") == {0: (1,), 1: (2,), 2: (3,), 3: (0,)}
    assert (
        RevisionedDataset(root, spark=spark, compact_after=None).maintenance.compaction_due("t")
        is False
    )
    with pytest.raises(UnknownTableError):
        ds.maintenance.compact("nope")


def test_vacuum_keeps_what_consumers_read_next(spark, root, tmp_path):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    commit(ds, spark, "m", 0, True, range(4))
    commit(ds, spark, "a", 1, False, [0])
    commit(ds, spark, "b", 2, False, [1])
    ds.maintenance.compact()
    now = ds.revisions()[-1].committed_at + timedelta(seconds=1)
    consumer = RevisionedDataset(str(tmp_path / "scores"), spark=spark, id_columns=["id"])
    consumer.commit(
        {"s": frame(spark, [(0, 0)], ROWS)},
        timestamp=day(1),
        is_major=True,
        upstream=[UpstreamPosition(ds.root, "t", 2)],
    )
    dry = ds.maintenance.vacuum(retain=timedelta(0), now=now, dry_run=True, consumers=[consumer])
    assert dry.revisions == ("a",)  # the consumer read "a" already; "b" is its next change
    assert (
        ds.maintenance.vacuum(retain=timedelta(0), now=now, dry_run=True, keep_after_sequence=2)
        == dry
    )
    alone = ds.maintenance.vacuum(retain=timedelta(0), now=now, dry_run=True)
    assert sorted(alone.revisions) == ["a", "b"]


def test_vacuum_reclaims_what_failed_writers_leave(spark, root):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    commit(ds, spark, "m", 0, True, range(2))
    base = Path(root)
    (base / "killed" / "t").mkdir(parents=True)
    (base / "killed" / "_claimed").write_text("token")
    (base / "killed" / "t" / "part-0.parquet").write_bytes(b"x" * 10)
    (base / "claimed-only").mkdir()
    (base / "claimed-only" / "._claimed.abc.tmp").write_bytes(b"")
    (base / "_log" / ".00000000000000000002.json.abc.tmp").write_bytes(b"{}")
    (base / ".description.parquet.abc.tmp").write_bytes(b"x")
    (base / "m" / "._claimed.def.tmp").write_bytes(b"")  # died between link and unlink
    (base / "notes").mkdir()
    (base / "notes" / "readme.txt").write_text("not written by a writer: left alone")
    report = ds.maintenance.vacuum(dry_run=True)
    assert report.orphans == () and report.temporary_files == ()  # younger than the grace
    old = time.time() - 7200
    for path in tree(root):
        os.utime(base / path, (old, old))
    report = ds.maintenance.vacuum(dry_run=True)
    assert report.orphans == ("claimed-only", "killed")
    assert sorted(report.temporary_files) == [
        ".description.parquet.abc.tmp",
        "_log/.00000000000000000002.json.abc.tmp",
        "m/._claimed.def.tmp",
    ]
    assert report.revisions == () and (report.files, report.bytes) == (6, 18)
    entry = ds.maintenance.vacuum().entry  # what goes is recorded, leftovers alone too
    assert entry.vacuum.removed == () and entry.vacuum.deleted.folders == report.orphans
    assert not (base / "killed").exists() and not (base / "claimed-only").exists()
    assert (base / "notes" / "readme.txt").exists()
    assert [p for p in tree(root) if p.endswith(".tmp")] == []
    # the orphan's name is usable again, and the dataset reads as before
    commit(ds, spark, "killed", 1, False, [5])
    assert by_id(ds.read("t"), "day") == {0: (0,), 1: (0,), 5: (1,)}
    names = pd.read_parquet(base / "description.parquet")["name"].tolist()
    assert names == ["m", entry.name, "killed"]


def test_vacuum_keeps_what_a_damaged_compaction_holds_until_it_is_rebuilt(spark, root):
    """A truncated compaction file: vacuum deletes none of the revisions the compaction
    holds (before, it deleted them and left the truncated file as their only copy) and
    says why, while r2, which the major voids and the compaction does not hold, goes; the
    compaction rebuilt from them, the next vacuum removes them and it."""
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    for name, d, major, ids in EXAMPLE:
        commit(ds, spark, name, d, major, ids)
    latest = by_id(ds.read("t", with_revision=True), "day", "_revision")
    c1 = ds.maintenance.compact()
    (stored,) = Path(root, c1.name, "t").glob("*.parquet")
    intact = stored.read_bytes()
    stored.write_bytes(intact[: len(intact) // 2])  # as a full disk or a cut copy leaves it
    files = [f for f in tree(root) if not f.startswith("r2/")]

    report = ds.maintenance.vacuum(retain=timedelta(0))
    assert report.revisions == ("r2",) and sorted(report.kept) == ["r6", "r8"]  # held by c1
    assert [f for f in tree(root) if not f.startswith("_log/")] == [
        f for f in files if not f.startswith("_log/")
    ]
    (finding,) = report.findings
    assert (finding.kind, finding.severity, finding.path) == (
        "compaction_damaged",
        "error",
        c1.name,
    )
    assert "its last bytes are not PAR1" in finding.message and "--rebuild" in finding.fix
    assert [f.kind for f in ds.maintenance.verify()] == ["compaction_damaged"]

    rebuilt = ds.maintenance.compact(rebuild=c1.name[:12])  # a unique prefix names it
    assert rebuilt.replaces == c1.replaces and rebuilt.properties == {"rebuilds": c1.name}
    assert by_id(ds.read("t", with_revision=True), "day", "_revision") == latest
    assert folders_read(ds.read("t"), ds) == {rebuilt.name}
    assert [(f.kind, f.severity) for f in ds.maintenance.verify()] == [
        ("compaction_replaced", "warning")
    ]
    report = ds.maintenance.vacuum(retain=timedelta(0))
    assert sorted(report.revisions) == sorted(["r6", "r8", c1.name]) and not report.kept
    assert by_id(ds.read("t", with_revision=True), "day", "_revision") == latest
    assert ds.maintenance.verify() == []


def test_a_compaction_whose_sources_are_gone_cannot_be_rebuilt(spark, root):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    for name, d, major, ids in EXAMPLE:
        commit(ds, spark, name, d, major, ids)
    c1 = ds.maintenance.compact()
    ds.maintenance.vacuum(retain=timedelta(0))  # r6 and r8 go: c1 holds them
    head = ds.head_sequence
    with pytest.raises(RetentionError, match=r"'r6'.*cannot be rebuilt: restore its files"):
        ds.maintenance.compact(rebuild=c1.name)
    with pytest.raises(InvalidArgumentError, match="'r4'.*is not a compaction"):
        ds.maintenance.compact(rebuild="r4")
    assert ds.head_sequence == head and c1.name in {p.split("/")[0] for p in tree(root)}
