"""What a read asks for, checked and planned: pure functions of one log snapshot.

Every read of both engines — ``RevisionedDataset`` (Spark) and ``DatasetReader`` (Polars)
— is a ``ReadRequest``, checked once when it is built, planned by ``plan_read`` on one
snapshot of the log into one frozen plan that an executor (``read/execute/``) runs: the
same inputs refused with the same errors, the same revisions selected. The scan value
(``read/scan.py``) binds a request to a snapshot; the commit path and compaction plan the
states they read the same way. Nothing below a snapshot refreshes the log.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal, Protocol, TypedDict

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
from .schema import Schema, column_names, names, projected, table_schema, value_columns
from .selection import (
    Selection,
    carried_by,
    changes_by_sequence,
    changes_by_time,
    state_selection,
)
from .spans import LiveSpan, check_known_at, live_spans


class LogSnapshot(Protocol):
    """What a plan reads of a ``DatasetSnapshot`` (``read/scan.py``, the one snapshot type):
    one frozen view of a dataset's log and the dataset's root (how errors name it). Planning
    needs nothing else, so it stays below the scans and the handles."""

    @property
    def root(self) -> str: ...

    @property
    def view(self) -> LogView: ...


#: the kinds of read: a state, the changes in a window, the SCD2 history, a point-in-time
#: join of events
ReadKind = Literal["state", "changes", "history", "as_of_join"]
_KIND_NAMES = {
    "state": "a state read",
    "changes": "a change read",
    "history": "a history",
    "as_of_join": "a point-in-time join",
}
#: how each kind is called in messages
_CALLS: dict[str, str] = {
    "state": "read",
    "changes": "changes",
    "history": "history",
    "as_of_join": "as_of_join",
}
#: the options of each kind, and what to do instead of an option that does not apply
_APPLIES: dict[str, frozenset[str]] = {
    "state": frozenset({"as_of", "at", "known_at", "columns", "filters", "with_revision"}),
    "changes": frozenset(
        {
            "at",
            "known_at",
            "columns",
            "with_revision",
            "since",
            "until",
            "since_sequence",
            "until_sequence",
            "only_changed",
            "compared_columns",
        }
    ),
    "history": frozenset({"known_at", "columns", "filters", "since", "until"}),
    "as_of_join": frozenset({"known_at", "columns", "events", "event_time", "on"}),
}
_INSTEAD = {
    ("changes", "as_of"): "a change read's window is since/until",
    ("changes", "filters"): "filter the frames of its ChangeSet",
    ("history", "as_of"): "until gives the history as known at a logical time",
    ("history", "at"): "known_at gives the history as known at a commit time",
    ("history", "with_revision"): "every row of a history carries _revision",
    ("state", "compared_columns"): "it belongs to a change read: "
    "scan(...).changes(compared_columns=...)",
    ("history", "compared_columns"): "a version opens where one of its columns changes: "
    "pick them with columns=",
    ("as_of_join", "as_of"): "each event's event_time is its as-of time",
    ("as_of_join", "at"): "known_at gives the join as known at a commit time",
    ("as_of_join", "filters"): "filter events_df, or the joined frame",
    ("as_of_join", "with_revision"): "every joined row carries _revision",
}
#: what to do instead of an option of another kind of read, by kind
_OTHER_KIND = {
    "state": "it belongs to a change read or a history: scan(...).changes(...), .history(...)",
    "changes": "it belongs to a state read or a history",
    "history": "it belongs to a change read: scan(...).changes(...)",
    "as_of_join": "it belongs to a change read or a history",
}
_OPTION_NAMES = {"filters": "filter"}


class ReadOptions(TypedDict, total=False):
    """The options of a state read, as keywords: ``read``, ``scan``, ``batches`` and
    ``download`` of both handles and ``DatasetSnapshot.scan`` take them, written once here
    (the keyword arguments IDEs show for ``**options``). All optional; they combine (the
    rules are docs/concepts/read-semantics.md).

    - ``as_of``: the state as of a logical time (an aware datetime, or an ISO string with an
      offset).
    - ``at``: pinned at a position: ``HEAD``, ``HEAD~n`` (n data revisions of the table
      back), a revision name or a sequence.
    - ``known_at``: as known at a commit time: only the revisions committed by then.
    - ``columns``: the columns to return (the id columns always come first; only those are
      read from the files).
    - ``filter``: a condition on the merged state, on any column (a Polars expression in
      ``DatasetReader``, a Spark Column or SQL text on Spark): it never brings back an older
      row of an entity whose newest row it drops, and what it says about the id columns
      prunes the files and row groups read.
    - ``with_revision``: add the name, timestamp and sequence of the revision that wrote
      each row.
    """

    as_of: TimeLike | None
    at: Position
    known_at: TimeLike | None
    columns: Sequence[str] | None
    filter: Any
    with_revision: bool


def state_request(table: str, options: ReadOptions, call: str = "read") -> ReadRequest:
    """The ``ReadRequest`` of a state read of ``table`` with ``options``, checked: a keyword
    ``ReadOptions`` does not name is refused (``call`` names the method in the message)."""
    unknown = sorted(set(options) - set(ReadOptions.__annotations__))
    if unknown:
        raise InvalidArgumentError(
            f"{call}(): {', '.join(unknown)} is not an option of a state read of table "
            f"{table!r}; its options are {', '.join(ReadOptions.__annotations__)}"
        )
    given: dict[str, Any] = dict(options)
    condition = given.pop("filter", None)
    return ReadRequest(table, filters=() if condition is None else (condition,), **given)


@dataclass(frozen=True, eq=False)
class ReadRequest:
    """What one read asks for, checked when built: a state (``kind="state"``), the changes
    in a window (``"changes"``), the SCD2 history (``"history"``) of ``table``, or a
    point-in-time join of ``events`` with it (``"as_of_join"``: ``event_time``, ``on`` and
    ``known_at`` as ``as_of_join()`` takes them). (Not compared by value: its filters and
    events are engine objects, whose ``==`` builds an expression.)

    Times may be given as datetimes or ISO strings with an offset: once built they are aware
    UTC datetimes; ``columns`` (the projection, in every kind) and ``compared_columns`` (a
    change read's columns whose changes count) tuples; ``filters`` the
    conditions on the rows, in the handle's expression type (the handle checks it). An
    option that does not apply to the kind is refused, naming what to use instead.
    """

    table: str
    kind: ReadKind = "state"
    as_of: datetime | None = None
    at: Position = None
    known_at: datetime | str | None = None
    columns: Sequence[str] | None = None
    filters: tuple[Any, ...] = ()
    with_revision: bool = False
    since: datetime | None = None
    until: datetime | None = None
    since_sequence: int | None = None
    until_sequence: int | None = None
    only_changed: bool = False
    compared_columns: Sequence[str] | None = None
    events: Any = None
    event_time: str | None = None
    on: Any = None

    def __post_init__(self) -> None:
        check_text(self.table, "table")
        call = _CALLS[self.kind]
        check_bool(self.with_revision, "with_revision")
        check_bool(self.only_changed, "only_changed")
        check_sequence_number(self.since_sequence, "since_sequence", optional=True)
        check_sequence_number(self.until_sequence, "until_sequence", optional=True)
        given = {
            "as_of": self.as_of is not None,
            "at": self.at is not None,
            "known_at": self.known_at is not None,
            "columns": self.columns is not None,
            "filters": bool(self.filters),
            "with_revision": self.with_revision,
            "since": self.since is not None,
            "until": self.until is not None,
            "since_sequence": self.since_sequence is not None,
            "until_sequence": self.until_sequence is not None,
            "only_changed": self.only_changed,
            "compared_columns": self.compared_columns is not None,
            "events": self.events is not None,
            "event_time": self.event_time is not None,
            "on": self.on is not None,
        }
        for option, present in given.items():
            if present and option not in _APPLIES[self.kind]:
                instead = _INSTEAD.get((self.kind, option), _OTHER_KIND[self.kind])
                raise InvalidArgumentError(
                    f"{call}(): {_OPTION_NAMES.get(option, option)} does not apply to "
                    f"{_KIND_NAMES[self.kind]} of table {self.table!r}: {instead}"
                )
        by_sequence = given["since_sequence"] or given["until_sequence"]
        if by_sequence and (given["since"] or given["until"] or given["at"] or given["known_at"]):
            raise InvalidArgumentError(
                "changes(): give either since/until/at/known_at (times, a pinned position) or "
                f"since_sequence/until_sequence, not both (got since={self.since!r}, "
                f"until={self.until!r}, at={self.at!r}, known_at={self.known_at!r}, "
                f"since_sequence={self.since_sequence}, until_sequence={self.until_sequence})"
            )
        times = ["as_of", "since", "until", "known_at"]
        if self.kind == "as_of_join":  # known_at: also "event" or "all_committed"
            if self.events is None:
                raise InvalidArgumentError(f"as_of_join(): give the events of table {self.table!r}")
            object.__setattr__(self, "known_at", check_known_at(self.known_at))
            times.remove("known_at")
        for option in times:
            value = getattr(self, option)
            if value is not None:
                object.__setattr__(self, option, to_utc(value, option))
        if (
            self.kind == "changes"
            and self.since is not None
            and self.until is not None
            and self.since > self.until
        ):
            raise InvalidArgumentError(
                f"changes(): since {self.since.isoformat()} is after until "
                f"{self.until.isoformat()}; the window is (since, until]: swap them"
            )
        if None not in (self.since_sequence, self.until_sequence) and (
            self.since_sequence > self.until_sequence
        ):
            raise InvalidArgumentError(
                f"changes(): since_sequence {self.since_sequence} is after until_sequence "
                f"{self.until_sequence}; swap them"
            )
        for option in ("columns", "compared_columns"):
            value = getattr(self, option)
            if value is not None:
                object.__setattr__(self, option, column_names(value, call, option))
        object.__setattr__(self, "filters", tuple(self.filters))

    @property
    def call(self) -> str:
        """How the read is called in messages: ``read``, ``changes``, ``history`` or
        ``as_of_join``."""
        return _CALLS[self.kind]


def plan_read(snapshot: LogSnapshot, request: ReadRequest) -> StatePlan | ChangePlan | HistoryPlan:
    """The plan of ``request`` on ``snapshot``: what every read runs (a point-in-time join is
    planned by ``as_of_join.py``, which prunes by its events' keys: ``Scan`` plans it)."""
    if request.kind == "changes":
        return _plan_changes(snapshot, request)
    if request.kind == "history":
        return _plan_history(snapshot, request)
    return _plan_state(snapshot, request)


def plan_state(snapshot: LogSnapshot, table: str, **options: Any) -> StatePlan:
    """The plan of a state read of ``table`` (``ReadRequest``'s options): how a state scan
    reads, and how the engine's own layers read a state (what a commit compares with, what
    compaction rewrites, what verify and the command line summarize, ``inspect``). The
    default read (no options) is planned once per view of the log."""
    if options:
        return _plan_state(snapshot, ReadRequest(table, **options))
    return snapshot.view.memo(
        ("plan_state", snapshot.root, table), lambda: _plan_state(snapshot, ReadRequest(table))
    )


def current_schema(snapshot: LogSnapshot, table: str) -> Schema:
    """The schema a read of ``table`` at the head returns (its latest major plus the columns
    later revisions added); a table with no major yet: the schema its revisions wrote."""
    try:
        return plan_state(snapshot, table).rows.schema
    except (NoMajorRevisionError, RetentionError):
        return table_schema(snapshot.view.table_revisions(table), table)


def plan_changes(snapshot: LogSnapshot, table: str, **options: Any) -> ChangePlan:
    """The plan of a change read of ``table`` (``ReadRequest``'s options)."""
    return _plan_changes(snapshot, ReadRequest(table, "changes", **options))


def plan_history(snapshot: LogSnapshot, table: str, **options: Any) -> HistoryPlan:
    """The plan of the SCD2 history of ``table`` (``ReadRequest``'s options)."""
    return _plan_history(snapshot, ReadRequest(table, "history", **options))


# -- state reads ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StatePlan:
    """A state read: its selection and the merge that reads it. ``select``: the columns to
    return after the filters, when a filter may name a column the read does not return
    (the merge then reads every column); None: the merge's columns."""

    selection: Selection
    rows: MergePlan
    select: tuple[str, ...] | None = None

    @property
    def what(self) -> str:
        return self.rows.what

    @property
    def files(self) -> list[tuple[str, str]]:
        return self.rows.files

    @property
    def scanned(self) -> list[ScanTask]:
        return self.rows.scanned


def _plan_state(snapshot: LogSnapshot, request: ReadRequest) -> StatePlan:
    """The state of a table as of a time, as known at a commit time and/or pinned at a
    position (docs/concepts/read-semantics.md); ``columns``: only these value columns."""
    table, as_of, known_at = request.table, request.as_of, request.known_at
    pinned = resolve_position(snapshot.view.records, table, request.at)
    history = snapshot.view.table_revisions(table)
    selection = state_selection(history, table, as_of, pinned, known_at)
    what = f"read of table {table!r}"
    what += f" as of {as_of.isoformat()}" if as_of is not None else ""
    what += f" as known at {known_at.isoformat()}" if known_at is not None else ""
    what += f" at sequence {pinned}" if request.at is not None else ""
    rows = plan_merge(snapshot.view, selection, f"{snapshot.root}: {what}")
    projected_rows = project(rows, request.columns, "read")
    if request.filters and request.columns is not None:
        return StatePlan(selection, rows, tuple(names(projected_rows.schema)))
    return StatePlan(selection, projected_rows)


def project(plan: MergePlan, columns: Sequence[str] | None, call: str) -> MergePlan:
    """``plan`` reading only the id columns and ``columns`` (checked against its schema)."""
    if columns is None:
        return plan
    return replace(plan, schema=projected(plan.schema, plan.id_columns, columns, plan.table, call))


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
    ``schema``: the columns the rows are read with (the ids, the projection and the
    compared columns). ``columns``: the columns returned, when the compared columns widen
    ``schema`` beyond them (None: ``schema``'s). ``compared``: only changes of these value
    columns count (None: all, by the row hashes the files store).
    """

    table: str
    what: str
    id_columns: tuple[str, ...]
    schema: Schema
    selection: Selection
    since_sequence: int | None
    rows: MergePlan | None
    before: MergePlan | None
    on_top: ChangedOnTop | None
    columns: tuple[str, ...] | None
    compared: tuple[str, ...] | None
    window_rows: int

    @property
    def is_reset(self) -> bool:
        return self.selection.is_reset

    @property
    def window(self) -> tuple[Revision, ...]:
        """The revisions whose entities the read reports."""
        return self.selection.window

    @property
    def until_sequence(self) -> int:
        """The head the read is pinned to (a consumer's next position)."""
        return self.selection.head_sequence

    @property
    def files(self) -> list[tuple[str, str]]:
        """Every data file the read scans, with the entry that wrote it."""
        return list(dict.fromkeys(f for p in self._plans for f in p.files))

    @property
    def scanned(self) -> list[ScanTask]:
        """Every write the read scans (what the file gate checks)."""
        return [t for p in self._plans for t in p.scanned]

    @property
    def _plans(self) -> list[MergePlan]:
        plans = [self.rows, self.before, self.on_top.rows if self.on_top else None]
        return [p for p in plans if p is not None]


def _plan_changes(snapshot: LogSnapshot, request: ReadRequest) -> ChangePlan:
    """Changes in (since, until], or since a sequence up to a pinned head
    (docs/concepts/read-semantics.md)."""
    table, since, until, known_at = request.table, request.since, request.until, request.known_at
    since_sequence, until_sequence = request.since_sequence, request.until_sequence
    view = snapshot.view
    records = view.records
    history = view.table_revisions(table)
    before: tuple[datetime | None, int | None]
    if since_sequence is not None or until_sequence is not None:
        head = until_sequence if until_sequence is not None else view.head
        head = resolve_position(records, table, head)
        selection = changes_by_sequence(history, table, since_sequence, head)
        what = f"changes of table {table!r} since sequence {since_sequence}"
        before = (None, since_sequence)
        by_sequence = True
    else:
        at_sequence = resolve_position(records, table, request.at)
        selection = changes_by_time(history, table, since, until, at_sequence, known_at)
        what = f"changes of table {table!r} since "
        what += since.isoformat() if since else "the start"
        what += f" until {until.isoformat()}" if until is not None else ""
        what += f" as known at {known_at.isoformat()}" if known_at is not None else ""
        before = (since, at_sequence) if since is not None else (None, None)
        by_sequence = False
    what = f"{snapshot.root}: {what}"
    ids = tuple(history[-1].tables[table].id_columns)
    schema = table_schema(selection.merge, table)
    compared, read, returned = _change_columns(table, request, ids, schema)
    if read is not None:
        schema = projected(schema, ids, read, table, "changes")
    start = _start_state(view, selection.table, before, known_at, what)
    rows = on_top = None
    compare = start
    if selection.window:
        rows = project(plan_merge(view, selection, what), read, "changes")
        schema = rows.schema
        if selection.is_reset:
            on_top = _changed_on_top(view, selection, start, compared, schema, what)
            if on_top is not None and not on_top.compare:
                compare = None
        elif not request.only_changed or (
            by_sequence and compared is None and _holds_only_real_changes(history, selection)
        ):
            compare = None
    return ChangePlan(
        table=table,
        what=what,
        id_columns=ids,
        schema=schema,
        selection=selection,
        since_sequence=since_sequence,
        rows=rows,
        before=_hashes_read(compare, compared, schema),
        on_top=on_top,
        columns=returned,
        compared=compared,
        window_rows=sum(r.tables[table].rows for r in selection.window),
    )


def _change_columns(
    table: str, request: ReadRequest, ids: Sequence[str], schema: Schema
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None, tuple[str, ...] | None]:
    """(the compared value columns, the columns the rows are read with, the columns
    returned when those differ) of a change read, both options checked against the
    table's columns ``schema``: an id column is accepted in either and counts for nothing
    among the compared ones (an entity's ids never change). None: every value column
    counts (the stored row hashes), every column is read, the read columns are returned."""
    compared = None
    if request.compared_columns is not None:
        named = projected(
            schema, ids, request.compared_columns, table, "changes", "compared_columns"
        )
        compared = tuple(value_columns(named, ids))
    if request.columns is None:
        return compared, None, None
    returned = tuple(names(projected(schema, ids, request.columns, table, "changes")))
    missing = [c for c in compared or () if c not in returned]
    return compared, (*returned, *missing), returned if missing else None


def _hashes_read(
    state: MergePlan | None, compared: tuple[str, ...] | None, schema: Schema
) -> MergePlan | None:
    """``state`` reading only what its row hashes need: its ids (and the hashes its files
    store), or its ids and the compared columns; a compared column the state lacks (a later
    minor added it) is read as null, typed as the rows of the read (``schema``) have it."""
    if state is None:
        return None
    own = {f.name: f for f in state.schema}
    read = {f.name: f for f in schema}
    wanted = [*state.id_columns, *(compared or ())]
    return replace(state, schema=tuple(own[c] if c in own else read[c] for c in wanted))


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
    compared: tuple[str, ...] | None,
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
    real_changes_only = (
        compared is None
        and first is not None
        and first.tables[table].rows_offered is not None
        and not first.tables[table].tombstones
        and set(carried_by(first, table)) == old
    )
    window_rows = sum(r.tables[table].rows for r in window)
    return ChangedOnTop(rows, compare=not real_changes_only, window_rows=window_rows)


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
        return [(t.entry, f) for t in self.scanned for f in t.files]

    @property
    def scanned(self) -> list[ScanTask]:
        """Every write the history scans (what the file gate checks)."""
        return [*self.tasks, *([self.base] if self.base else [])]


@dataclass(frozen=True)
class _HistoryStart:
    """Where a history after a vacuum starts, and the compaction standing for the removed
    revisions it needs."""

    spans: tuple[LiveSpan, ...]
    compaction: Compaction | None
    at: datetime


def _plan_history(snapshot: LogSnapshot, request: ReadRequest) -> HistoryPlan:
    """The SCD2 history of a table (as known at ``known_at``: from the revisions committed
    by then).

    Without a revision removed by a vacuum, from every live span's files. Else from the
    earliest time K whose later states the retained files hold (``_history_start``);
    RetentionError when K is after ``since`` (or there is no ``since``), naming K.
    """
    table, since_utc, until_utc = request.table, request.since, request.until
    columns, known_utc = request.columns, request.known_at
    view = snapshot.view
    history = view.table_revisions(table)
    compactions = [c for c in view.compactions(table) if not view.is_removed(c.sequence)]
    if known_utc is not None:
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
            options.append(max([*ends, *stamps]))
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
