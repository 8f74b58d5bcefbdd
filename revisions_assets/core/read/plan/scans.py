"""How a selection is read: the files to scan and the merge program, as one frozen plan.

A ``MergePlan`` is everything an executor (Spark or Polars, ``read/execute/``) needs and
nothing it must look up: the read schema, the id columns, the base (the governing major's
files, or a compaction that holds the state of several revisions) and the revisions read
on top of it, each as a ``ScanTask`` with its files, its own schema and its rank in the
merge. "Latest row per entity wins": rows of a later task win; a tombstone removes the
entity. A change read also names the revisions whose entities it reports
(``only_ids_of``).

Compactions and vacuums never change *which* revisions a read means, only *how* it reads
them: a read uses the compaction that replaces the most of its revisions (the docs'
lifecycle page), and a read that needs files a vacuum removed raises ``RetentionError``
instead of returning partial data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ...errors import RetentionError
from ...log.records import FileStats, Revision, TableWrite
from ...log.view import Compaction, LogView
from .schema import Schema, parse_schema, read_schema, table_schema
from .selection import Selection, head_state


@dataclass(frozen=True)
class ScanTask:
    """The files one log entry wrote to the table a plan reads.

    ``order``: the index of the revision in the plan's merge (later wins; -1: older than
    the merge, the state part of a change read). A compaction's rows carry the sequence of
    the revision that wrote each of them (``is_compaction``): their order follows from it.
    ``rows`` and ``bytes``: of ``files`` (a pruned task reads some of its write's files,
    ``pruning.py``); ``tombstones``: at most that many.
    """

    entry: str
    sequence: int
    timestamp: datetime
    files: tuple[str, ...]
    schema: Schema
    rows: int
    tombstones: int
    bytes: int
    order: int
    is_compaction: bool = False
    #: each file's statistics as the log recorded them (aligned with ``files``; None: not
    #: recorded, an entry of an earlier release): a plan prunes files by their id ranges
    #: (``pruning.py``)
    file_stats: tuple[FileStats, ...] | None = None


@dataclass(frozen=True)
class MergePlan:
    """One read of one table: scan ``base`` and ``newer``, keep the latest row per entity.

    ``merge``: every revision whose rows compete, in key order (what ``_revision`` columns
    name). ``newer``: the tasks read on top of the base, in key order. ``base_is_prefix``:
    every row of the base is older than every newer row, so "the base loses against any
    newer row of the entity" holds (an anti-join suffices); otherwise rows are ranked by
    their revision's order. ``only_ids_of``: report only the entities these wrote.
    ``looks_up``: the read's filters allow at most ``pruning.LOOKUP_IDS`` ids (its merge holds few
    ids, however large the table).
    """

    table: str
    what: str
    id_columns: tuple[str, ...]
    schema: Schema
    merge: tuple[Revision, ...]
    base: ScanTask
    newer: tuple[ScanTask, ...]
    base_is_prefix: bool
    only_ids_of: tuple[ScanTask, ...] | None = None
    compaction: Compaction | None = None
    looks_up: bool = False

    @property
    def tasks(self) -> tuple[ScanTask, ...]:
        """Every task, the base first."""
        return (self.base, *self.newer)

    @property
    def scanned(self) -> list[ScanTask]:
        """Every write the plan scans (what the file gate checks)."""
        return [*self.tasks, *(self.only_ids_of or ())]

    @property
    def files(self) -> list[tuple[str, str]]:
        """Every data file the plan scans, with the entry that wrote it."""
        return list(dict.fromkeys((t.entry, f) for t in self.scanned for f in t.files))

    @property
    def tombstones(self) -> int:
        return sum(t.tombstones for t in self.tasks)

    @property
    def on_base(self) -> int:
        """How many revisions are merged on top of the base (major or compaction)."""
        return len(self.newer)


def scan_task(revision: Revision, table: str, order: int) -> ScanTask:
    write = revision.tables[table]
    return _task(revision, write, order, is_compaction=False)


def compaction_task(compaction: Compaction) -> ScanTask:
    """The files of a compaction: its rows carry the sequence that wrote each (order -1)."""
    return _task(compaction.record, compaction.write, -1, is_compaction=True)


def _task(record: Revision, write: TableWrite, order: int, *, is_compaction: bool) -> ScanTask:
    return ScanTask(
        entry=record.name,
        sequence=record.sequence,
        timestamp=record.timestamp,
        files=tuple(write.files),
        schema=parse_schema(write.schema_json),
        rows=write.rows,
        tombstones=write.tombstones,
        bytes=write.bytes,
        order=order,
        is_compaction=is_compaction,
        file_stats=write.file_stats,
    )


def best_compaction(view: LogView, selection: Selection) -> Compaction | None:
    """The compaction (with its files) replacing the most revisions of the selection's
    state; None if no compaction of the table fits it."""
    history = view.table_revisions(selection.table)
    usable = [
        c
        for c in view.compactions(selection.table)
        if not view.is_removed(c.sequence)
        and c.usable_for(selection.major, selection.head_sequence, selection.as_of, history)
        and (selection.known_at is None or c.known_by(history, selection.known_at))
    ]
    return max(usable, key=lambda c: (c.covers.revisions, c.sequence), default=None)


def plan_merge(view: LogView, selection: Selection, what: str) -> MergePlan:
    """How to read ``selection``; RetentionError when it needs files a vacuum removed.

    A state read (or a reset) uses the best compaction as its base and reads the rest of
    its merge directly. A change read reads its revisions directly (they are few, and
    their ids are the ones it reports); only when some of them are gone does it take its
    state part from a compaction. ``what`` describes the read in the error message.
    """
    merge = selection.merge
    changes = not selection.is_reset
    base = None
    if not changes or any(view.is_removed(r.sequence) for r in merge):
        base = best_compaction(view, selection)
    direct = tuple(r for r in merge if base is None or not base.contains(r))
    # a change read reports the entities of its window only: a base holds all of them
    only = selection.window if selection.restrict or (changes and base is not None) else None
    for revision in (*direct, *(only or ())):
        vacuum = view.removed_by(revision.sequence)
        if vacuum is not None:
            raise RetentionError(retention_message(what, revision, vacuum))
    return _plan(selection, what, base, direct, only)


def major_schema(view: LogView, table: str) -> Schema:
    """The schema of the major governing the default read of ``table``."""
    return table_schema((head_state(view, table).major,), table)


def _plan(
    selection: Selection,
    what: str,
    base: Compaction | None,
    direct: Sequence[Revision],
    only: Sequence[Revision] | None,
) -> MergePlan:
    table = selection.table
    order = {r.sequence: n for n, r in enumerate(selection.merge)}
    tasks = [scan_task(r, table, order[r.sequence]) for r in direct]
    if base is not None:
        first = compaction_task(base)
        newer = tasks
        writes = [base.write, *(r.tables[table] for r in direct)]
        prefix = all(r.timestamp >= base.covers.timestamp for r in direct)
    else:
        first, newer = tasks[0], tasks[1:]
        writes = [r.tables[table] for r in direct]
        prefix = True
    return MergePlan(
        table=table,
        what=what,
        id_columns=tuple(writes[0].id_columns),
        schema=read_schema(writes),
        merge=selection.merge,
        base=first,
        newer=tuple(newer),
        base_is_prefix=prefix,
        only_ids_of=(
            tuple(scan_task(r, table, order.get(r.sequence, -1)) for r in only)
            if only is not None
            else None
        ),
        compaction=base,
    )


def retention_message(what: str, revision: Revision, vacuum: Revision) -> str:
    mark = vacuum.vacuum
    assert mark is not None
    horizon = f"sequence {mark.horizon_sequence}"
    if mark.horizon_timestamp is not None:
        horizon += f", time {mark.horizon_timestamp.isoformat()}"
    return (
        f"{what} needs revision {revision.name!r} (sequence {revision.sequence}, "
        f"{revision.timestamp.isoformat()}), whose files vacuum {vacuum.name!r} "
        f"(sequence {vacuum.sequence}) removed; its retention horizon was {horizon}: "
        "read at or after the horizon"
    )
