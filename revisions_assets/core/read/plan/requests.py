"""What a read asks for, checked and planned: pure functions of one log snapshot.

Every read of both engines — ``RevisionedDataset`` (Spark) and ``DatasetReader`` (Polars)
— goes through these functions: they refuse the same inputs with the same errors, select
the same revisions, and return one frozen plan that an executor (``read/execute/``) runs.
A read takes one ``Snapshot`` of the log when it starts; nothing below refreshes it.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from ...arguments import check_bool, check_sequence_number, check_text
from ...errors import InvalidArgumentError, NoMajorRevisionError, RetentionError
from ...log.records import Revision
from ...log.view import Compaction, LogView
from ...timeutil import TimeLike, to_utc
from .refs import Position, resolve_position
from .scans import (
    MergePlan,
    ScanTask,
    compaction_task,
    plan_merge,
    retention_message,
    scan_task,
)
from .schema import Schema, names, table_schema, value_columns
from .selection import (
    Selection,
    carried_by,
    changes_by_sequence,
    changes_by_time,
    state_selection,
)
from .spans import LiveSpan, live_spans


@dataclass(frozen=True)
class Snapshot:
    """One frozen view of a dataset's log, taken when a read starts, and the dataset's root
    (how errors name it)."""

    root: str
    view: LogView

    @property
    def records(self) -> tuple[Revision, ...]:
        return self.view.records

    @property
    def head(self) -> int:
        return self.view.head


# -- state reads ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatePlan:
    """A state read: its selection and the merge that reads it."""

    selection: Selection
    rows: MergePlan


def plan_state(
    snapshot: Snapshot,
    table: str,
    *,
    as_of: TimeLike | None = None,
    at: Position = None,
    known_at: TimeLike | None = None,
    columns: Sequence[str] | None = None,
    with_revision: bool = False,
) -> StatePlan:
    """The state of ``table`` as of a time, as known at a commit time and/or pinned at a
    position (docs/concepts/read-semantics.md); ``columns``: only these value columns."""
    check_text(table, "table")
    check_bool(with_revision, "with_revision")
    as_of_utc = to_utc(as_of, "as_of") if as_of is not None else None
    known_utc = to_utc(known_at, "known_at") if known_at is not None else None
    pinned = resolve_position(snapshot.records, table, at)
    history = snapshot.view.table_revisions(table)
    selection = state_selection(history, table, as_of_utc, pinned, known_utc)
    what = f"read of table {table!r}"
    what += f" as of {as_of_utc.isoformat()}" if as_of_utc is not None else ""
    what += f" as known at {known_utc.isoformat()}" if known_utc is not None else ""
    what += f" at sequence {pinned}" if at is not None else ""
    rows = plan_merge(snapshot.view, selection, f"{snapshot.root}: {what}")
    return StatePlan(selection, project(rows, columns, "read"))


def project(plan: MergePlan, columns: Sequence[str] | None, call: str) -> MergePlan:
    """``plan`` reading only the id columns and ``columns`` (checked against its schema)."""
    if columns is None:
        return plan
    return replace(plan, schema=projected(plan.schema, plan.id_columns, columns, plan.table, call))


def projected(
    schema: Schema, id_columns: Sequence[str], columns: Sequence[str], table: str, call: str
) -> Schema:
    """The id columns and ``columns`` of ``schema``, checked: the ids come first, then the
    columns in the order given."""
    if (
        isinstance(columns, str)
        or not isinstance(columns, Sequence)
        or not all(isinstance(c, str) for c in columns)
    ):
        raise InvalidArgumentError(
            f"{call}(): columns must be a list of column names, got {columns!r}"
        )
    by_name = {f.name: f for f in schema}
    unknown = [c for c in columns if c not in by_name]
    if unknown:
        raise InvalidArgumentError(
            f"{call}(): columns {unknown} are not columns of table {table!r}; its "
            f"columns are {names(schema)}"
        )
    return tuple(by_name[c] for c in dict.fromkeys([*id_columns, *columns]))


# -- change reads -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ChangedOnTop:
    """A reset's ``changed`` when every revision of the state before is still merged (a
    carrying major kept it): only entities the other revisions wrote can differ. ``rows``:
    their change rows (None: no such revision, nothing changed); ``compare``: compare them
    with the state before (False when they are one carrying major that compared its rows
    with exactly that state)."""

    rows: MergePlan | None
    compare: bool
    window_rows: int = 0


@dataclass(frozen=True)
class ChangePlan:
    """A change read, planned (see ``read/execute/changes.py`` for how it runs).

    ``rows``: the merge of the window's entities (the full state on a reset); None when
    nothing changed (an empty frame of ``schema``). ``before``: the state the read starts
    from, whose row hashes ``only_changed`` and a reset's ``changed`` compare with; None
    when there is none, or no comparison is needed. ``on_top``: a reset's ``changed`` from
    the revisions on top of the state before, instead of a comparison of whole states.
    ``columns``: only changes of these value columns count (None: all).
    """

    table: str
    what: str
    id_columns: tuple[str, ...]
    schema: Schema
    is_reset: bool
    window: tuple[Revision, ...]
    since_sequence: int | None
    until_sequence: int
    rows: MergePlan | None
    before: MergePlan | None
    on_top: ChangedOnTop | None
    columns: tuple[str, ...] | None
    window_rows: int


def plan_changes(
    snapshot: Snapshot,
    table: str,
    *,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    since_sequence: int | None = None,
    until_sequence: int | None = None,
    at: Position = None,
    known_at: TimeLike | None = None,
    with_revision: bool = False,
    only_changed: bool = False,
    columns: Sequence[str] | None = None,
) -> ChangePlan:
    """Changes in (since, until], or since a sequence up to a pinned head
    (docs/concepts/read-semantics.md)."""
    check_text(table, "table")
    check_bool(with_revision, "with_revision")
    check_bool(only_changed, "only_changed")
    since_sequence = check_sequence_number(since_sequence, "since_sequence", optional=True)
    until_sequence = check_sequence_number(until_sequence, "until_sequence", optional=True)
    by_sequence = since_sequence is not None or until_sequence is not None
    if by_sequence and (
        since is not None or until is not None or at is not None or known_at is not None
    ):
        raise InvalidArgumentError(
            "changes(): give either since/until/at/known_at (times, a pinned position) or "
            f"since_sequence/until_sequence, not both (got since={since!r}, until={until!r}, "
            f"at={at!r}, known_at={known_at!r}, since_sequence={since_sequence}, "
            f"until_sequence={until_sequence})"
        )
    since_utc = to_utc(since, "since") if since is not None else None
    until_utc = to_utc(until, "until") if until is not None else None
    known_utc = to_utc(known_at, "known_at") if known_at is not None else None
    if since_utc is not None and until_utc is not None and since_utc > until_utc:
        raise InvalidArgumentError(
            f"changes(): since {since_utc.isoformat()} is after until "
            f"{until_utc.isoformat()}; the window is (since, until]: swap them"
        )
    if None not in (since_sequence, until_sequence) and since_sequence > until_sequence:
        raise InvalidArgumentError(
            f"changes(): since_sequence {since_sequence} is after until_sequence "
            f"{until_sequence}; swap them"
        )
    records, view = snapshot.records, snapshot.view
    history = view.table_revisions(table)
    if by_sequence:
        head = until_sequence if until_sequence is not None else snapshot.head
        head = resolve_position(records, table, head)
        selection = changes_by_sequence(history, table, since_sequence, head)
        what = f"changes of table {table!r} since sequence {since_sequence}"
        before: tuple[datetime | None, int | None] = (None, since_sequence)
    else:
        at_sequence = resolve_position(records, table, at)
        selection = changes_by_time(history, table, since_utc, until_utc, at_sequence, known_utc)
        what = f"changes of table {table!r} since "
        what += since_utc.isoformat() if since_utc else "the start"
        what += f" until {until_utc.isoformat()}" if until_utc is not None else ""
        what += f" as known at {known_utc.isoformat()}" if known_utc is not None else ""
        before = (since_utc, at_sequence) if since_utc is not None else (None, None)
    what = f"{snapshot.root}: {what}"
    ids = tuple(history[-1].tables[table].id_columns)
    schema = table_schema(selection.merge, table)
    hashed = _hashed_columns(table, columns, value_columns(schema, ids))
    start = _start_state(view, selection.table, before, known_utc, what)
    rows = on_top = None
    compare = start
    if selection.window:
        rows = plan_merge(view, selection, what)
        if selection.is_reset:
            on_top = _changed_on_top(view, selection, start, hashed, rows.schema, what)
            if on_top is not None and not on_top.compare:
                compare = None
        elif not only_changed or (
            by_sequence and hashed is None and _holds_only_real_changes(history, selection)
        ):
            compare = None
    return ChangePlan(
        table=table,
        what=what,
        id_columns=ids,
        schema=rows.schema if rows is not None else schema,
        is_reset=selection.is_reset,
        window=selection.window,
        since_sequence=since_sequence,
        until_sequence=selection.head_sequence,
        rows=rows,
        before=compare,
        on_top=on_top,
        columns=hashed,
        window_rows=sum(r.tables[table].rows for r in selection.window),
    )


def _hashed_columns(
    table: str, columns: Sequence[str] | None, values: Sequence[str]
) -> tuple[str, ...] | None:
    """``columns`` checked against the table's value columns."""
    if columns is None:
        return None
    if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
        raise InvalidArgumentError(
            f"changes(): columns must be a list of column names, got {columns!r}"
        )
    unknown = [c for c in columns if c not in values]
    if unknown:
        raise InvalidArgumentError(
            f"changes(): columns {unknown} are not value columns of table {table!r}; "
            f"its value columns are {list(values)}"
        )
    return tuple(columns)


