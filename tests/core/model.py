"""A pure-Python reference model of the docs/concepts/read-semantics.md read semantics.

Written from the docs' read semantics alone (not from the engine) so the property tests compare two
independent readings of the contract. Everything is a small loop over Python dicts: a
revision maps each table it wrote to ``{entity key: row}``, where a row is a dict of the
non-id column values, or ``None`` for a tombstone. A carrying major lists, per table, the
revisions whose state it keeps (read first in the state it governs), and a purge removes
entities from every revision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

Key = tuple
Row = Mapping[str, object]


class ModelNoMajorError(Exception):
    """No major revision in range (the engine must raise NoMajorRevisionError)."""


class ModelUnknownRevisionError(Exception):
    """A positional reference that matches nothing (the engine: UnknownRevisionError)."""


@dataclass(frozen=True)
class ModelRevision:
    name: str
    timestamp: datetime
    is_major: bool
    sequence: int
    tables: Mapping[str, Mapping[Key, Row | None]]  # None marks a tombstone
    #: a carrying major: per table, the sequences of the revisions whose state it keeps
    #: (docs/guides/versions.md); its own rows are the changes on top of that state
    carries: Mapping[str, frozenset[int]] = field(default_factory=dict)

    @property
    def key(self) -> tuple[datetime, int]:
        return (self.timestamp, self.sequence)


@dataclass(frozen=True)
class ModelState:
    """The state of one table: entity key -> (row, revision that produced it)."""

    rows: dict[Key, tuple[Row, ModelRevision]]
    major: ModelRevision
    live: tuple[ModelRevision, ...]  # the revisions the state is merged from, by key


@dataclass(frozen=True)
class ModelChanges:
    """Entity key -> (row, producing revision), or (None, None) for a deletion."""

    is_reset: bool
    rows: dict[Key, tuple[Row | None, ModelRevision | None]]
    revisions: tuple[ModelRevision, ...]  # the window W (on a reset: the live set)


@dataclass
class Model:
    revisions: list[ModelRevision] = field(default_factory=list)

    @property
    def head(self) -> int:
        return len(self.revisions)

    def table_revisions(self, table: str, upto: int | None = None) -> list[ModelRevision]:
        """The revisions that wrote ``table`` (the only ones its reads see), by sequence."""
        return [
            r for r in self.revisions if table in r.tables and (upto is None or r.sequence <= upto)
        ]

    def commit(
        self,
        name: str,
        timestamp: datetime,
        is_major: bool,
        tables: Mapping[str, Mapping[Key, Row | None]],
    ) -> ModelRevision | None:
        """Append a revision; None when no table has rows (NoData).

        An empty table of a major empties that table (a major re-evaluates everything); an
        empty table of a minor is left out of the revision. A minor naming a table that has
        no major yet, even with no rows for it, is refused (ModelNoMajorError) and nothing
        is committed (the engine decides before writing, without counting rows).
        """
        if not any(tables.values()):
            return None
        written = {t: dict(rows) for t, rows in tables.items() if rows or is_major}
        if not is_major:
            for table in tables:
                if not any(r.is_major for r in self.table_revisions(table)):
                    raise ModelNoMajorError(table)
        rev = ModelRevision(name, timestamp, is_major, self.head + 1, written)
        self.revisions.append(rev)
        return rev

    def carrying_major(
        self,
        name: str,
        timestamp: datetime,
        tables: Mapping[str, Mapping[Key, Row]],
        *,
        complete: bool,
        skip: bool = False,
    ) -> ModelRevision:
        """Append a carrying major (docs/guides/versions.md): per table, it carries the
        state as of ``timestamp`` (the revisions merged into it) and writes the changes on
        top of it.

        ``complete`` (a major committed with skip_unchanged): the rows are the complete
        new state; it writes those that differ from the state and a tombstone for every
        entity of the state they lack; a table without state then is written complete.
        Else (``carry=True``): the rows name the entities that change (None deletes), every
        other entity keeps its row; with ``skip`` rows equal to the state's are left out;
        a table without state is refused (ModelNoMajorError) and nothing is committed.
        """
        written: dict[str, dict[Key, Row | None]] = {}
        carries: dict[str, frozenset[int]] = {}
        for table, rows in tables.items():
            try:
                before = self.state(table, as_of=timestamp)
            except ModelNoMajorError:
                if not complete:
                    raise
                written[table] = dict(rows)
                continue
            old = {k: dict(row) for k, (row, _rev) in before.rows.items()}
            changed = {
                k: row
                for k, row in rows.items()
                if row is None or not (complete or skip) or old.get(k) != dict(row)
            }
            if complete:
                changed |= {k: None for k in old if k not in rows}
            written[table] = changed
            carries[table] = frozenset(r.sequence for r in before.live)
        rev = ModelRevision(name, timestamp, True, self.head + 1, written, carries)
        self.revisions.append(rev)
        return rev

    def voids_carried(self, tables: Iterable[str], timestamp: datetime) -> bool:
        """Whether a major stamped ``timestamp`` would void a revision that a carrying major
        stamped after it carries (the revision would leave the state and come back)."""
        return any(
            major.timestamp > timestamp
            and any(self.revisions[s - 1].timestamp <= timestamp for s in major.carries[table])
            for major in self.revisions
            for table in tables
            if table in major.carries
        )

    def purge(self, table: str, keys: Iterable[Key]) -> None:
        """Remove entities from every revision of ``table`` (docs/guides/operating/purge.md):
        every read afterwards is the read before without them."""
        gone = set(keys)
        self.revisions = [
            replace(
                r,
                tables={
                    **r.tables,
                    table: {k: v for k, v in r.tables[table].items() if k not in gone},
                },
            )
            if table in r.tables
            else r
            for r in self.revisions
        ]

    def resolve(self, table: str, at: int | str | None) -> int | None:
        """The sequence a positional reference pins a read of ``table`` to."""
        if at is None:
            return None
        if isinstance(at, int):  # 0 is the empty log, before the first commit
            if not 0 <= at <= self.head:
                raise ModelUnknownRevisionError(at)
            return at
        if at == "HEAD" or at.startswith("HEAD~"):
            back = 0 if at == "HEAD" else int(at[len("HEAD~") :])
            hist = self.table_revisions(table)
            if back >= len(hist):
                raise ModelUnknownRevisionError(at)
            return hist[len(hist) - 1 - back].sequence
        for r in self.revisions:
            if r.name == at:
                return r.sequence
        raise ModelUnknownRevisionError(at)

    def state(
        self, table: str, as_of: datetime | None = None, at: int | str | None = None
    ) -> ModelState:
        """docs/concepts/read-semantics.md "State as of T", optionally over the revisions with
        sequence <= at; the
        state governed by a carrying major merges the revisions it carries first."""
        upto = self.resolve(table, at)
        candidates = [
            r for r in self.table_revisions(table, upto) if as_of is None or r.timestamp <= as_of
        ]
        majors = [r for r in candidates if r.is_major]
        if not majors:
            raise ModelNoMajorError(table)
        major = max(majors, key=lambda r: r.key)
        kept = major.carries.get(table, frozenset())
        live = sorted(
            (r for r in candidates if r.key >= major.key or r.sequence in kept),
            key=lambda r: r.key,
        )
        rows: dict[Key, tuple[Row, ModelRevision]] = {}
        for rev in live:
            for key, row in rev.tables[table].items():
                if row is None:
                    rows.pop(key, None)
                else:
                    rows[key] = (row, rev)
        return ModelState(rows, major, tuple(live))

    def changes(
        self, table: str, since: datetime | None = None, until: datetime | None = None
    ) -> ModelChanges:
        """docs/concepts/read-semantics.md "Changes in (T1, T2]": since exclusive, until
        inclusive."""
        state = self.state(table, as_of=until)
        if since is None or state.major.timestamp > since:
            return ModelChanges(True, dict(state.rows), state.live)
        window = tuple(r for r in state.live if r.timestamp > since)
        return ModelChanges(False, _touched(table, window, state), window)

    def changes_since_sequence(
        self, table: str, since_sequence: int, until_sequence: int | None = None
    ) -> ModelChanges:
        """docs/concepts/read-semantics.md consumer form: changes since sequence S up to a pinned
        head H."""
        head = self.head if until_sequence is None else until_sequence
        state = self.state(table, at=head)
        if state.major.sequence > since_sequence:
            return ModelChanges(True, dict(state.rows), state.live)
        window = tuple(r for r in state.live if r.sequence > since_sequence)
        return ModelChanges(False, _touched(table, window, state), window)


def _touched(
    table: str, window: tuple[ModelRevision, ...], state: ModelState
) -> dict[Key, tuple[Row | None, ModelRevision | None]]:
    """The entities written (or deleted) by the window, with their state; absent = deleted."""
    keys = {key for rev in window for key in rev.tables[table]}
    return {key: state.rows.get(key, (None, None)) for key in keys}


@dataclass(frozen=True)
class ModelVersion:
    """One SCD2 row: an entity's values (None: deleted) from valid_from until valid_to."""

    key: Key
    row: Row | None
    valid_from: datetime
    valid_to: datetime | None
    revision: str


