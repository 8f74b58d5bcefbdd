"""Vacuum (docs/concepts/lifecycle.md): remove the files no allowed read needs, after one log entry
marks them.

``Vacuum`` commits a ``vacuum`` entry marking the revisions no allowed read needs
(``retention.removable``) and recording everything it is about to delete
(``DeletedFiles``), then deletes their files, the folders of failed writers and
temporary files past a grace period, and the files purges at or before the retention
horizon swapped out (``log.view``), each data file it deletes on its own with its ``.crc``
sidecar (Hadoop's checksum file). A crash between the two leaves marked revisions whose
files the next vacuum deletes. Whatever it deletes, its entry records. What is kept is
decided by the pure rules of ``retention``; this module only checks, lists and deletes
files, and commits.

It never makes damage worse: before deleting what something else stands for, it reads
the footers of the files that stand for it (``integrity``): per table, the files a read
at the retention horizon uses instead of the revisions it removes (the compaction that
holds them, the major that voids them); per file a purge swapped out, the files that
replaced it. A damaged one keeps everything it stands for, and the report says why
(``findings``). It never deletes a file a live entry (one no vacuum removed) references,
nor a folder that holds files a live entry misses (``misplaced``: a renamed revision
folder is the only copy of its data); and while ``verify`` reports an error it deletes no
orphan folder at all. It refuses to run on a log that lost its newest entries
(``revision_log.lost_entries``, a consumer's position past the head): it would commit on
top of them; and on a broken chain of digests (a rewritten entry, whose folder would look
like an orphan).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..errors import CorruptLogError, NoMajorRevisionError, RetentionError
from ..log.consumers import consumer_position
from ..log.health import REPAIR_HINT
from ..log.layout import CLAIM_FILE, LOG_DIR, holds_log, is_temp_name
from ..log.records import (
    VACUUM,
    DeletedFiles,
    Revision,
    VacuumMark,
)
from ..log.revision_log import RevisionLog, lost_entries, lost_head_message
from ..log.view import LogView
from ..read.plan.scans import plan_merge
from ..read.plan.selection import state_selection
from ..storage.base import FileInfo, Storage
from ..storage.footer import StoredFile
from ..timeutil import now_utc
from .defaults import DEFAULT_GRACE
from .findings import Finding
from .integrity import as_replaced, rebuilt, write_findings
from .misplaced import find_misplaced
from .retention import Horizon, removable, retention_horizon
from .verify import verify_storage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VacuumReport:
    """What a vacuum removed (or, with ``dry_run``, would remove).

    ``revisions``: names of the log entries whose files go (the ones this vacuum marks,
    and ones an interrupted vacuum marked earlier); ``purged_files``: files that purges
    at or before the horizon swapped out (the last copies of purged rows); ``orphans``:
    folders no log entry references (failed or killed writers); ``temporary_files``:
    leftovers of interrupted writes; ``folders``: every folder removed;
    ``files``/``bytes``: every file removed, ``paths`` their paths (sorted).
    ``entry``: the vacuum entry committed (None on a dry run or when nothing goes); it
    records the same counts, folders and purged files.
    ``horizon``: the retention horizon the revisions were judged by. ``kept``: names of
    the entries it would have removed but keeps because a file that stands for them is
    damaged, and ``findings`` that damage with its repair (``kept_files``: purged files
    kept for the same reason). ``orphans_kept``: orphan folders it leaves because
    ``verify`` reports an error (in ``findings``): one may hold what the damage misses.
    """

    dry_run: bool
    horizon: Horizon
    revisions: tuple[str, ...]
    purged_files: tuple[str, ...]
    orphans: tuple[str, ...]
    temporary_files: tuple[str, ...]
    folders: tuple[str, ...]
    files: int
    bytes: int
    entry: Revision | None = None
    paths: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    kept_files: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    orphans_kept: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Listing:
    """The dataset root's files, grouped by what vacuum does with them."""

    files: list[FileInfo]
    by_folder: dict[str, list[FileInfo]]
    temporary: list[FileInfo]

    @classmethod
    def of(cls, storage: Storage) -> _Listing:
        files = storage.list_files("")
        by_folder: dict[str, list[FileInfo]] = {}
        temporary = []
        for info in files:
            parts = info.path.split("/")
            if is_temp_name(parts[-1]) and (len(parts) == 1 or parts[0] == LOG_DIR):
                temporary.append(info)  # .description.parquet.*.tmp, _log/.*.json.*.tmp
            elif parts[0] == LOG_DIR and parts[-1].startswith("."):
                temporary.append(info)  # e.g. an S3 conditional-write probe left behind
            elif len(parts) > 1 and parts[0] != LOG_DIR:
                by_folder.setdefault(parts[0], []).append(info)
        return cls(files, by_folder, temporary)

    def sidecars(self, files: Iterable[FileInfo]) -> list[FileInfo]:
        """The ``.<name>.crc`` checksum files Hadoop writes beside ``files``."""
        listed = {f.path: f for f in self.files}
        out = []
        for info in files:
            folder, _, name = info.path.rpartition("/")
            sidecar = listed.get(f"{folder}/.{name}.crc" if folder else f".{name}.crc")
            if sidecar is not None:
                out.append(sidecar)
        return out