def _start_state(
    view: LogView,
    table: str,
    before: tuple[datetime | None, int | None],
    known_at: datetime | None,
    what: str,
) -> MergePlan | None:
    """The state a change read starts from, as of ``before`` = (as_of, max_sequence); None
    (every row counts as changed) when there is no start, no major by then, or a vacuum
    removed that state's files."""
    return state_before(view, table, *before, known_at, f"{what} (the state before)")


def state_before(
    view: LogView,
    table: str,
    as_of: datetime | None,
    max_sequence: int | None,
    known_at: datetime | None,
    what: str,
) -> MergePlan | None:
    """The plan of the state as of ``as_of`` pinned at ``max_sequence``, whose row hashes a
    comparison starts from (where a change read starts, what a skip-unchanged minor
    replaces); None when there is no start, no major by then, or its files are gone."""
    if as_of is None and max_sequence is None:
        return None
    try:
        selection = state_selection(
            view.table_revisions(table), table, as_of, max_sequence, known_at
        )
        return plan_merge(view, selection, what)
    except (NoMajorRevisionError, RetentionError):
        return None


def _changed_on_top(
    view: LogView,
    reset: Selection,
    start: MergePlan | None,
    columns: tuple[str, ...] | None,
    schema: Schema,
    what: str,
) -> ChangedOnTop | None:
    """A reset's ``changed`` without comparing two whole states, when every revision of
    the state before is still merged (see ``ChangedOnTop``). None when the states do not
    nest (then the whole states are compared)."""
    if start is None:
        return None
    table = reset.table
    old = {r.sequence for r in start.merge}
    if not old <= {r.sequence for r in reset.merge}:
        return None
    window = tuple(r for r in reset.merge if r.sequence not in old)
    if not window:
        return ChangedOnTop(None, compare=False)
    merge = tuple(r for r in reset.merge if r.key >= window[0].key)
    selection = Selection(
        table, reset.major, merge, window, False, reset.head_sequence, reset.as_of, reset.known_at
    )
    rows = replace(plan_merge(view, selection, what), schema=schema)
    # one carrying major that compared its rows with exactly the state before wrote only
    # real changes (tombstones given to carry=True may name absent entities: compare)
    (first,) = window if len(window) == 1 else (None,)
    compared = (
        columns is None
        and first is not None
        and first.tables[table].rows_offered is not None
        and not first.tables[table].tombstones
        and set(carried_by(first, table)) == old
    )
    window_rows = sum(r.tables[table].rows for r in window)
    return ChangedOnTop(rows, compare=not compared, window_rows=window_rows)