def scd2_history(model: Model, table: str, until: datetime | None = None) -> list[ModelVersion]:
    """The SCD2 history ``history()`` returns, as a scan of the states as of each revision time.

    The state only changes at revision timestamps, so the state as of each one, in order,
    is the whole story: a version opens when an entity's values differ from its previous
    values (or it reappears), a deletion row opens when a present entity is absent. The
    deleting revision is the entity's tombstone when the latest revision of the state that
    wrote it deleted it, else the governing major (which no longer contains it).
    """
    times = sorted({r.timestamp for r in model.table_revisions(table)})
    times = [t for t in times if until is None or t <= until]
    open_rows: dict[Key, dict] = {}  # key -> the open version (as a dict, closed later)
    closed: list[ModelVersion] = []

    def close(key: Key, at: datetime) -> None:
        v = open_rows.pop(key)
        closed.append(ModelVersion(key, v["row"], v["from"], at, v["revision"]))

    for t in times:
        try:
            state = model.state(table, as_of=t)
        except ModelNoMajorError:
            continue
        for key in sorted(set(open_rows) | set(state.rows)):
            current = open_rows.get(key)
            if key in state.rows:
                row, rev = state.rows[key]
                if current is None or current["row"] is None or dict(current["row"]) != dict(row):
                    if current is not None:
                        close(key, t)
                    open_rows[key] = {"row": row, "from": t, "revision": rev.name}
            elif current is not None and current["row"] is not None:
                writers = [r for r in state.live if key in r.tables[table]]
                deleter = writers[-1] if writers else state.major
                close(key, t)
                open_rows[key] = {"row": None, "from": t, "revision": deleter.name}
    closed += [
        ModelVersion(k, v["row"], v["from"], None, v["revision"]) for k, v in open_rows.items()
    ]
    return sorted(closed, key=lambda v: (v.key, v.valid_from))