@dataclass(frozen=True)
class _Plan:
    """What one vacuum deletes, judged against one view of the log."""

    marked: list[Revision]  # newly removed by this vacuum's entry
    gone: list[Revision]  # marked, and marked by an interrupted vacuum
    files: list[FileInfo]  # of ``gone`` and purged, in ``folders`` or loose
    folders: list[str]
    purged: list[FileInfo]
    orphans: list[str]
    orphan_files: list[FileInfo]
    temporary: list[FileInfo]
    kept: list[Revision]  # would go, but a file that stands for them is damaged
    kept_files: list[str]  # purged files whose replacements are damaged
    findings: list[Finding]
    orphans_kept: list[str]  # orphans left while verify reports an error

    @property
    def every(self) -> list[FileInfo]:
        return [*self.files, *self.orphan_files, *self.temporary]

    def deleted(self, view: LogView, horizon: int) -> DeletedFiles:
        """The audit record of this plan."""
        folders = set(self.folders) | set(self.orphans)
        loose = sorted(f.path for f in self.every if f.path.split("/", 1)[0] not in folders)
        swapped = view.superseded(horizon)
        purged: dict[int, list[str]] = {}
        for info in sorted(self.every, key=lambda f: f.path):
            if info.path in swapped:
                purged.setdefault(swapped[info.path].purge, []).append(info.path)
        return DeletedFiles(
            files=len(self.every),
            bytes=sum(f.size for f in self.every),
            folders=tuple(sorted(folders)),
            loose=tuple(loose),
            purged={s: tuple(paths) for s, paths in purged.items()},
        )


def consumer_positions(
    tables: Iterable[str],
    root: str,
    consumers: Sequence[Sequence[Revision]],
    keep_after_sequence: int | None = None,
) -> dict[str, list[int]]:
    """Per table of the dataset at ``root``, the positions whose next change read a vacuum
    keeps: those the ``consumers`` (their logs) recorded in it, and ``keep_after_sequence``."""
    positions = {}
    for table in tables:
        found = [consumer_position(records, root, table) for records in consumers]
        if keep_after_sequence is not None:
            found.append(keep_after_sequence)
        positions[table] = found
    return positions


