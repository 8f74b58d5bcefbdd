"""The pure rules of docs/concepts/lifecycle.md without Spark: entry kinds, the log view, which
base a read
uses, the retention horizon, what a vacuum may remove, and lazy checkpoints."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pyarrow as pa
import pytest
from harness.dates import day

from revisions_assets.core.errors import CorruptLogError, RetentionError
from revisions_assets.core.log import records as records_module
from revisions_assets.core.log import revision_log as log_module
from revisions_assets.core.log.records import (
    CompactedRange,
    Revision,
    TableWrite,
    VacuumMark,
    from_ranges,
    to_ranges,
)
from revisions_assets.core.log.revision_log import (
    RevisionLog,
    checkpoint_table,
    records_of_checkpoint,
)
from revisions_assets.core.log.view import LogView
from revisions_assets.core.maintain.retention import Horizon, removable, retention_horizon
from revisions_assets.core.read.plan.scans import plan_merge as plan_read
from revisions_assets.core.read.plan.selection import changes_by_sequence, state_selection
from revisions_assets.core.storage.base import LocalStorage
from revisions_assets.core.write.rules import check_major_after_vacuum


def write(name: str = "x") -> TableWrite:
    return TableWrite(
        ("id",), '{"fields":[],"type":"struct"}', "v1", 1, 0, (f"{name}/t/p.parquet",), 9
    )


class Log:
    """Builds a log entry by entry: data revisions, compactions and vacuums."""

    def __init__(self):
        self.records: list[Revision] = []

    @property
    def next(self) -> int:
        return len(self.records) + 1

    def data(self, ts: float, major: bool, tables=("t",), name: str | None = None) -> Revision:
        name = name or f"r{self.next}"
        record = Revision(
            name=name,
            timestamp=day(ts),
            is_major=major,
            sequence=self.next,
            committed_at=day(100 + self.next),
            tables={t: write(name) for t in tables},
        )
        self.records.append(record)
        return record

    def compact(self, table: str = "t") -> Revision:
        """A compaction of the default read at the current head, like Compactor makes."""
        view = LogView(self.records)
        merge = state_selection(view.table_revisions(table), table).merge
        covers = CompactedRange(
            major=min(merge, key=lambda r: r.key).sequence,
            through=max(r.sequence for r in merge),
            revisions=len(merge),
            timestamp=max(r.timestamp for r in merge),
        )
        name = f"c{self.next}"
        record = Revision(
            name=name,
            timestamp=covers.timestamp,
            is_major=False,
            sequence=self.next,
            committed_at=day(100 + self.next),
            tables={table: write(name)},
            data_change=False,
            kind="compaction",
            replaces={table: covers},
        )
        self.records.append(record)
        return record

    def vacuum(self, removed: list[int], horizon: int = 0) -> Revision:
        record = Revision(
            name=f"v{self.next}",
            timestamp=day(200),
            is_major=False,
            sequence=self.next,
            committed_at=day(100 + self.next),
            tables={},
            data_change=False,
            kind="vacuum",
            vacuum=VacuumMark(tuple(removed), horizon, day(horizon), 0.0),
        )
        self.records.append(record)
        return record

    def view(self) -> LogView:
        return LogView(self.records)


def names(revisions) -> list[str]:
    return [r.name for r in revisions]


def direct(plan) -> list[str]:
    """The revisions a plan reads from their own files (not from a compaction)."""
    return [t.entry for t in plan.tasks if not t.is_compaction]


# -- records ----------------------------------------------------------------------------------


def test_kinds_round_trip_and_old_entries_derive_theirs():
    log = Log()
    major = log.data(0, True)
    log.data(1, False)
    compaction = log.compact()
    vacuum = log.vacuum([2], horizon=3)
    for record in log.records:
        assert Revision.from_json(record.to_json()) == record
    assert [r.kind for r in log.records] == ["major", "minor", "compaction", "vacuum"]
    assert [r.is_data for r in log.records] == [True, True, False, False]
    assert compaction.replaces["t"] == CompactedRange(1, 2, 2, day(1))
    assert vacuum.vacuum.removed == (2,)
    old = major.to_json().replace('"kind":"major",', "").replace('"format":2', '"format":1')
    assert Revision.from_json(old).kind == "major"
    assert not compaction.wrote("t") and major.wrote("t")


def test_sequence_ranges():
    assert to_ranges([5, 1, 2, 3, 9, 10]) == [[1, 3], [5, 5], [9, 10]]
    assert from_ranges(to_ranges([5, 1, 2, 3, 9, 10])) == (1, 2, 3, 5, 9, 10)


def test_a_checkpoint_materializes_data_revisions_lazily(monkeypatch):
    log = Log()
    for n in range(300):
        log.data(n, n % 100 == 0)
    log.compact()
    table = checkpoint_table(log.records)
    parsed = []
    original = records_module.TableWrite.from_doc
    monkeypatch.setattr(
        records_module.TableWrite,
        "from_doc",
        classmethod(lambda cls, doc: parsed.append(1) or original(doc)),
    )
    loaded = records_of_checkpoint(table)
    view = LogView(loaded)
    selection = state_selection(view.table_revisions("t"), "t")
    plan = plan_read(view, selection, "read")
    # only the compaction entry and the governing major (what it carries) were parsed
    assert len(parsed) == 2
    assert direct(plan) == []  # the compaction holds the state
    assert loaded[5].tables["t"] == log.records[5].tables["t"]  # details on demand
    assert len(parsed) == 3
    assert loaded == log.records and [r.to_json() for r in loaded] == [
        r.to_json() for r in log.records
    ]


def test_a_first_format_checkpoint_is_still_read():
    log = Log()
    log.data(0, True)
    log.data(1, False)
    old = pa.table(
        {
            "sequence": pa.array([1, 2], pa.int64()),
            "record": pa.array([r.to_json() for r in log.records], pa.string()),
        }
    )
    assert records_of_checkpoint(old) == log.records


def test_a_fresh_handle_appends_to_the_stored_description(tmp_path, monkeypatch):
    storage = LocalStorage(tmp_path)
    writer = RevisionLog(storage)
    log = Log()
    for n in range(5):
        writer.try_append(log.data(n, n == 0))
        writer.after_commit()
    tabulated = []
    original = log_module.description_table
    monkeypatch.setattr(
        log_module,
        "description_table",
        lambda rs, *root: tabulated.append(len(rs)) or original(rs, *root),
    )
    fresh = RevisionLog(storage)
    fresh.refresh()
    fresh.try_append(log.data(5, False))
    fresh.after_commit()
    assert tabulated == [0, 1]  # the stored rows were reused; only the new entry tabulated
    assert fresh.description().column("name").to_pylist() == names(log.records)


# -- the log view and read plans ----------------------------------------------------------------


def test_maintenance_entries_never_enter_a_history():
    log = Log()
    log.data(0, True)
    log.compact()
    log.data(1, False, tables=("t", "u"))
    view = log.view()
    assert names(view.table_revisions("t")) == ["r1", "r3"] and view.tables() == ["t", "u"]
    unknown = dataclasses.replace(log.records[1], kind="purge-from-the-future", raw=None)
    with pytest.raises(CorruptLogError, match="purge-from-the-future"):
        LogView([log.records[0], unknown])


def test_reads_use_the_largest_compaction_whose_revisions_they_contain():
    log = Log()
    log.data(0, True)  # 1
    log.data(1, False)  # 2
    small = log.compact()  # 3: r1 r2
    log.data(2, False)  # 4
    big = log.compact()  # 5: r1 r2 r4
    log.data(3, False)  # 6
    view = log.view()
    history = view.table_revisions("t")

    def plan(**kw):
        return plan_read(view, state_selection(history, "t", **kw), "read")

    latest = plan()
    assert latest.compaction.record is big and direct(latest) == ["r6"] and latest.on_base == 1
    assert plan(max_sequence=4).compaction.record is big  # pinned before it, but it fits
    assert plan(max_sequence=3).compaction.record is small
    assert plan(as_of=day(1)).compaction.record is small
    assert plan(as_of=day(0.5)).compaction is None  # r2 is not in that read
    assert direct(plan(as_of=day(0.5))) == ["r1"]


def test_a_backfill_ordered_inside_a_compaction_is_merged_by_row_order():
    log = Log()
    log.data(0, True)
    log.data(5, False)
    compaction = log.compact()
    log.data(3, False, name="backfill")  # stamped before r2, committed after the compaction
    view = log.view()
    plan = plan_read(view, state_selection(view.table_revisions("t"), "t"), "read")
    assert plan.compaction.record is compaction and direct(plan) == ["backfill"]
    assert not plan.base_is_prefix  # the merge must order rows, not trust the base


def test_change_reads_skip_compactions_unless_their_revisions_are_gone():
    log = Log()
    log.data(0, True)  # 1
    log.data(1, False)  # 2
    log.data(2, False)  # 3
    log.compact()  # 4
    log.data(3, False)  # 5
    view = log.view()
    selection = changes_by_sequence(view.table_revisions("t"), "t", 2)
    plan = plan_read(view, selection, "changes")
    assert plan.compaction is None and direct(plan) == ["r3", "r5"]
    log.vacuum([3], horizon=4)
    view = log.view()
    with pytest.raises(RetentionError, match=r"changes since 2 needs revision 'r3' \(sequence 3"):
        plan_read(view, changes_by_sequence(view.table_revisions("t"), "t", 2), "changes since 2")
    plan = plan_read(view, changes_by_sequence(view.table_revisions("t"), "t", 3), "changes")
    assert plan.compaction is None and direct(plan) == ["r5"]


def test_a_read_that_needs_removed_files_names_the_revision_and_the_horizon():
    log = Log()
    log.data(0, True)
    log.data(1, False)
    log.data(2, False)
    log.compact()  # c4: r1 r2 r3
    log.vacuum([2, 3], horizon=4)
    view = log.view()
    history = view.table_revisions("t")
    assert plan_read(view, state_selection(history, "t"), "read").compaction is not None
    assert plan_read(view, state_selection(history, "t", as_of=day(0)), "x").compaction is None
    with pytest.raises(RetentionError, match=r"as of.*needs revision 'r2'.*horizon was sequence 4"):
        plan_read(view, state_selection(history, "t", as_of=day(1.5)), "read as of")
    with pytest.raises(RetentionError, match=r"at 2 needs revision 'r2'"):
        plan_read(view, state_selection(history, "t", max_sequence=2), "read at 2")


# -- retention --------------------------------------------------------------------------------


def test_the_horizon_is_the_newest_commit_before_now_minus_retain():
    log = Log()
    log.data(5, True)  # committed day 101
    log.data(2, False)  # 102
    log.compact()  # 103
    log.data(9, False)  # 104
    assert retention_horizon(log.records, day(110), timedelta(days=7)) == Horizon(3, day(5))
    assert retention_horizon(log.records, day(110), timedelta(days=20)) == Horizon(0, None)
    late = dataclasses.replace(log.records[1], committed_at=day(103.5))  # a slow clock
    records = [log.records[0], late, *log.records[2:]]
    assert retention_horizon(records, day(110), timedelta(days=7)).sequence == 1


def judge(log: Log, horizon: int, **kw) -> list[str]:
    return names(removable(log.view(), Horizon(horizon, None), **kw))


def test_vacuum_removes_voided_and_compacted_revisions_only():
    log = Log()
    log.data(0, True)  # 1 r1: voided by r3
    log.data(1, False)  # 2 r2: voided by r3
    log.data(2, True)  # 3 r3: the major of the state
    log.data(3, False)  # 4 r4: held by c5
    log.compact()  # 5 c5
    log.data(4, False)  # 6 r6
    assert judge(log, 6) == ["r2", "r4"]
    assert judge(log, 6, keep_majors=False) == ["r1", "r2", "r4"]  # r3 is the newest base
    assert judge(log, 4) == ["r2", "r4"]  # c5 committed after the horizon still fits
    assert judge(log, 2) == []  # r1 governs reads at sequence 2
    assert judge(log, 6, consumer_positions={"t": [3]}) == ["r2"]  # r4 is its next change
    assert judge(log, 6, consumer_positions={"t": [1]}) == ["r2", "r4"]  # r3: a reset


def test_vacuum_keeps_revisions_a_later_major_merges():
    log = Log()
    log.data(0, True)  # 1
    log.data(2, False)  # 2
    log.data(4, False)  # 3
    log.compact()  # 4: r1 r2 r3
    log.data(3, True, name="late-major")  # 5: stamped between r2 and r3, committed later
    assert judge(log, 4) == ["r2"]  # r3 is merged on top of late-major
    assert judge(log, 5) == ["r2", "c4"]  # r3 stays: late-major's reads merge it


def test_only_the_compaction_every_read_uses_stays():
    log = Log()
    log.data(0, True)
    log.data(1, False)
    log.compact()  # c3
    log.data(2, False)
    log.compact()  # c5
    log.data(3, False)
    assert judge(log, 6) == ["r2", "c3", "r4"]
    assert judge(log, 4) == ["r2", "c3", "r4"]  # c5, committed later, fits reads at 4 too
    assert judge(log, 3) == ["r2"]  # c5 does not fit reads at 3: c3 serves them


def test_a_major_stamped_before_removed_data_is_refused():
    log = Log()
    log.data(0, True)
    log.data(5, False)
    log.compact()
    log.vacuum([2], horizon=3)
    view = log.view()
    with pytest.raises(RetentionError, match="stamp the major at or after 2020-01-06"):
        check_major_after_vacuum(view, "t", day(4))
    check_major_after_vacuum(view, "t", day(5))
    check_major_after_vacuum(view, "other table", day(0))
