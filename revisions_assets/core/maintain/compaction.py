"""Compaction: the state of a table's default read, written as one log entry.

``Compactor`` writes, per table, the state of the default read at the head (tombstones
kept, every row tagged with the sequence of the revision that wrote it) into a few files
in the engine's layout (clustered by the ids: disjoint id ranges, sorted, row groups sized
for streaming: ``write/file_size.py``), and commits a ``compaction`` entry recording which
revisions it holds. A table is compacted when revisions lie on its base, or when its base's
files were written before that layout or before the log recorded their stats (an earlier
release's major or compaction alone). Reads that contain all of those revisions use it as
their base (``read/plan/scans.py``). This module only
runs Spark jobs and commits; what a compaction may serve is decided by the pure rules of
``read/plan/``.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import CommitConflictError, InvalidArgumentError, RetentionError
from ..log.records import (
    COMPACTION,
    CompactedRange,
    Revision,
    TableWrite,
    VacuumMark,
)
from ..log.revision_log import RevisionLog
from ..log.view import LogView
from ..read.execute.files import FileGate
from ..read.execute.frames import Rows
from ..read.execute.spark import SparkExecutor
from ..read.plan.refs import find_revision
from ..read.plan.requests import plan_state
from ..read.plan.scans import MergePlan, plan_merge
from ..read.plan.schema import to_struct_json
from ..read.plan.selection import Selection, state_selection
from ..read.scan import DatasetSnapshot
from ..storage.base import Storage
from ..storage.footer import StoredFile
from ..timeutil import now_utc
from ..write.conflicts import ReadSet
from ..write.file_size import compaction_needed
from ..write.transaction import (
    append_entry,
    claim_folder,
    release_folder,
    upkeep,
    write_observed,
    written_files,
)
from .defaults import DEFAULT_TARGET_FILE_BYTES
from .integrity import write_findings
from .vacuum import vacuum_entry

log = logging.getLogger(__name__)

#: what an interrupted write leaves: claims and temporary files of create/replace


@dataclass(frozen=True)
class _TableJob:
    table: str
    selection: Selection
    plan: MergePlan


class Compactor:
    """One compaction: the state of every table past its base, in one new revision folder."""

    def __init__(
        self,
        storage: Storage,
        revision_log: RevisionLog,
        executor: SparkExecutor,
        gate: FileGate,
    ):
        self.storage = storage
        self.log = revision_log
        self.executor = executor
        self.gate = gate

    def run(
        self, tables: Sequence[str] | None, target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES
    ) -> Revision | None:
        """Compact ``tables`` (None: every table); None when none has anything on its base."""
        self.log.refresh()
        view = self.log.view()
        jobs = []
        snapshot = DatasetSnapshot(self.storage.uri, view)
        for table in tables if tables is not None else view.tables():
            state = plan_state(snapshot, table)  # what a default read of the table reads
            if compaction_needed(self.storage, state.rows):
                jobs.append(_TableJob(table, state.selection, state.rows))
        if not jobs:
            return None
        return self._commit(jobs, target_file_bytes, view.head)

    def _commit(
        self,
        jobs: Sequence[_TableJob],
        target_file_bytes: int,
        snapshot: int,
        rebuilds: Revision | None = None,
    ) -> Revision | None:
        """Write the state of each job, planned on the log at sequence ``snapshot``, into a
        new folder and commit it as one entry; CommitConflictError, committing nothing, when
        a purge of one of its tables landed since (it read the rows the purge erased)."""
        name = f"compaction-{uuid.uuid4().hex}"
        read = ReadSet(
            f"compaction {name!r}",
            "run the compaction again",
            snapshot,
            read=frozenset(job.table for job in jobs),
            folders=frozenset({name}),
            claimed_at=self.log.head,
        )
        token = claim_folder(self.storage, name)
        try:
            writes = {job.table: self._write(name, job, target_file_bytes) for job in jobs}
            record = append_entry(
                self.log,
                lambda v: self._entry(v, name, jobs, writes, snapshot, rebuilds),
                f"compaction {name!r}",
                read,
            )
        except BaseException as exc:
            release_folder(self.storage, name, token)
            self._explain_vanished_inputs(jobs, exc)
            raise
        if record is None:  # another compactor committed the same states meanwhile
            release_folder(self.storage, name, token)
            return None
        for table in set(writes) - set(record.tables):
            self.storage.delete_tree(f"{name}/{table}")
        upkeep(self.log, record)
        log.info(
            "%s: compaction %s (sequence %d) of %s",
            self.storage.uri,
            name,
            record.sequence,
            ", ".join(f"{t}: {r.revisions} revisions" for t, r in record.replaces.items()),
        )
        return record

    def rebuild(
        self, ref: str | int, target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES
    ) -> Revision:
        """A new compaction entry holding the state the compaction ``ref`` (a name, a unique
        prefix of one, or a sequence) holds, written again from its sources: the revisions
        it holds, or an intact smaller compaction of them. Reads then use the new one (it
        holds as many revisions and is newer); a vacuum past the retention horizon removes
        the old one. RetentionError, committing nothing, when a vacuum removed a source.
        """
        self.log.refresh()
        view = self.log.view()
        damaged = find_revision(view.records, ref)
        if damaged.kind != COMPACTION:
            raise InvalidArgumentError(
                f"{self.storage.uri}: {damaged.kind} {damaged.name!r} (sequence "
                f"{damaged.sequence}) is not a compaction: only compactions are rebuilt"
            )
        if view.is_removed(damaged.sequence):
            raise InvalidArgumentError(
                f"{self.storage.uri}: compaction {damaged.name!r} was removed by vacuum "
                f"{view.removed_by(damaged.sequence).name!r}: nothing reads it any more"
            )
        sources = self._without_damaged_compactions(view, damaged)
        jobs = []
        for table, covers in damaged.replaces.items():
            selection = state_selection(
                view.table_revisions(table), table, max_sequence=covers.through
            )
            what = (
                f"{self.storage.uri}: the rebuild of compaction {damaged.name!r}, table {table!r}"
            )
            try:
                plan = plan_merge(sources, selection, what)
            except RetentionError as exc:
                raise RetentionError(
                    f"{exc}; it cannot be rebuilt: restore its files from a backup, or "
                    f"commit a new major of table {table!r}"
                ) from None
            jobs.append(_TableJob(table, selection, plan))
        record = self._commit(jobs, target_file_bytes, view.head, rebuilds=damaged)
        assert record is not None  # a rebuild always commits
        return record

    def _without_damaged_compactions(self, view: LogView, damaged: Revision) -> LogView:
        """The view as if a vacuum had removed the files of ``damaged`` and of every other
        damaged compaction of its tables (``integrity``): what their damage amounts to.
        Plans on it read the state from the intact compactions and the revisions."""
        checked: dict[str, StoredFile] = {}
        unreadable = {damaged.sequence} | {
            c.sequence
            for table in damaged.replaces
            for c in view.compactions(table)
            if not view.is_removed(c.sequence)
            and write_findings(self.storage, c.record, table, checked)
        }
        mark = VacuumMark(tuple(sorted(unreadable)), view.head, None, 0.0)
        return LogView([*view.logged, vacuum_entry(f"rebuild-{damaged.name}", view.head + 1, mark)])

    def _write(self, name: str, job: _TableJob, target_file_bytes: int) -> TableWrite:
        """Write the state of one table: its files pass the file gate, and the job that
        writes checks every row it reads against its stored hash (no second pass over the
        data): a file whose values changed since they were committed fails it, naming the
        file, and nothing is committed."""
        plan, table = job.plan, job.table
        rows = Rows(keep_deleted=True, with_sequence=True, with_hash=True)
        self.gate.check(table, plan.scanned)
        executor = self.executor.checking_hashes()
        df = executor.merge(plan, rows)
        in_bytes = sum(t.bytes for t in plan.tasks)
        in_rows = sum(t.rows for t in plan.tasks)
        files = max(1, math.ceil(in_bytes / max(target_file_bytes, 1)))
        prefix = f"{name}/{table}"
        into = f"compaction of table {table!r} into {self.storage.uri}/{prefix}"
        with executor.failures(table, plan.files, into):
            stats = write_observed(
                df,
                self.storage.spark_uri(prefix),
                max_records_per_file=max(1, math.ceil(in_rows / files)),
                sort_by=plan.id_columns,
                cluster=True,  # files of disjoint id ranges, cut at about the target size
            )
        schema_json = to_struct_json(plan.schema)
        written = written_files(self.storage, prefix, plan.id_columns, schema_json)
        newest = max(plan.merge, key=lambda r: r.sequence)
        return TableWrite(
            id_columns=plan.id_columns,
            schema_json=schema_json,
            version=newest.tables[table].version,
            rows=stats["rows"],
            tombstones=stats["tombstones"],
            files=written.files,
            bytes=written.bytes,
            file_stats=written.stats,
        )

    def _entry(
        self,
        view: LogView,
        name: str,
        jobs: Sequence[_TableJob],
        writes: Mapping[str, TableWrite],
        snapshot: int,
        rebuilds: Revision | None = None,
    ) -> Revision | None:
        """The compaction entry at the current head, without the tables whose state another
        compaction committed meanwhile (a rebuild replaces the one it rebuilds, whatever
        else holds the state). A compaction describes a fixed set of revisions: later
        commits can make it unused, never wrong; only a purge can make its rows wrong, which
        ``append_entry`` checks (``conflicts.py``). It records the ``snapshot`` it was
        planned on, so reads can tell that no purge landed while it was written."""
        covers = {}
        for job in jobs:
            merge = job.selection.merge
            covered = CompactedRange(
                major=job.selection.major.sequence,
                through=max(r.sequence for r in merge),
                revisions=len(merge),
                timestamp=max(r.timestamp for r in merge),
                read_at=snapshot,
            )
            others = [
                c
                for c in view.compactions(job.table)
                if c.record is not rebuilds and c.missed_purge is None
            ]
            if rebuilds is not None or not any(c.covers == covered for c in others):
                covers[job.table] = covered
        if not covers:
            return None
        versions = {writes[t].version for t in covers}
        return Revision(
            name=name,
            timestamp=max(c.timestamp for c in covers.values()),
            is_major=False,
            sequence=view.head + 1,
            committed_at=now_utc(),
            tables={t: writes[t] for t in covers},
            version=versions.pop() if len(versions) == 1 else None,
            data_change=False,
            properties={"rebuilds": rebuilds.name} if rebuilds is not None else {},
            kind=COMPACTION,
            replaces=covers,
        )

    def _explain_vanished_inputs(self, jobs: Sequence[_TableJob], exc: BaseException) -> None:
        """A failed compaction whose inputs a concurrent vacuum removed gives up cleanly."""
        if not isinstance(exc, Exception) or isinstance(exc, CommitConflictError):
            return
        try:
            self.log.refresh()
        except Exception:  # the original failure is the one to report
            return
        view = self.log.view()
        for job in jobs:
            inputs = [t.sequence for t in job.plan.tasks]
            gone = [s for s in inputs if view.is_removed(s)]
            if gone:
                raise CommitConflictError(
                    f"{self.storage.uri}: compaction of table {job.table!r} gave up: a "
                    f"concurrent vacuum removed the files of sequence(s) {gone} it was "
                    "reading; nothing was committed"
                ) from exc


__all__ = ["DEFAULT_TARGET_FILE_BYTES", "Compactor"]