class Vacuum:
    """One vacuum run (see the module docstring and ``retention``)."""

    def __init__(self, storage: Storage, revision_log: RevisionLog):
        self.storage = storage
        self.log = revision_log
        self._checked: dict[str, StoredFile] = {}  # footers read, by path (immutable files)

    def run(
        self,
        *,
        retain: timedelta,
        keep_majors: bool,
        dry_run: bool,
        consumer_positions: Mapping[str, Sequence[int]],
        grace: timedelta,
        now: datetime,
    ) -> VacuumReport:
        if not dry_run:  # the commit path loads PySpark: a dry run needs only the base install
            from ..write.transaction import append_entry, upkeep

        records = self.log.refresh()
        self.log.refuse_broken_chain()  # a rewritten entry: its folder would look orphaned
        self._refuse_lost_head(records, consumer_positions)
        horizon = retention_horizon(records, now, retain)
        listing = _Listing.of(self.storage)
        cutoff = now - grace

        errors: list[Finding] = []  # verify's: while there are any, no orphan goes

        def plan(view: LogView) -> _Plan:
            marked = removable(
                view, horizon, keep_majors=keep_majors, consumer_positions=consumer_positions
            )
            return self._plan(view, marked, horizon, listing, cutoff, errors)

        view = self.log.view()
        log.info(
            "%s: vacuum%s: horizon %s, %d entries, %d folders listed",
            self.storage.uri,
            " (dry run)" if dry_run else "",
            horizon.describe(),
            view.head,
            len(listing.by_folder),
        )
        entry = None
        current = plan(view)
        if current.orphans:
            errors += self._errors()
            if errors:
                current = plan(view)
        if (current.marked or current.every) and not dry_run:

            def build(v: LogView) -> Revision | None:
                nonlocal current  # what is deleted is judged against the view committed on
                current = plan(v)
                return self._entry(v, current, horizon, retain)

            entry = append_entry(self.log, build, "a vacuum entry")
        report = VacuumReport(
            dry_run=dry_run,
            horizon=horizon,
            revisions=tuple(r.name for r in current.gone),
            purged_files=tuple(f.path for f in current.purged),
            orphans=tuple(current.orphans),
            temporary_files=tuple(f.path for f in current.temporary),
            folders=tuple(sorted({*current.folders, *current.orphans})),
            files=len(current.every),
            bytes=sum(f.size for f in current.every),
            entry=entry,
            paths=tuple(sorted(f.path for f in current.every)),
            kept=tuple(r.name for r in current.kept),
            kept_files=tuple(current.kept_files),
            findings=tuple(current.findings),
            orphans_kept=tuple(current.orphans_kept),
        )
        if not dry_run:
            self._delete(current)
            if entry is not None:
                upkeep(self.log, entry)
        log.info(
            "%s: vacuum%s: %d revisions, %d orphan folders, %d temporary files: %d files, "
            "%d bytes%s%s",
            self.storage.uri,
            " (dry run, nothing deleted)" if dry_run else "",
            len(report.revisions),
            len(report.orphans),
            len(report.temporary_files),
            report.files,
            report.bytes,
            f"; kept {len(report.kept)} entries whose stand-ins are damaged" if report.kept else "",
            f"; kept {len(report.orphans_kept)} orphan folders: verify reports errors"
            if report.orphans_kept
            else "",
        )
        return report

    def _errors(self) -> list[Finding]:
        """The errors ``verify`` reports (its upstream checks aside: they concern what
        this dataset consumed, not its storage)."""
        found = verify_storage(self.storage, upstreams=False, checked=self._checked)
        return [f for f in found if f.severity == "error"]

    def _refuse_lost_head(
        self, records: Sequence[Revision], positions: Mapping[str, Sequence[int]]
    ) -> None:
        """Evidence of entries committed past the head: vacuum would commit on top of them
        and might delete their folders as orphans."""
        lost = lost_entries(self.storage, records)
        if lost:
            raise CorruptLogError(lost_head_message(self.storage.uri, len(records), lost))
        for table, found in sorted(positions.items()):
            ahead = [p for p in found if p > len(records)]
            if ahead:
                raise CorruptLogError(
                    f"{self.storage.uri}: a consumer recorded position {max(ahead)} in table "
                    f"{table!r}, past the log's last entry {len(records)}: the entries after "
                    f"it were committed and are lost; restore them from a backup before a "
                    f"vacuum; {REPAIR_HINT}"
                )

    def _plan(
        self,
        view: LogView,
        marked: Sequence[Revision],
        horizon: Horizon,
        listing: _Listing,
        cutoff: datetime,
        errors: Sequence[Finding],
    ) -> _Plan:
        """What to delete against ``view``: the files of ``marked`` and of entries an
        interrupted vacuum marked, purged files, orphans (none while ``errors``) and
        temporary files, less what a damaged file stands for, every file a live entry
        references and every folder that holds files a live entry misses."""
        marked_now = {r.sequence for r in marked}
        staying = _staying(view, set(view.removed) | marked_now)
        pending = [  # marked by an earlier vacuum that died before deleting everything
            view.records[s - 1]
            for s in sorted(view.removed)
            if s not in marked_now and _stored([view.records[s - 1]], staying, listing)[0]
        ]
        stood_for, findings = self._stood_for(view, [*marked, *pending], horizon)
        kept = [r for r in marked if r.sequence in stood_for]
        marked = [r for r in marked if r.sequence not in stood_for]
        pending = [r for r in pending if r.sequence not in stood_for]
        leaving = ({*view.removed} | {r.sequence for r in marked}) - stood_for
        misplaced = find_misplaced(
            self.storage,
            view.records,
            view.removed,
            listing.files,
            self._checked,
            known=view.superseded(view.head),
        )
        findings += [m.finding(self.storage, {f.path for f in listing.files}) for m in misplaced]
        held = {m.folder for m in misplaced}  # the only copy of what a live entry misses
        staying = _staying(view, leaving) | held
        keep = {f for r in view.records if r.sequence not in leaving for f in view.files_of(r)}
        keep |= {source for m in misplaced for source, _ in m.moves}
        gone = [*marked, *pending]
        files, folders = _stored(gone, staying, listing)
        files = [f for f in files if f.path not in keep]
        swapped = view.superseded(horizon.sequence)
        purged, kept_files = [], []
        for folder in sorted(staying & set(listing.by_folder)):
            for info in listing.by_folder[folder]:
                owner = swapped.get(info.path)
                if owner is None or info.path in keep:
                    continue
                problems = self._problems(view.records[owner.entry - 1], owner.table)
                if problems:  # what replaced it is damaged: it may be the last good copy
                    kept_files.append(info.path)
                    findings += [f for f in problems if f not in findings]
                else:
                    purged.append(info)
        files += purged
        whole = set(folders)
        files += listing.sidecars(f for f in files if f.path.split("/", 1)[0] not in whole)
        orphans = [o for o in self._orphans(view, listing, cutoff) if o not in held]
        orphans_kept = orphans if errors else []
        if errors:
            orphans = []
            findings += [f for f in errors if f not in findings]
        left_inside = [  # e.g. a claim's temporary file in a committed revision's folder
            f
            for folder in staying & set(listing.by_folder)
            for f in listing.by_folder[folder]
            if is_temp_name(f.path.rsplit("/", 1)[-1])
        ]
        temporary = [f for f in [*listing.temporary, *left_inside] if _older(f, cutoff)]
        return _Plan(
            marked=marked,
            gone=gone,
            files=files,
            folders=folders,
            purged=purged,
            orphans=orphans,
            orphan_files=[f for o in orphans for f in listing.by_folder[o]],
            temporary=temporary,
            kept=kept,
            kept_files=kept_files,
            findings=findings,
            orphans_kept=orphans_kept,
        )

    def _stood_for(
        self, view: LogView, leaving: Sequence[Revision], horizon: Horizon
    ) -> tuple[set[int], list[Finding]]:
        """The sequences of ``leaving`` that a damaged file stands for, and that damage.

        Per table, the files a read at the horizon uses instead of the entries that go
        are checked against the rows their entries record: a damaged base compaction stands
        for the revisions it holds (and the compactions that go: smaller ones it may be
        rebuilt from), a damaged major for every entry of its table that goes (the
        revisions it voids), and a state already removed in part for all of them; a
        damaged revision read on top of them stands for nothing that goes (its damage is
        reported all the same)."""
        stood_for: set[int] = set()
        findings: list[Finding] = []
        replaced = rebuilt(view.records, view.removed)
        for table in sorted({t for r in leaving for t in r.tables}):
            of_table = [r for r in leaving if table in r.tables]
            try:
                selection = state_selection(
                    view.table_revisions(table), table, max_sequence=horizon.sequence
                )
                plan = plan_merge(view, selection, f"the read of table {table!r} at the horizon")
            except NoMajorRevisionError:
                continue  # no state at the horizon: nothing stands for anything
            except RetentionError as exc:  # removed before: what is left is the last copy
                stood_for |= {r.sequence for r in of_table}
                findings.append(Finding.of("state_removed", table, str(exc)))
                continue
            for task in plan.tasks:  # a rebuilt base is used until the horizon passes its rebuild
                problems = self._problems(view.records[task.sequence - 1], table)
                if not problems:
                    continue
                by = replaced.get(task.entry)
                findings += problems if by is None else as_replaced(problems, by)
                compaction = plan.compaction
                if task.is_compaction and compaction is not None:
                    stood_for |= {
                        r.sequence for r in of_table if not r.is_data or compaction.contains(r)
                    }
                elif task.sequence == selection.major.sequence:
                    stood_for |= {r.sequence for r in of_table}
        return stood_for, findings

    def _problems(self, record: Revision, table: str) -> list[Finding]:
        return write_findings(self.storage, record, table, self._checked)

    def _entry(
        self, view: LogView, plan: _Plan, horizon: Horizon, retain: timedelta
    ) -> Revision | None:
        """The entry that marks and records what ``plan`` removes: None when nothing goes."""
        if not plan.marked and not plan.every:
            return None
        mark = VacuumMark(
            removed=tuple(r.sequence for r in plan.marked),
            horizon_sequence=horizon.sequence,
            horizon_timestamp=horizon.timestamp,
            retain_seconds=retain.total_seconds(),
            deleted=plan.deleted(view, horizon.sequence),
        )
        return vacuum_entry(f"vacuum-{uuid.uuid4().hex}", view.head + 1, mark)

    @staticmethod
    def _orphans(view: LogView, listing: _Listing, cutoff: datetime) -> list[str]:
        """Folders no entry references that a writer left (a claim marker or Parquet files),
        untouched since ``cutoff``: their names become usable again."""
        referenced = {r.name for r in view.records}
        referenced |= {folder for r in view.records for folder in _folders_of(r)}
        out = []
        for folder, infos in sorted(listing.by_folder.items()):
            if folder in referenced or holds_log(folder, (f.path for f in infos)):
                continue
            names = {f.path.rsplit("/", 1)[-1] for f in infos}
            written = any(
                n == CLAIM_FILE or n.endswith(".parquet") or is_temp_name(n) for n in names
            )
            if written and all(_older(f, cutoff) for f in infos):
                out.append(folder)
        return out

    def _delete(self, plan: _Plan) -> None:
        in_folders = set(plan.folders)
        loose = [f.path for f in plan.files if f.path.split("/", 1)[0] not in in_folders]
        if loose:
            self.storage.delete_files(loose)
        for n, folder in enumerate([*plan.folders, *plan.orphans], start=1):
            self.storage.delete_tree(folder)
            if n % 100 == 0:
                log.info("%s: vacuum: %d folders deleted", self.storage.uri, n)
        self.storage.delete_files([f.path for f in plan.temporary])


