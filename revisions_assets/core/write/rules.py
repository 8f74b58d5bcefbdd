"""The commit rules of majors: pure checks over the log, re-run on every attempt.

A carrying major keeps the state of earlier revisions under its own rows (the docs' guide
on versions and soft majors): ``check_carried`` keeps that state readable and consistent.
A major stamped before data a vacuum removed would make reads merge that data:
``check_major_after_vacuum`` refuses it (never partial data).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..errors import CarriedStateError, RetentionError
from ..log.view import LogView
from ..read.plan.scans import retention_message
from ..read.plan.selection import carried_by


def check_carried(
    view: LogView,
    table: str,
    timestamp: datetime,
    carries: Sequence[int] = (),
) -> None:
    """The commit rules of carrying majors, re-checked on every attempt of a major.

    A major stamped before a carrying major must not void a revision that major carries
    (it would leave the state at the major's time and return at the carrying major's). A
    carrying major (``carries``) needs its carried revisions' files. (That no revision
    ordered before it landed since it read the state it carries is checked with every
    other conflict: ``CommitRequest.read_set``, ``conflicts.py``.)
    """
    if table not in view.tables():
        return
    history = view.table_revisions(table)
    for major in history:
        carried = carried_by(major, table)
        if major.timestamp <= timestamp or not carried:
            continue
        voided = [r for r in history if r.sequence in carried and r.timestamp <= timestamp]
        if voided:
            raise CarriedStateError(
                f"table {table!r}: a major stamped {timestamp.isoformat()} would void revision "
                f"{voided[0].name!r} ({voided[0].timestamp.isoformat()}), which the major "
                f"{major.name!r} (sequence {major.sequence}, {major.timestamp.isoformat()}) "
                f"carries; stamp the major at or after {major.timestamp.isoformat()}"
            )
    if not carries:
        return
    # the carried state must stay readable: from its files, or from a compaction of it
    kept = frozenset(carries)
    bases = [
        c
        for c in view.compactions(table)
        if not view.is_removed(c.sequence)
        and c.missed_purge is None  # reads never use it
        and c.covers.major in kept
        and all(r.sequence in kept or r.timestamp > timestamp for r in history if c.contains(r))
    ]
    for sequence in carries:
        vacuum = view.removed_by(sequence)
        if vacuum is not None and not any(c.contains(view.records[sequence - 1]) for c in bases):
            raise RetentionError(
                retention_message(
                    f"a carrying major of table {table!r}", view.records[sequence - 1], vacuum
                )
            )


def check_major_after_vacuum(view: LogView, table: str, major_timestamp: datetime) -> None:
    """A new major of ``table`` may not be stamped before data a vacuum removed: every read
    it governs would merge that data."""
    if table not in view.tables():
        return
    removed = [
        r
        for r in view.table_revisions(table)
        if view.is_removed(r.sequence) and r.timestamp > major_timestamp
    ]
    if removed:
        newest = max(removed, key=lambda r: r.key)
        vacuum = view.removed_by(newest.sequence)
        assert vacuum is not None
        raise RetentionError(
            f"table {table!r}: a major stamped {major_timestamp.isoformat()} would be merged "
            f"with revision {newest.name!r} ({newest.timestamp.isoformat()}), whose files "
            f"vacuum {vacuum.name!r} (sequence {vacuum.sequence}) removed; stamp the major "
            f"at or after {newest.timestamp.isoformat()}"
        )
