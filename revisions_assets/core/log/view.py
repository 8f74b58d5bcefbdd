"""The effective view of a log: the data revisions as reads see them, after maintenance.

This is the one place where maintenance entries are applied. Data revisions (``major``,
``minor``) are the history of their tables; maintenance entries never enter a history:

* ``compaction``: registers, per table, a base holding the state of a set of data
  revisions (``CompactedRange``), which reads may use instead of those revisions' files;
* ``vacuum``: marks revisions (data revisions and compactions) whose files are removed.

* ``purge``: swaps the files of earlier entries (data revisions and compactions) of a
  table for rewritten ones without the purged entities. The *effective* records below
  carry the new files and counts (a purged entry keeps its sequence, key, name and
  everything else its write records: ``records.PURGED_FIELDS``), so every read
  (state, as of, positional, change reads, history, compaction bases) and vacuum see only
  the purged files; the swapped-out files are ``superseded`` until a vacuum deletes them.

Reads, change reads, vacuum and the description only ever look at the log through this
view, so a new maintenance kind is applied here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from ..errors import CorruptLogError, UnknownTableError
from .records import (
    COMPACTION,
    DATA_KINDS,
    PURGE,
    VACUUM,
    CompactedRange,
    Revision,
    TableWrite,
)


@dataclass(frozen=True)
class Compaction:
    """A compaction entry seen from one of its tables."""

    record: Revision
    table: str
    covers: CompactedRange
    major_key: tuple[datetime, int]  # key of the major its state starts from
    carried: frozenset[int] = frozenset()  # the revisions that major carries
    #: built while a purge of an earlier release hid its major's carries: it holds the
    #: state of the revisions from its major on only (``carried`` is empty), so reads that
    #: use it take the carried revisions from their own files
    partial: bool = False
    #: a purge of its table committed after it read the log and before it was committed,
    #: which rewrote files it was built from: it may hold the rows that purge erased, so
    #: no read uses it (an earlier release committed such compactions; see ``_compaction``)
    missed_purge: Revision | None = None

    @property
    def write(self) -> TableWrite:
        return self.record.tables[self.table]

    @property
    def sequence(self) -> int:
        return self.record.sequence

    def contains(self, revision: Revision) -> bool:
        """Whether a data revision of this table is one of those it replaces."""
        if revision.sequence in self.carried:
            return True
        return revision.sequence <= self.covers.through and revision.key >= self.major_key

    def held(self, history: Sequence[Revision]) -> int:
        """How many revisions of ``history`` (the table's) it replaces."""
        return sum(1 for r in history if self.contains(r))

    def usable_for(
        self,
        major: Revision,
        max_sequence: int,
        as_of: datetime | None,
        history: Sequence[Revision] = (),
    ) -> bool:
        """Whether every revision it replaces is in the merge set of a state read whose
        governing major is ``major``, pinned at ``max_sequence`` and as of ``as_of`` (never,
        when it missed a purge: ``missed_purge``).

        That merge set is every visible revision ordered at or after ``major`` (plus those
        ``major`` carries); the replaced set is every revision up to ``through`` ordered at
        or after the compaction's own major (plus those it carries). For the same major the
        first contains the second exactly when the three conditions below hold; for a
        carrying ``major`` that carries the compaction's major (a compaction of the state
        it keeps), every replaced revision of ``history`` must be carried or ordered at or
        after it.
        """
        if (
            self.missed_purge is not None
            or self.covers.through > max_sequence
            or (as_of is not None and self.covers.timestamp > as_of)
        ):
            return False
        if self.covers.major == major.sequence:
            return True
        carried = major.tables[self.table].carries if self.table in major.tables else ()
        if self.covers.major not in carried:
            return False
        kept = frozenset(carried)
        return all(r.sequence in kept or r.key >= major.key for r in history if self.contains(r))

    def known_by(self, history: Sequence[Revision], known_at: datetime) -> bool:
        """Whether every revision it replaces was committed at or before ``known_at`` (a
        read as known then may use it: it holds exactly their rows)."""
        return all(r.committed_at <= known_at for r in history if self.contains(r))


_T = TypeVar("_T")


class LogView:
    """Every entry of a log, with the maintenance entries applied (see the module doc)."""

    def __init__(self, records: Sequence[Revision]):
        self._logged = tuple(records)
        self.records, self._superseded = _apply_purges(records)
        self._histories: dict[str, list[Revision]] = {}
        self._compaction_records: dict[str, list[Revision]] = {}
        self._compactions: dict[str, list[Compaction]] = {}
        self._removed_by: dict[int, Revision] = {}
        self._purges: list[Revision] = []
        self._memo: dict[Hashable, Any] = {}
        for record in self.records:
            if record.kind in DATA_KINDS:
                for table in record.tables:
                    self._histories.setdefault(table, []).append(record)
            elif record.kind == COMPACTION:
                for table in record.replaces:
                    self._compaction_records.setdefault(table, []).append(record)
            elif record.kind == VACUUM:
                assert record.vacuum is not None
                for sequence in record.vacuum.removed:
                    self._removed_by.setdefault(sequence, record)
            elif record.kind == PURGE:  # applied to the records already
                self._purges.append(record)
            else:
                raise CorruptLogError(
                    f"log entry {record.sequence} ({record.name!r}) has kind {record.kind!r}, "
                    "unknown to this version of revisions-assets: upgrade it to read this dataset"
                )

    @property
    def logged(self) -> tuple[Revision, ...]:
        """Every entry as committed (a purge's swaps not applied): what the log lists."""
        return self._logged

    @property
    def head(self) -> int:
        return len(self.records)

    def before(self, sequence: int) -> LogView:
        """The view of the log as it was before entry ``sequence`` was committed."""
        return LogView(self._logged[: sequence - 1])

    def memo(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """A value derived from this view alone, computed once: a view never changes, and a
        commit asks for the same head state several times (checks, schemas, the policy)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def tables(self) -> list[str]:
        """Every table some data revision wrote, sorted."""
        return sorted(self._histories)

    def table_revisions(self, table: str) -> list[Revision]:
        """The data revisions of ``table`` in sequence order; UnknownTableError if none."""
        history = self._histories.get(table)
        if not history:
            raise UnknownTableError(
                f"table {table!r} has no revisions in this dataset; known tables: "
                f"{', '.join(map(repr, self.tables())) or 'none'}"
            )
        return history

    def compactions(self, table: str) -> list[Compaction]:
        """The compactions of ``table``, in sequence order (removed ones included)."""
        if table not in self._compactions:
            history = self._histories.get(table, [])
            self._compactions[table] = [
                self._compaction(record, table, history)
                for record in self._compaction_records.get(table, [])
            ]
        return self._compactions[table]

    def _compaction(self, record: Revision, table: str, history: Sequence[Revision]) -> Compaction:
        """A compaction entry of ``table``, with what it holds.

        It holds the merge of its major's state at ``through``: the revisions its major
        carries and those from the major on; ``covers.revisions`` counts them. A purge of
        an earlier release dropped a carrying major's carries from the log view, so a
        compaction built after such a purge holds and counts only those from the major on:
        the count tells the two apart.
        """
        covers = record.replaces[table]
        major = self.records[covers.major - 1]
        carried = frozenset(major.tables[table].carries) if table in major.tables else frozenset()
        compaction = Compaction(record, table, covers, major.key, carried)
        if carried and compaction.held(history) != covers.revisions:
            partial = replace(compaction, carried=frozenset(), partial=True)
            if partial.held(history) == covers.revisions:
                compaction = partial
        missed = self._missed_purge(compaction, history)
        return compaction if missed is None else replace(compaction, missed_purge=missed)

    def _missed_purge(self, compaction: Compaction, history: Sequence[Revision]) -> Revision | None:
        """The first purge committed after ``compaction`` read the log and before it was
        committed that rewrote, in its table, a revision it holds or a compaction (its base
        may have been one): it built its state from the files that purge swapped out.

        A compaction records the head it read (``CompactedRange.read_at``) and is refused
        when such a purge landed (``write/conflicts.py``), so this finds only compactions an
        earlier release committed, which recorded no ``read_at``: for them the head they
        read is taken to be the newest revision they hold (``through``), the earliest it
        can be, so a compaction built right after a purge counts as one that missed it.
        """
        covers, table = compaction.covers, compaction.table
        read_at = covers.read_at if covers.read_at is not None else covers.through
        missed = [
            p
            for p in self._purges
            if read_at < p.sequence < compaction.sequence and p.purge and table in p.purge.swaps
        ]
        if not missed:  # the rule for nearly every compaction: no scan of the history
            return None
        built_from = {r.sequence for r in history if compaction.contains(r)}
        built_from |= {c.sequence for c in self._compaction_records.get(table, [])}
        for purge in missed:
            assert purge.purge is not None
            if {swap.sequence for swap in purge.purge.swaps[table]} & built_from:
                return purge
        return None

    def removed_by(self, sequence: int) -> Revision | None:
        """The vacuum entry that removed the files of entry ``sequence``, if any."""
        return self._removed_by.get(sequence)

    def is_removed(self, sequence: int) -> bool:
        return sequence in self._removed_by

    @property
    def removed(self) -> dict[int, Revision]:
        """Sequence of every removed entry -> the vacuum entry that removed it."""
        return dict(self._removed_by)

    def files_of(self, record: Revision) -> list[str]:
        """The data files an entry references now (all its tables)."""
        return [f for write in record.tables.values() for f in write.files]

    def live_files(self) -> set[str]:
        """Every data file a not-removed entry references: what must exist on storage."""
        return {
            f
            for record in self.records
            if record.sequence not in self._removed_by
            for f in self.files_of(record)
        }

    def superseded(self, through: int) -> dict[str, SwappedOut]:
        """The data files that purges up to sequence ``through`` swapped out, with the purge
        and the entry and table that referenced them: no read of this log uses them; only
        readers that planned before the purge still might."""
        return {
            f: swapped
            for seq, files in self._superseded.items()
            if seq <= through
            for f, swapped in files.items()
        }


@dataclass(frozen=True)
class SwappedOut:
    """A data file a purge swapped out: the purge, and the entry and table it belonged to."""

    purge: int
    entry: int
    table: str


def _apply_purges(
    records: Sequence[Revision],
) -> tuple[tuple[Revision, ...], dict[int, dict[str, SwappedOut]]]:
    """The records with every purge's swaps applied, and per purge the files it swapped
    out. A later purge of the same entry rewrites the files an earlier one wrote."""
    writes: dict[int, dict[str, TableWrite]] = {}
    superseded: dict[int, dict[str, SwappedOut]] = {}
    by_sequence = {r.sequence: r for r in records}
    for record in records:
        if record.kind != PURGE or record.purge is None:
            continue
        gone = superseded.setdefault(record.sequence, {})
        for table, swaps in record.purge.swaps.items():
            for swap in swaps:
                target = by_sequence.get(swap.sequence)
                current = writes.get(swap.sequence, {}).get(table) or (
                    target.tables.get(table) if target is not None else None
                )
                if current is None:
                    raise CorruptLogError(
                        f"purge entry {record.sequence} ({record.name!r}) rewrites table "
                        f"{table!r} of entry {swap.sequence}, which did not write it"
                    )
                for file in set(current.files) - set(swap.write.files):
                    gone[file] = SwappedOut(record.sequence, swap.sequence, table)
                # only the purged fields: what the entry recorded otherwise stays
                writes.setdefault(swap.sequence, {})[table] = current.with_purged_fields(swap.write)
    if not writes:
        return tuple(records), superseded
    effective = tuple(
        replace(r, tables={**r.tables, **writes[r.sequence]}, raw=None)
        if r.sequence in writes
        else r
        for r in records
    )
    return effective, superseded


def table_revisions(records: Sequence[Revision], table: str) -> list[Revision]:
    """The data revisions of ``table``, in sequence order; UnknownTableError if none."""
    history = [r for r in records if r.wrote(table)]
    if not history:
        known = sorted({t for r in records if r.is_data for t in r.tables})
        raise UnknownTableError(
            f"table {table!r} has no revisions in this dataset; known tables: "
            f"{', '.join(map(repr, known)) or 'none'}"
        )
    return history