def vacuum_entry(name: str, sequence: int, mark: VacuumMark) -> Revision:
    """A vacuum entry at ``sequence``, committed now."""
    now = now_utc()
    return Revision(
        name=name,
        timestamp=now,
        is_major=False,
        sequence=sequence,
        committed_at=now,
        tables={},
        data_change=False,
        kind=VACUUM,
        vacuum=mark,
    )


def _staying(view: LogView, leaving: set[int]) -> set[str]:
    """The folders an entry that keeps its files uses."""
    return {
        folder
        for r in view.records
        if r.sequence not in leaving
        for folder in {r.name, *_folders_of(r)}
    }


def _stored(
    gone: Sequence[Revision], staying: set[str], listing: _Listing
) -> tuple[list[FileInfo], list[str]]:
    """The stored files of removed entries, and their folders no staying entry uses."""
    files, folders = [], []
    for record in gone:
        referenced = {f for write in record.tables.values() for f in write.files}
        for folder in sorted({record.name, *_folders_of(record)}):
            stored = listing.by_folder.get(folder, [])
            if folder in staying:
                files += [f for f in stored if f.path in referenced]
            elif stored:
                files += stored
                folders.append(folder)
    return files, folders


def _folders_of(record: Revision) -> set[str]:
    return {f.split("/", 1)[0] for write in record.tables.values() for f in write.files}


def _older(info: FileInfo, cutoff: datetime) -> bool:
    """Whether a file was last modified before ``cutoff`` (unknown: treated as new)."""
    return info.modified is not None and info.modified <= cutoff


__all__ = ["DEFAULT_GRACE", "Vacuum", "VacuumReport", "vacuum_entry"]
