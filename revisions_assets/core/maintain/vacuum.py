"""Vacuum (docs/concepts/lifecycle.md): remove the files no allowed read needs, after one log entry
marks them.

``Vacuum`` commits a ``vacuum`` entry marking the revisions no allowed read needs
(``retention.removable``), then deletes their files, the folders of failed writers and
temporary files past a grace period, and the files purges at or before the retention
horizon swapped out (``log.view``). A crash between the two leaves marked revisions whose
files the next vacuum deletes. What is kept is decided by the pure rules of ``retention``;
this module only lists and deletes files, and commits.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..log.consumers import consumer_position
from ..log.layout import CLAIM_FILE, LOG_DIR, holds_log, is_temp_name
from ..log.records import (
    VACUUM,
    Revision,
    VacuumMark,
)
from ..log.revision_log import RevisionLog
from ..log.view import LogView
from ..storage.base import FileInfo, Storage
from ..timeutil import now_utc
from .defaults import DEFAULT_GRACE
from .retention import Horizon, removable, retention_horizon

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
    ``entry``: the vacuum entry committed (None on a dry run or when nothing new is
    marked). ``horizon``: the retention horizon the revisions were judged by.
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


@dataclass(frozen=True)
class _Listing:
    """The dataset root's files, grouped by what vacuum does with them."""

    by_folder: dict[str, list[FileInfo]]
    temporary: list[FileInfo]

    @classmethod
    def of(cls, storage: Storage) -> _Listing:
        by_folder: dict[str, list[FileInfo]] = {}
        temporary = []
        for info in storage.list_files(""):
            parts = info.path.split("/")
            if is_temp_name(parts[-1]) and (len(parts) == 1 or parts[0] == LOG_DIR):
                temporary.append(info)  # .description.parquet.*.tmp, _log/.*.json.*.tmp
            elif parts[0] == LOG_DIR and parts[-1].startswith("."):
                temporary.append(info)  # e.g. an S3 conditional-write probe left behind
            elif len(parts) > 1 and parts[0] != LOG_DIR:
                by_folder.setdefault(parts[0], []).append(info)
        return cls(by_folder, temporary)


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
        horizon = retention_horizon(records, now, retain)

        def judge(view: LogView) -> list[Revision]:
            return removable(
                view, horizon, keep_majors=keep_majors, consumer_positions=consumer_positions
            )

        view = self.log.view()
        listing = _Listing.of(self.storage)
        log.info(
            "%s: vacuum%s: horizon %s, %d entries, %d folders listed",
            self.storage.uri,
            " (dry run)" if dry_run else "",
            horizon.describe(),
            view.head,
            len(listing.by_folder),
        )
        entry = None
        marked = judge(view)
        if marked and not dry_run:
            entry = append_entry(
                self.log,
                lambda v: self._entry(v, judge(v), horizon, retain),
                "a vacuum entry",
            )
            view = self.log.view()
            marked = [view.records[s - 1] for s in entry.vacuum.removed] if entry else []
        marked_now = {r.sequence for r in marked}
        leaving = set(view.removed) | marked_now
        staying = {  # folders an entry that keeps its files uses
            folder
            for r in view.records
            if r.sequence not in leaving
            for folder in {r.name, *_folders_of(r)}
        }
        pending = [  # marked by an earlier vacuum that died before deleting everything
            view.records[s - 1]
            for s in sorted(view.removed)
            if s not in marked_now and _stored([view.records[s - 1]], staying, listing)[0]
        ]
        gone = [*marked, *pending]
        files, folders = _stored(gone, staying, listing)
        superseded = view.superseded(horizon.sequence)  # swapped out by purges
        purged = [
            f
            for folder in staying & set(listing.by_folder)
            for f in listing.by_folder[folder]
            if f.path in superseded
        ]
        files += purged
        orphans = self._orphans(view, listing, now - grace)
        left_inside = [  # e.g. a claim's temporary file in a committed revision's folder
            f
            for folder in staying & set(listing.by_folder)
            for f in listing.by_folder[folder]
            if is_temp_name(f.path.rsplit("/", 1)[-1])
        ]
        temporary = [f for f in [*listing.temporary, *left_inside] if _older(f, now - grace)]
        orphan_files = [f for o in orphans for f in listing.by_folder[o]]
        every = [*files, *orphan_files, *temporary]
        report = VacuumReport(
            dry_run=dry_run,
            horizon=horizon,
            revisions=tuple(r.name for r in gone),
            purged_files=tuple(f.path for f in purged),
            orphans=tuple(orphans),
            temporary_files=tuple(f.path for f in temporary),
            folders=tuple(sorted({*folders, *orphans})),
            files=len(every),
            bytes=sum(f.size for f in every),
            entry=entry,
            paths=tuple(sorted(f.path for f in every)),
        )
        if not dry_run:
            self._delete(files, folders, orphans, temporary)
            if entry is not None:
                upkeep(self.log, entry)
        log.info(
            "%s: vacuum%s: %d revisions, %d orphan folders, %d temporary files: %d files, %d bytes",
            self.storage.uri,
            " (dry run, nothing deleted)" if dry_run else "",
            len(report.revisions),
            len(report.orphans),
            len(report.temporary_files),
            report.files,
            report.bytes,
        )
        return report

    def _entry(
        self, view: LogView, marked: Sequence[Revision], horizon: Horizon, retain: timedelta
    ) -> Revision | None:
        if not marked:
            return None
        now = now_utc()
        return Revision(
            name=f"vacuum-{uuid.uuid4().hex}",
            timestamp=now,
            is_major=False,
            sequence=view.head + 1,
            committed_at=now,
            tables={},
            data_change=False,
            kind=VACUUM,
            vacuum=VacuumMark(
                removed=tuple(r.sequence for r in marked),
                horizon_sequence=horizon.sequence,
                horizon_timestamp=horizon.timestamp,
                retain_seconds=retain.total_seconds(),
            ),
        )

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

    def _delete(
        self,
        files: Sequence[FileInfo],
        folders: Sequence[str],
        orphans: Sequence[str],
        temporary: Sequence[FileInfo],
    ) -> None:
        in_folders = set(folders)
        loose = [f.path for f in files if f.path.split("/", 1)[0] not in in_folders]
        if loose:
            self.storage.delete_files(loose)
        for n, folder in enumerate([*folders, *orphans], start=1):
            self.storage.delete_tree(folder)
            if n % 100 == 0:
                log.info("%s: vacuum: %d folders deleted", self.storage.uri, n)
        self.storage.delete_files([f.path for f in temporary])


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


__all__ = ["DEFAULT_GRACE", "Vacuum", "VacuumReport"]