def as_of_join(
    model: Model,
    table: str,
    events: list[tuple[Key, datetime]],
    committed_at: Mapping[int, datetime],
    known_at: datetime | str | None,
) -> list[tuple[Row, ModelRevision] | None]:
    """Point-in-time rows (docs/guides/training-sets.md): for each (entity key, event time
    T), the entity's row in the state as of T over the revisions known at ``known_at``
    (committed at or before it; ``"event"``: at or before T; ``"all_committed"``: all), or
    None when it has none (no major known and visible by T, never written, or deleted).
    Commit times grow with the sequence, so the known revisions are a prefix of the log."""
    stamps = [committed_at[r.sequence] for r in model.revisions]
    assert stamps == sorted(stamps), "commit times follow the commit order"
    out: list[tuple[Row, ModelRevision] | None] = []
    for key, when in events:
        limit = when if known_at == "event" else None if known_at == "all_committed" else known_at
        upto = sum(1 for s in stamps if limit is None or s <= limit)
        try:
            state = model.state(table, as_of=when, at=upto)
        except ModelNoMajorError:
            out.append(None)
            continue
        out.append(state.rows.get(key))
    return out


# -- row hashes (value changes) -------------------------------------------------------------


def unchanged_skipped(
    model: Model, table: str, timestamp: datetime, rows: Mapping[Key, Row | None]
) -> dict[Key, Row | None]:
    """What a skip-unchanged minor stamped ``timestamp`` writes: the rows whose values
    differ from the entity's row in the state as of ``timestamp`` (tombstones always)."""
    try:
        before = model.state(table, as_of=timestamp).rows
    except ModelNoMajorError:
        before = {}
    return {
        k: row
        for k, row in rows.items()
        if row is None or k not in before or dict(before[k][0]) != dict(row)
    }


def value_changes(
    model: Model, table: str, changes: ModelChanges, before: ModelState | None
) -> dict[Key, Row | None]:
    """The changes that change a value, relative to the state ``before`` the read (None:
    empty): for a window, its entities whose row differs (deletions always count); for a
    reset (a soft major), the state's entities whose row differs plus ``before``'s entities
    the state lacks (as None)."""
    old = {k: dict(row) for k, (row, _rev) in (before.rows.items() if before else ())}
    out = {
        k: (None if row is None else dict(row))
        for k, (row, _rev) in changes.rows.items()
        if row is None or old.get(k) != dict(row)
    }
    if changes.is_reset:
        out.update({k: None for k in old if k not in changes.rows})
    return out
