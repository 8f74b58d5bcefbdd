"""What a commit read, checked against what was committed since (docs/concepts/lifecycle.md,
"Concurrent maintenance").

A command whose entry is derived from what it read of the dataset declares what it read
as a ``ReadSet``: a compaction writes the state it read, a purge rewrites the files it
scanned, a skip-unchanged minor or carrying major wrote only the rows that differ from a
state it read, an import expects the log to hold nothing but its own entries. Before
every attempt to append its entry (``transaction.append_entry``), the entries committed
after its snapshot are checked against it, and it gives up with ``CommitConflictError``,
committing nothing, when one of them changed what it read — the rule of Delta Lake's
conflict checker and of Iceberg's commit validations, kept in this one place:

* ``read``, the tables whose stored rows it read (a compaction): a purge of one of them
  since erased rows it read, and would write again;
* ``compared``, the tables whose state as of a time it compared its rows with (a
  skip-unchanged commit): a purge of one of them since (it wrote, or skipped, rows against
  rows that are gone), or a major ordered at or before that time (it replaced the whole
  state: rows skipped as unchanged would lose against it);
* ``carried``, the tables whose state as of a time it keeps under its own rows (a carrying
  major): a data revision of one of them ordered at or before that time since is one it
  would void instead of carrying;
* ``complete``, the tables whose every row it must have seen (a purge): any entry writing
  one of them since (a data revision, a compaction, a purge) holds rows it did not scan;
* ``rewrites``, the entries whose files it swaps (a purge): a vacuum removing one of them;
* ``exclusive`` (an import): any entry at all;
* ``folders``, the folders it wrote its files into, claimed at sequence ``claimed_at``: a
  vacuum committed since that deletes one of them (the grace period for folders no entry
  references passed while it wrote) took files its entry would reference.

Everything else that lands meanwhile is harmless to it: a compaction describes a fixed set
of revisions (a later commit can make it unused, never wrong), a vacuum re-plans what it
deletes against the log it commits on, and data revisions compose by their keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ..errors import CommitConflictError
from ..log.records import DATA_KINDS, PURGE, VACUUM, Revision
from ..log.view import LogView


@dataclass(frozen=True)
class ReadSet:
    """What a command read from the log at sequence ``snapshot`` (the head it planned on),
    and so what no entry committed after it may have changed (see the module docstring).

    ``what`` names the command and ``rerun`` says what to do after a conflict, for the
    error message."""

    what: str
    rerun: str
    snapshot: int
    read: frozenset[str] = frozenset()
    compared: Mapping[str, datetime] = field(default_factory=dict)
    carried: Mapping[str, datetime] = field(default_factory=dict)
    complete: frozenset[str] = frozenset()
    rewrites: frozenset[int] = frozenset()
    exclusive: bool = False
    folders: frozenset[str] = frozenset()
    claimed_at: int | None = None

    def conflict(self, record: Revision) -> str | None:
        """How ``record``, committed after the snapshot, changed what was read (the end of
        a sentence about it), or None when it did not."""
        if self.exclusive:
            return "was committed to the dataset"
        if record.kind == PURGE and record.purge is not None:
            purged = sorted(
                (self.read | set(self.compared) | self.complete) & set(record.purge.swaps)
            )
            if purged:
                return f"purged table {purged[0]!r}"
        if record.kind == VACUUM and record.vacuum is not None:
            removed = sorted(self.rewrites & set(record.vacuum.removed))
            if removed:
                return f"removed the files of entr{'y' if len(removed) == 1 else 'ies'} {removed}"
        if record.kind in DATA_KINDS:
            before = sorted(
                t
                for t, at in [*self.carried.items(), *self.compared.items()]
                if t in record.tables
                and record.timestamp <= at
                and (record.is_major or t in self.carried)
            )
            if before:
                state = "carries" if before[0] in self.carried else "compared its rows with"
                return (
                    f"wrote table {before[0]!r} as of {record.timestamp.isoformat()}, into the "
                    f"state it {state}"
                )
        written = sorted(self.complete & set(record.tables))
        if written:
            return f"wrote table {written[0]!r}"
        return None

    def deleted_folder(self, record: Revision) -> str | None:
        """The folder of this command that ``record``, committed after its claim, deleted."""
        deleted = record.vacuum.deleted if record.vacuum is not None else None
        if deleted is None:
            return None
        return next((f for f in sorted(self.folders) if f in deleted.folders), None)

    def check(self, view: LogView, root: str) -> None:
        """CommitConflictError when an entry of ``view`` committed after the snapshot
        changed what was read, or a vacuum committed after the claim deleted a folder this
        command wrote (the first such entry is named)."""
        for record in view.logged[self.snapshot :]:
            reason = self.conflict(record)
            if reason is not None:
                raise CommitConflictError(
                    f"{root}: {self.what} gave up: {record.kind} {record.name!r} (sequence "
                    f"{record.sequence}) {reason} after it read the log at sequence "
                    f"{self.snapshot}; nothing was committed: {self.rerun}"
                )
        if self.claimed_at is None:
            return
        for record in view.logged[self.claimed_at :]:
            folder = self.deleted_folder(record)
            if folder is not None:
                raise CommitConflictError(
                    f"{root}: {self.what} gave up: vacuum {record.name!r} (sequence "
                    f"{record.sequence}) deleted its folder {folder!r} while it was written "
                    "(the folder, not yet referenced by any entry, outlived vacuum's grace "
                    f"period); nothing was committed: {self.rerun}, or give vacuum a grace "
                    "period longer than the longest write"
                )


__all__ = ["ReadSet"]