def _holds_only_real_changes(history: Sequence[Revision], selection: Selection) -> bool:
    """Whether a change window already holds only real changes, so ``only_changed`` needs
    no comparison: one minor committed with ``skip_unchanged`` in logical order (no earlier
    revision has a later timestamp) whose commit compared every row with the state just
    before it (no revision of the table landed between the head it compared with, its
    ``compared_with``, and its own sequence: a concurrent commit may have), the state a
    change read since then starts from."""
    if len(selection.window) != 1:
        return False
    (minor,) = selection.window
    compared_with = minor.tables[selection.table].compared_with
    if minor.is_major or compared_with is None:
        return False
    earlier = [r for r in history if r.sequence < minor.sequence]
    return all(r.sequence <= compared_with and r.timestamp <= minor.timestamp for r in earlier)


# -- SCD2 history -----------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryPlan:
    """An SCD2 history: the live spans of the table's revisions (in rank order), the files
    to scan for them, and the versions to keep (those still valid after ``since``).

    ``tasks``: the spans read from their own revision's files (``order`` = the span's
    index). ``base``: a compaction whose rows stand for the spans of the revisions it
    contains; ``base_orders`` maps the sequence that wrote a row to those spans' indexes.
    ``starts_at`` None: the whole history. Else a vacuum removed revisions the whole history
    needs: it starts from the state at ``starts_at`` (the spans live after it), and a
    version already open then is reported from ``starts_at``: its true start is at or
    before it, and the revisions that would tell are gone.
    """

    table: str
    what: str
    id_columns: tuple[str, ...]
    schema: Schema
    spans: tuple[LiveSpan, ...]
    tasks: tuple[ScanTask, ...]
    since: datetime | None
    base: ScanTask | None = None
    base_orders: tuple[tuple[int, tuple[int, ...]], ...] = ()
    starts_at: datetime | None = None

    @property
    def files(self) -> list[tuple[str, str]]:
        """Every data file the history scans, with the entry that wrote it."""
        tasks = [*self.tasks, *([self.base] if self.base else [])]
        return [(t.entry, f) for t in tasks for f in t.files]


