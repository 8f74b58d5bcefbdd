"""A point-in-time join, planned: which revisions' rows an event can get, for which event
times, as known when. Pure: one frozen plan per call from one log snapshot, run by either
executor (``read/execute/as_of_join.py`` on Spark, ``read/execute/polars_as_of_join.py``
in Polars), so both return the same rows.

Each event row gets the entity's row in the state as of the event's time (the state rules
of docs/concepts/read-semantics.md), using only the revisions committed by ``known_at``
(the commit axis, inclusive). ``known_at="event"`` (the default) uses each event's own
time, so a corrected backfill committed later never leaks into the row an event gets: the
training set reproduces what production saw.

For a fixed knowledge rule, each revision of the table takes part in the state as of T for
one interval of T, its *visible span* ``[start, end)`` (``spans.visible_spans``). Per event
the row of the latest revision by (timestamp, sequence) whose span holds the event's time
wins. A later revision's span never ends before an earlier one's (fewer majors come after
it; a carrying major's pieces are cut to keep that, ``spans.carried_pieces``), so the times
at which a row wins are its span cut at the start of the entity's next later row: per
entity the cut spans are disjoint, and an event meets at most one of them. The first
revision's rows (most often a major holding nearly every row) lose to any later row that
holds the event, so executors read them apart and give them to the events no later row
took. A tombstone leaves the event's columns null, like an event with no entity.
Compactions are never read (they hold one state, not the revisions' spans); a revision
removed by a vacuum fails the join only if some event falls in its span.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ...arguments import check_text
from ...columns import REVISION
from ...errors import (
    ArgumentTypeError,
    DuplicateColumnError,
    IdColumnsError,
    InvalidArgumentError,
    RetentionError,
)
from ...log.records import Revision
from ...uris import describe
from .pruning import EVERY_ID, IdBounds, prune_task
from .scans import ScanTask, retention_message, scan_task
from .schema import Schema, projected, table_schema
from .selection import carried_by
from .spans import (
    EVENT,
    KnownAt,
    VisibleSpan,
    carried_pieces,
    check_known_at,
    visible_from,
    visible_spans,
)

if TYPE_CHECKING:
    from .requests import LogSnapshot


@dataclass(frozen=True)
class SpanRead:
    """The rows of one revision an event can get: its files (``task``, whose ``order`` is the
    piece's rank) and the event times ``[start_us, end_us)`` (µs; None: no end) in which
    they take part in the state."""

    task: ScanTask
    revision: Revision
    start_us: int
    end_us: int | None


@dataclass(frozen=True)
class SpanReads:
    """What a join reads: ``first`` (the earliest span, never cut: it wins where no later
    row holds the event), ``later`` (the other spans' pieces in rank order, ``task.order``
    their index) and whether any of them holds tombstones."""

    first: SpanRead | None
    later: tuple[SpanRead, ...]
    tombstones: bool


@dataclass(frozen=True)
class AsOfJoinPlan:
    """A point-in-time join of events with ``table``, planned (see the module doc).

    ``schema``: the id columns and the columns the join adds, in the types of every
    revision of the table (whatever ``known_at``, so joins known at different times have
    one schema). ``known_at``: None (everything committed), ``"event"`` or a time.
    ``spans``: every non-empty visible span in key order; ``carrying``: the known carrying
    majors with the event time (µs) from which each governs; ``removed``: the sequences of
    the spans' revisions whose files a vacuum removed, with the error an event in one of
    their spans raises.
    """

    table: str
    what: str
    id_columns: tuple[str, ...]
    schema: Schema
    known_at: datetime | str | None
    spans: tuple[VisibleSpan, ...]
    carrying: tuple[tuple[Revision, int], ...]
    removed: dict[int, str]

    @property
    def values(self) -> Schema:
        """The columns the join adds before ``_revision``."""
        return tuple(f for f in self.schema if f.name not in self.id_columns)

    @property
    def files(self) -> list[tuple[str, str]]:
        """Every data file a join may read (the spans a vacuum left), with the entry that
        wrote it: what the file gate checks before an executor runs the join."""
        return [(t.entry, f) for t in self.scanned for f in t.files]

    @property
    def scanned(self) -> list[ScanTask]:
        """Every write a join may read (the spans a vacuum left): what the file gate checks
        before an executor runs the join."""
        return [
            scan_task(span.revision, self.table, -1)
            for span in self.spans
            if span.revision.sequence not in self.removed
        ]

    def join_keys(self, event_columns: Sequence[str], event_time: object, on: object) -> dict:
        """The checked request against the events' columns: ``{event column: id column}``
        covering every id column once. Refuses an ``event_time`` the events lack and the
        columns the join would add that the events already have (compared ignoring case,
        as Spark does, so both engines refuse the same frames)."""
        check_text(event_time, "event_time")
        if event_time not in event_columns:
            raise InvalidArgumentError(
                f"event_time {event_time!r} is not a column of events_df (columns: "
                f"{list(event_columns)})"
            )
        pairs = _join_columns(event_columns, on, self.id_columns, self.table)
        taken = {c.lower(): c for c in event_columns}
        for column in [*(f.name for f in self.values), REVISION]:
            if column.lower() in taken:
                clash = taken[column.lower()]
                raise DuplicateColumnError(
                    f"events_df already has column {clash!r}, which as_of_join adds from table "
                    f"{self.table!r}; rename it first (e.g. to 'event_{column}'), or leave it "
                    "out of columns="
                )
        return pairs

    @property
    def id_types(self) -> dict[str, str]:
        """The Spark type name of each id column (what its events' keys are pruned by)."""
        types = {f.name: f.type for f in self.schema}
        return {c: t for c in self.id_columns if isinstance(t := types.get(c), str)}

    def reads(
        self, low_us: int | None = None, high_us: int | None = None, keys: IdBounds = EVERY_ID
    ) -> SpanReads:
        """The spans to read for events whose times fall in ``[low_us, high_us]`` (None: no
        events), each reading only the files that may hold an id of ``keys`` (the events'
        keys, ``pruning.key_bounds``). Only a plan with ``removed`` spans needs the range:
        RetentionError when an event falls in one of them, else they are left out."""
        spans = []
        for span in self.spans:
            message = self.removed.get(span.revision.sequence)
            if message is None:
                spans.append(span)
            elif low_us is not None and high_us is not None and span.meets(low_us, high_us):
                raise RetentionError(message)
        if not spans:
            return SpanReads(None, (), tombstones=False)
        first, *rest = spans
        pieces = carried_pieces(rest, self.carrying, self.table, "start_us", "end_us")
        return SpanReads(
            first=self._read(first, 0, keys),
            later=tuple(self._read(s, n, keys) for n, s in enumerate(pieces)),
            tombstones=any(s.revision.tables[self.table].tombstones for s in spans),
        )

    def _read(self, span: VisibleSpan, order: int, keys: IdBounds) -> SpanRead:
        task = prune_task(scan_task(span.revision, self.table, order), keys, self.id_columns)
        return SpanRead(task, span.revision, span.start_us, span.end_us)


def plan_as_of_join(
    snapshot: LogSnapshot,
    table: str,
    *,
    known_at: KnownAt = EVENT,
    columns: Sequence[str] | None = None,
) -> AsOfJoinPlan:
    """The point-in-time join of events with ``table`` as known at ``known_at``
    (``"event"``: at each event's own time; ``"all_committed"``: every revision committed;
    or an aware time); ``columns``: only these value columns are added (default: all)."""
    check_text(table, "table")
    known = check_known_at(known_at)
    view = snapshot.view
    history = view.table_revisions(table)
    ids = tuple(history[-1].tables[table].id_columns)
    schema = table_schema(history, table)
    if columns is not None:
        schema = projected(schema, ids, columns, table, "as_of_join")
    what = f"{snapshot.root}: as_of_join of table {table!r}"
    what += f" known at {known.isoformat()}" if isinstance(known, datetime) else ""
    what += " known at each event's time" if known == EVENT else ""
    spans = visible_spans(history, table, known)
    removed = {}
    for span in spans:
        vacuum = view.removed_by(span.revision.sequence)
        if vacuum is not None:
            removed[span.revision.sequence] = retention_message(what, span.revision, vacuum)
    carrying = tuple(
        (r, visible_from(r, known))
        for r in sorted(history, key=lambda r: r.key)
        if carried_by(r, table) and (not isinstance(known, datetime) or r.committed_at <= known)
    )
    return AsOfJoinPlan(table, what, ids, schema, known, tuple(spans), carrying, removed)


def _join_columns(
    event_columns: Sequence[str], on: object, id_columns: Sequence[str], table: str
) -> dict[str, str]:
    """``on`` as {event column: id column}, covering every id column of ``table`` once.

    ``on``: a list of names shared by the events and the table, or a mapping from event
    columns to id columns.
    """
    if isinstance(on, str):
        on = [on]
    if isinstance(on, Mapping):
        pairs = dict(on)
    elif isinstance(on, Sequence):
        pairs = {c: c for c in on}
    else:
        raise ArgumentTypeError(
            f"on must be a list of id column names or a dict {{event column: id column}}, "
            f"got {describe(on)}"
        )
    for event_column, id_column in pairs.items():
        check_text(event_column, "an event column in on")
        check_text(id_column, "an id column in on")
        if event_column not in event_columns:
            raise IdColumnsError(
                f"on names event column {event_column!r}, which events_df does not have "
                f"(columns: {list(event_columns)})"
            )
        if id_column not in id_columns:
            raise IdColumnsError(
                f"on names {id_column!r}, which is not an id column of table {table!r} "
                f"(id columns: {list(id_columns)})"
            )
    missing = [c for c in id_columns if c not in pairs.values()]
    if missing or len(set(pairs.values())) != len(pairs):
        raise IdColumnsError(
            f"on must match each id column of table {table!r} ({list(id_columns)}) exactly "
            f"once, got {on!r}"
        )
    return pairs
