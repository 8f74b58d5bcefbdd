"""What a read asks for, checked and planned: pure functions of the log, no Spark, no Polars.

Both engines — the Spark merge of ``RevisionedDataset`` and the Polars merge of
``DatasetReader`` — take their arguments through these functions, so they refuse the same
inputs with the same errors and select the same revisions; only the merge differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ..arguments import check_bool, check_sequence_number, check_text
from ..errors import InvalidArgumentError, UnknownRevisionError
from ..log.records import Revision
from ..log.view import LogView
from ..timeutil import TimeLike, to_utc
from .selection import (
    HEAD_PATTERN,
    HistoryPlan,
    Position,
    Selection,
    changes_by_sequence,
    changes_by_time,
    live_spans,
    plan_history,
    resolve_position,
    state_selection,
)


@dataclass(frozen=True)
class StateRead:
    """A state read: the revisions it merges and how its errors name it."""

    selection: Selection
    what: str


@dataclass(frozen=True)
class ChangeRead:
    """A change read: its selection, how its errors name it, and where it starts.

    ``before`` is the (as_of, max_sequence) of the state the window starts from — what
    ``only_changed`` and a reset's ``changed`` compare with; (None, None) when the read
    has no start.
    """

    selection: Selection
    what: str
    by_sequence: bool
    before: tuple[datetime | None, int | None]
    since_sequence: int | None
    id_columns: tuple[str, ...]


def state_read(
    records: Sequence[Revision],
    view: LogView,
    table: str,
    as_of: TimeLike | None,
    at: Position,
    with_revision: bool,
) -> StateRead:
    """The state of ``table`` as of a time and/or pinned at a position (SPEC §3)."""
    check_text(table, "table")
    check_bool(with_revision, "with_revision")
    as_of_utc = to_utc(as_of, "as_of") if as_of is not None else None
    pinned = resolve_position(records, table, at)
    selection = state_selection(view.history(table), table, as_of_utc, pinned)
    what = f"read of table {table!r}"
    what += f" as of {as_of_utc.isoformat()}" if as_of_utc is not None else ""
    what += f" at sequence {pinned}" if at is not None else ""
    return StateRead(selection, what)


def change_read(
    records: Sequence[Revision],
    view: LogView,
    table: str,
    since: TimeLike | None,
    until: TimeLike | None,
    *,
    since_sequence: int | None,
    until_sequence: int | None,
    at: Position,
    with_revision: bool,
    only_changed: bool,
) -> ChangeRead:
    """Changes in (since, until], or since a sequence up to a pinned head (SPEC §3)."""
    check_text(table, "table")
    check_bool(with_revision, "with_revision")
    check_bool(only_changed, "only_changed")
    since_sequence = check_sequence_number(since_sequence, "since_sequence", optional=True)
    until_sequence = check_sequence_number(until_sequence, "until_sequence", optional=True)
    by_sequence = since_sequence is not None or until_sequence is not None
    if by_sequence and (since is not None or until is not None or at is not None):
        raise InvalidArgumentError(
            "changes(): give either since/until/at (times, a pinned position) or "
            f"since_sequence/until_sequence, not both (got since={since!r}, until={until!r}, "
            f"at={at!r}, since_sequence={since_sequence}, until_sequence={until_sequence})"
        )
    since_utc = to_utc(since, "since") if since is not None else None
    until_utc = to_utc(until, "until") if until is not None else None
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
    history = view.history(table)
    if by_sequence:
        head = until_sequence if until_sequence is not None else _head(records)
        head = resolve_position(records, table, head)
        selection = changes_by_sequence(history, table, since_sequence, head)
        what = f"changes of table {table!r} since sequence {since_sequence}"
        before: tuple[datetime | None, int | None] = (None, since_sequence)
    else:
        at_sequence = resolve_position(records, table, at)
        selection = changes_by_time(history, table, since_utc, until_utc, at_sequence)
        what = f"changes of table {table!r} since "
        what += since_utc.isoformat() if since_utc else "the start"
        what += f" until {until_utc.isoformat()}" if until_utc is not None else ""
        before = (since_utc, at_sequence) if since_utc is not None else (None, None)
    ids = history[-1].tables[table].id_columns
    return ChangeRead(selection, what, by_sequence, before, since_sequence, ids)


def history_read(
    view: LogView, root: str, table: str, since: TimeLike | None, until: TimeLike | None
) -> tuple[HistoryPlan, datetime | None]:
    """How an SCD2 history of ``table`` is read (``plan_history``) and its ``since`` in UTC.

    Raises RetentionError when a vacuum removed files the history since ``since`` needs,
    naming the earliest time it can start from.
    """
    check_text(table, "table")
    history = view.history(table)
    until_utc = to_utc(until, "until") if until is not None else None
    since_utc = to_utc(since, "since") if since is not None else None
    spans = live_spans(history, table, until_utc)
    what = f"{root}: history of table {table!r}"
    what += f" since {since_utc.isoformat()}" if since_utc is not None else ""
    return plan_history(view, table, spans, since_utc, what), since_utc


def find_revision(records: Sequence[Revision], ref: Position) -> Revision:
    """An entry by name or sequence, or a data revision by ``HEAD`` or ``HEAD~n`` (n data
    revisions back in the whole log; maintenance entries are not counted)."""
    match = HEAD_PATTERN.match(ref) if isinstance(ref, str) else None
    if match:
        data = [r for r in records if r.is_data]
        back = int(match.group(1) or 0)
        if not 0 <= back < len(data):
            raise UnknownRevisionError(
                f"{ref!r}: no such revision (the log has {len(data)} data revisions)"
            )
        return data[-1 - back]
    index = resolve_position(records, "", ref) - 1
    if not 0 <= index < len(records):
        raise UnknownRevisionError(f"{ref!r}: no such revision (the log has {len(records)})")
    return records[index]


def _head(records: Sequence[Revision]) -> int:
    return records[-1].sequence if records else 0