@dataclass(frozen=True)
class _HistoryStart:
    """Where a history after a vacuum starts, and the compaction standing for the removed
    revisions it needs."""

    spans: tuple[LiveSpan, ...]
    compaction: Compaction | None
    at: datetime


def plan_history(
    snapshot: Snapshot,
    table: str,
    *,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    known_at: TimeLike | None = None,
    columns: Sequence[str] | None = None,
) -> HistoryPlan:
    """The SCD2 history of ``table`` (as known at ``known_at``: from the revisions committed
    by then).

    Without a revision removed by a vacuum, from every live span's files. Else from the
    earliest time K whose later states the retained files hold (``_history_start``);
    RetentionError when K is after ``since`` (or there is no ``since``), naming K.
    """
    check_text(table, "table")
    view = snapshot.view
    history = view.table_revisions(table)
    until_utc = to_utc(until, "until") if until is not None else None
    since_utc = to_utc(since, "since") if since is not None else None
    compactions = [c for c in view.compactions(table) if not view.is_removed(c.sequence)]
    if known_at is not None:
        known_utc = to_utc(known_at, "known_at")
        history = [r for r in history if r.committed_at <= known_utc]
        compactions = [c for c in compactions if c.known_by(history, known_utc)]
    spans = live_spans(history, table, until_utc)
    what = f"{snapshot.root}: history of table {table!r}"
    what += f" since {since_utc.isoformat()}" if since_utc is not None else ""
    start = None
    if any(view.is_removed(s.revision.sequence) for s in spans):
        start = _history_start(view, history, compactions, table, spans, since_utc, what)
        spans = list(start.spans)
    ids = tuple(history[-1].tables[table].id_columns)
    schema = table_schema([s.revision for s in spans] or history, table)
    if columns is not None:  # the history of a projection: versions open where it changes
        schema = projected(schema, ids, columns, table, "history")
    compaction = start.compaction if start is not None else None
    tasks = tuple(
        scan_task(s.revision, table, n)
        for n, s in enumerate(spans)
        if compaction is None or not compaction.contains(s.revision)
    )
    base, base_orders = None, ()
    if compaction is not None:
        orders: dict[int, list[int]] = {}
        for n, s in enumerate(spans):
            if compaction.contains(s.revision):
                orders.setdefault(s.revision.sequence, []).append(n)
        base = compaction_task(compaction)
        base_orders = tuple((q, tuple(o)) for q, o in orders.items())
    return HistoryPlan(
        table,
        what,
        ids,
        schema,
        tuple(spans),
        tasks,
        since_utc,
        base,
        base_orders,
        start.at if start is not None else None,
    )


