"""Which revisions a read merges: pure functions of one table's history, no engine.

Every rule works on the *history of one table*: the data revisions that wrote it
(maintenance entries never enter a history). Revisions are ordered by
``Revision.key == (timestamp, sequence)``; "later wins". The rules are the docs' read
semantics (docs/concepts/read-semantics.md).

A read first selects its revisions from the history alone (``state_selection``,
``changes_by_*``): compactions and vacuums never change *which* revisions a read means.
``scans.plan_merge`` then decides *how* to read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ...errors import NoMajorRevisionError, UnknownRevisionError
from ...log.records import Revision
from ...log.view import LogView


@dataclass(frozen=True)
class Selection:
    """The revisions a read merges, in key order, and which of them are the change window.

    ``merge``: the revisions whose rows compete (the first is the oldest).
    ``window``: for change reads, the revisions whose entities are reported; a read
    restricted to them needs a semi-join only when ``restrict`` is true. An empty window
    (nothing changed) keeps the state in ``merge``, for its schema.
    """

    table: str
    major: Revision
    merge: tuple[Revision, ...]
    window: tuple[Revision, ...]
    is_reset: bool
    head_sequence: int
    as_of: datetime | None = None  # the time limit of the state the read is based on
    known_at: datetime | None = None  # only revisions committed by then are known

    @property
    def restrict(self) -> bool:
        return not self.is_reset and bool(self.window) and len(self.merge) != len(self.window)


def _visible(
    history: Sequence[Revision],
    as_of: datetime | None,
    max_sequence: int,
    known_at: datetime | None,
) -> list[Revision]:
    return [
        r
        for r in history
        if r.sequence <= max_sequence
        and (as_of is None or r.timestamp <= as_of)
        and (known_at is None or r.committed_at <= known_at)
    ]


def _latest_major(
    visible: Sequence[Revision],
    table: str,
    as_of: datetime | None,
    known_at: datetime | None,
    history: Sequence[Revision] = (),
) -> Revision:
    majors = [r for r in visible if r.is_major]
    if not majors:
        raise NoMajorRevisionError(_no_major_message(history, table, as_of, known_at))
    return max(majors, key=lambda r: r.key)


def _no_major_message(
    history: Sequence[Revision], table: str, as_of: datetime | None, known_at: datetime | None
) -> str:
    """Why no state exists, with the earliest time (or sequence) that has one."""
    when = f" as of {as_of.isoformat()}" if as_of is not None else ""
    when += f" as known at {known_at.isoformat()}" if known_at is not None else ""
    first = min((r for r in history if r.is_major), key=lambda r: r.key, default=None)
    if first is None:
        return f"table {table!r} has no major revision{when}; the first major defines the state"
    stamp = first.timestamp.isoformat()
    if as_of is not None and as_of < first.timestamp:
        return (
            f"table {table!r} has no major revision{when}: its first major {first.name!r} "
            f"(sequence {first.sequence}) is stamped {stamp}; read as of {stamp} or later"
        )
    if known_at is not None and known_at < first.committed_at:
        committed = first.committed_at.isoformat()
        return (
            f"table {table!r} has no major revision{when}: its first major {first.name!r} "
            f"(sequence {first.sequence}) was committed at {committed}; read as known at "
            f"{committed} or later"
        )
    return (
        f"table {table!r} has no major revision{when} at this position: its first major "
        f"{first.name!r} is sequence {first.sequence} ({stamp}); pin at {first.sequence} or later"
    )


def state_selection(
    history: Sequence[Revision],
    table: str,
    as_of: datetime | None = None,
    max_sequence: int | None = None,
    known_at: datetime | None = None,
) -> Selection:
    """State as of T (rules 1–3): the latest major M with timestamp <= T and every
    revision with timestamp <= T whose key is >= key(M), plus the revisions M carries (a
    carrying major keeps their state under its own rows; they are all ordered before it).
    ``known_at``: only the revisions committed at or before it exist (a bitemporal read)."""
    max_seq = max_sequence if max_sequence is not None else _max_seq(history)
    visible = _visible(history, as_of, max_seq, known_at)
    major = _latest_major(visible, table, as_of, known_at, history)
    carried = carried_by(major, table)
    merge = tuple(
        sorted(
            (r for r in visible if r.key >= major.key or r.sequence in carried),
            key=lambda r: r.key,
        )
    )
    return Selection(table, major, merge, merge, True, max_seq, as_of, known_at)


def carried_by(major: Revision, table: str) -> frozenset[int]:
    """The sequences of the revisions whose state ``major`` carries for ``table`` (empty
    for a complete major, and for entries that are not majors)."""
    if not major.is_major or table not in major.tables:
        return frozenset()
    return frozenset(major.tables[table].carries)


def head_state(view: LogView, table: str) -> Selection:
    """The state selection of ``table`` at the head of ``view`` (computed once per view)."""
    return view.memo(
        ("head_state", table), lambda: state_selection(view.table_revisions(table), table)
    )


def changes_by_time(
    history: Sequence[Revision],
    table: str,
    since: datetime | None,
    until: datetime | None,
    max_sequence: int | None = None,
    known_at: datetime | None = None,
) -> Selection:
    """Changes in (since, until]: a reset when the governing major is newer than ``since``."""
    state = state_selection(history, table, until, max_sequence, known_at)
    if since is None or state.major.timestamp > since:
        return state
    window = tuple(r for r in state.merge if r.timestamp > since)
    # the window is the tail of the state in key order: its rows are the latest ones
    merge = window or state.merge  # an empty window keeps the state (for its schema)
    return Selection(table, state.major, merge, window, False, state.head_sequence, until, known_at)


def changes_by_sequence(
    history: Sequence[Revision],
    table: str,
    since_sequence: int | None,
    until_sequence: int | None = None,
) -> Selection:
    """Changes committed after ``since_sequence`` up to the pinned head ``until_sequence``."""
    head = until_sequence if until_sequence is not None else _max_seq(history)
    if since_sequence is not None and since_sequence > head:
        raise UnknownRevisionError(
            f"table {table!r}: since_sequence {since_sequence} is after the head {head}"
        )
    state = state_selection(history, table, None, head)
    if since_sequence is None or state.major.sequence > since_sequence:
        return state
    window = tuple(r for r in state.merge if r.sequence > since_sequence)
    if not window:
        return Selection(table, state.major, state.merge, (), False, head)
    # a revision committed late with an early timestamp may be beaten by rows of revisions
    # already consumed: merge everything from the oldest window key on, report window ids only
    oldest = window[0].key
    merge = tuple(r for r in state.merge if r.key >= oldest)
    return Selection(table, state.major, merge, window, False, head)


def _max_seq(history: Sequence[Revision]) -> int:
    return max((r.sequence for r in history), default=0)