def _history_start(
    view: LogView,
    history: Sequence[Revision],
    compactions: Sequence[Compaction],
    table: str,
    spans: Sequence[LiveSpan],
    since: datetime | None,
    what: str,
) -> _HistoryStart:
    """Where a history whose spans a vacuum partly removed starts: the earliest revision
    time (or end of a span) K whose later states the retained files hold, when K is at or
    before ``since``; else RetentionError naming K."""
    removed = [s.revision for s in spans if view.is_removed(s.revision.sequence)]
    times = sorted({t for s in spans for t in (s.start, s.end) if t is not None})
    earliest = _earliest_start(view, compactions, spans)
    first = len(times) if earliest is None else bisect.bisect_left(times, earliest)
    start = next(
        (
            found
            for t in times[first:]
            if (found := _start_at(view, history, compactions, table, spans, t)) is not None
        ),
        None,
    )
    if start is not None and since is not None and start.at <= since:
        return start
    after = [s.revision for s in spans if since is None or s.end is None or s.end > since]
    revision = next((r for r in after if view.is_removed(r.sequence)), removed[0])
    vacuum = view.removed_by(revision.sequence)
    assert vacuum is not None
    message = retention_message(what, revision, vacuum)
    if start is not None:
        message += f"; a history can start at {start.at.isoformat()} or later (since)"
    raise RetentionError(message)


def _earliest_start(
    view: LogView, compactions: Sequence[Compaction], spans: Sequence[LiveSpan]
) -> datetime | None:
    """A time before which no history can start (None: none can): the spans of removed
    revisions end at or before the start, except those of a compaction stamped at or before
    it. Spares long histories a try at every revision time."""
    options = []
    for compaction in [None, *compactions]:
        ends = [
            s.end
            for s in spans
            if view.is_removed(s.revision.sequence)
            and (compaction is None or not compaction.contains(s.revision))
        ]
        if None not in ends:
            stamps = [] if compaction is None else [compaction.covers.timestamp]
            options.append(max([*ends, *stamps]))  # type: ignore[type-var]
    return min(options, default=None)


def _start_at(
    view: LogView,
    history: Sequence[Revision],
    compactions: Sequence[Compaction],
    table: str,
    spans: Sequence[LiveSpan],
    start: datetime,
) -> _HistoryStart | None:
    """The history from the state at ``start`` on, or None when the retained files do not
    hold it.

    It needs the spans live after ``start``. A compaction can stand for the revisions it
    contains when it fits the state at ``start`` (they are all live then) and they share
    their fate after it (voided, or carried, at the same times): then the rows it keeps,
    the latest of each entity among them, are the only ones of theirs that can win after
    ``start``, each at its writer's rank.
    """
    needed = tuple(s for s in spans if s.end is None or s.end > start)
    gone = {s.revision.sequence for s in needed if view.is_removed(s.revision.sequence)}
    if not gone:
        return _HistoryStart(needed, None, start)
    try:
        state = state_selection(history, table, start)
    except NoMajorRevisionError:
        return None
    candidates = sorted(compactions, key=lambda c: (c.covers.revisions, c.sequence), reverse=True)
    for compaction in candidates:
        if not compaction.usable_for(state.major, state.head_sequence, start, history):
            continue
        contained = {r.sequence for r in history if compaction.contains(r)}
        fates: dict[int, list[tuple]] = {sequence: [] for sequence in contained}
        for span in needed:
            if span.revision.sequence in contained:
                fates[span.revision.sequence].append((max(span.start, start), span.end))
        if gone <= contained and len({tuple(f) for f in fates.values()}) == 1:
            return _HistoryStart(needed, compaction, start)
    return None
