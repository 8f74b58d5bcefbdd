"""When each revision's rows are part of a table's state: the spans behind the SCD2 history
(in logical time) and behind point-in-time joins (on an event's time axis). Pure functions
of the log.

The state only changes at revision timestamps. A revision takes part in the state as of T
for one interval of T: from its timestamp (once some major governs) until a later major
that does not carry it voids it. A carrying major keeps the revisions it carries: the
piece of their span after it ranks just before the major (``carried_pieces``), so that "a
later-ranked span never ends before an earlier one" holds for the plans that cut each
row's span at the entity's next row.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal, TypeVar

from ...errors import ArgumentTypeError
from ...log.records import Revision
from ...timeutil import TimeLike, to_micros, to_utc
from ...uris import describe
from .selection import carried_by

#: ``known_at="event"`` of a point-in-time join (the default): what was known at each
#: event's own time, so a correction committed after the event never leaks into its row
EVENT = "event"
#: ``known_at="all_committed"``: every revision committed so far, corrections made after the
#: events included (what a training set must not see, unless asked for)
ALL_COMMITTED = "all_committed"
KnownAt = TimeLike | Literal["event", "all_committed"] | None


@dataclass(frozen=True)
class LiveSpan:
    """When one revision's rows take part in the state of their table, in logical time.

    For every T in ``[start, end)`` the revision is in the state-as-of-T set of
    docs/concepts/read-semantics.md, so
    each of its rows is the entity's state unless a later revision wrote the entity again.
    ``end`` is the time of the first later major, which voids it (None: never voided);
    ``ended_by`` is the major that governs from then on.
    """

    revision: Revision
    start: datetime
    end: datetime | None
    ended_by: Revision | None
    #: where its rows rank against other spans' rows (later wins): by default the
    #: revision's key; the piece of a span a carrying major keeps ranks just before that
    #: major (after every revision the major voids)
    rank: tuple = ()

    @property
    def order_key(self) -> tuple:
        return self.rank or (*self.revision.key, 1)


def live_spans(
    history: Sequence[Revision], table: str, until: datetime | None = None
) -> tuple[LiveSpan, ...]:
    """The live span of every revision of ``table`` with ``timestamp <= until``, in key order.

    The state only changes at revision timestamps; between two of them it is the state at
    the earlier one. A revision is in the state as of T iff its timestamp is <= T, a major
    exists at or before it, and no major with a greater key that does not carry it has a
    timestamp <= T (what a major carries stays contiguous: a major that would void a
    revision a later-stamped major carries is refused, see ``check_carried``). Revisions
    that are never in any state (before the first major, or voided by a major of their own
    timestamp) are left out. Revisions without a data change (compactions) repeat a state
    and are left out too.
    """
    ordered = sorted(
        (r for r in history if r.data_change and (until is None or r.timestamp <= until)),
        key=lambda r: r.key,
    )
    # the first major after each position that does not carry it (a carrying major keeps
    # the revisions it carries), and the major that governs from a time on (the latest of
    # the majors sharing that timestamp)
    next_major: list[Revision | None] = [None] * len(ordered)
    upcoming: Revision | None = None
    carrying: list[Revision] = []  # the carrying majors after the position, nearest first
    for i in range(len(ordered) - 1, -1, -1):
        next_major[i] = next(
            (m for m in carrying if ordered[i].sequence not in carried_by(m, table)), upcoming
        )
        if ordered[i].is_major:
            if carried_by(ordered[i], table):
                carrying.insert(0, ordered[i])
            else:
                upcoming = ordered[i]
                carrying = []  # a complete major voids everything before it
    majors_at: dict[datetime, list[Revision]] = {}  # the majors of each timestamp, by key
    for r in ordered:
        if r.is_major:
            majors_at.setdefault(r.timestamp, []).append(r)
    spans = []
    seen_major = False
    for revision, voider in zip(ordered, next_major, strict=True):
        seen_major = seen_major or revision.is_major
        if not seen_major or (voider is not None and voider.timestamp <= revision.timestamp):
            continue
        end = voider.timestamp if voider is not None else None
        ended_by = deleting_major(majors_at[end], voider, table) if voider is not None else None
        spans.append(LiveSpan(revision, revision.timestamp, end, ended_by))
    carrying = [(r, r.timestamp) for r in ordered if carried_by(r, table)]
    return tuple(carried_pieces(spans, carrying, table))


def deleting_major(majors: Sequence[Revision], voider: Revision, table: str) -> Revision:
    """The major a revision's rows are deleted by when ``voider`` voids it: of ``majors``
    (those stamped at the voider's time, in key order), the one that governs then, unless
    it carries the state of the major before it, whose absence of the entity it only keeps
    (docs/guides/versions.md: a carried deletion keeps its revision), and so on back to
    the voider."""
    n = len(majors) - 1
    while n > 0 and majors[n - 1].key >= voider.key:
        if majors[n - 1].sequence not in carried_by(majors[n], table):
            break
        n -= 1
    return majors[n]


_S = TypeVar("_S")


def carried_pieces(
    spans: Sequence[_S],
    carrying: Sequence[tuple[Revision, Any]],
    table: str,
    start: str = "start",
    end: str = "end",
) -> list[_S]:
    """``spans`` cut where a carrying major starts to keep their revision, in rank order.

    A revision's rows win against a later revision's only before the later one ends, and a
    revision a carrying major keeps outlives the revisions (ordered after it) that the
    major voids; cut there, each piece the major keeps ranks just before the major, so
    "a later-ranked span never ends before an earlier one" holds again, which the plans
    that cut each row's span at the entity's next row rely on. ``carrying``: the carrying
    majors in key order, each with the time it starts to govern (in the unit of the spans'
    ``start``/``end`` fields); spans have a ``revision`` and a ``rank``.
    """
    out = []
    for span in spans:
        piece = span
        revision: Revision = span.revision  # type: ignore[attr-defined]
        for major, at in carrying:
            if revision.sequence not in carried_by(major, table):
                continue
            first, last = getattr(piece, start), getattr(piece, end)
            if first <= at and (last is None or at < last):
                if first < at:
                    out.append(replace(piece, **{end: at}, **_ended(piece, major)))
                rank = (major.timestamp, major.sequence, 0, *revision.key)
                piece = replace(piece, **{start: at}, rank=rank)
        out.append(piece)
    return sorted(out, key=lambda s: s.order_key)  # type: ignore[attr-defined]


def _ended(span: Any, major: Revision) -> dict[str, Any]:
    return {"ended_by": major} if hasattr(span, "ended_by") else {}


# -- point-in-time joins: spans on the event axis ----------------------------------------


@dataclass(frozen=True)
class VisibleSpan:
    """The event times ``[start_us, end_us)`` (µs; ``end_us`` None: no end) for which the
    rows of ``revision`` take part in the state as of the event, as known."""

    revision: Revision
    start_us: int
    end_us: int | None
    rank: tuple = ()  # see ``selection.carried_pieces``

    @property
    def order_key(self) -> tuple:
        return self.rank or (*self.revision.key, 1)

    def meets(self, low_us: int, high_us: int) -> bool:
        """Whether an event time in ``[low_us, high_us]`` falls in the span."""
        return self.start_us <= high_us and (self.end_us is None or self.end_us > low_us)


def visible_from(r: Revision, known_at: datetime | str | None) -> int:
    """When a revision is visible on the event axis (µs)."""
    stamp = to_micros(r.timestamp)
    return max(stamp, to_micros(r.committed_at)) if known_at == EVENT else stamp


def visible_spans(
    history: Sequence[Revision], table: str, known_at: datetime | str | None
) -> list[VisibleSpan]:
    """The non-empty visible span of every data revision of ``table``, in key order.

    ``known_at``: None (everything committed), an aware datetime (revisions committed at or
    before it), or ``"event"`` (revisions committed at or before each event's time).
    """
    if isinstance(known_at, datetime):
        history = [r for r in history if r.committed_at <= known_at]
    ordered = sorted((r for r in history if r.data_change), key=lambda r: r.key)

    def seen(r: Revision) -> int:
        return visible_from(r, known_at)

    # the earliest time a major ordered at or before (after) each revision is visible
    first_before: list[int | None] = []
    earliest: int | None = None
    for r in ordered:
        if r.is_major:
            earliest = seen(r) if earliest is None else min(earliest, seen(r))
        first_before.append(earliest)
    # the earliest time a major ordered after each revision that does not carry it is
    # visible (a carrying major keeps the revisions it carries)
    first_after: list[int | None] = [None] * len(ordered)
    earliest = None
    carrying: list[Revision] = []  # carrying majors after the position (few)
    for i in range(len(ordered) - 1, -1, -1):
        voiding = [seen(m) for m in carrying if ordered[i].sequence not in carried_by(m, table)]
        first_after[i] = (
            min([earliest, *voiding]) if earliest is not None else min(voiding, default=None)
        )
        if ordered[i].is_major:
            if carried_by(ordered[i], table):
                carrying.append(ordered[i])
            else:
                earliest = seen(ordered[i]) if earliest is None else min(earliest, seen(ordered[i]))
    spans = []
    for r, governed_from, voided_at in zip(ordered, first_before, first_after, strict=True):
        if governed_from is None:
            continue  # no major at or before it: never in a state
        start = max(seen(r), governed_from)
        if voided_at is not None and voided_at <= start:
            continue
        spans.append(VisibleSpan(r, start, voided_at))
    return spans


def check_known_at(known_at: object) -> datetime | str | None:
    """``"event"``, an aware point in time (naive ones are refused), or everything committed
    (``"all_committed"``, or None, its old spelling): returned as None, no limit."""
    if known_at is None or known_at == ALL_COMMITTED:
        return None
    if known_at == EVENT:
        return EVENT
    if isinstance(known_at, str | datetime):
        return to_utc(known_at, "known_at")
    raise ArgumentTypeError(
        f"known_at must be 'event', 'all_committed' or an aware datetime/ISO string, got "
        f"{describe(known_at)}"
    )


def warn_known_at_none(stacklevel: int) -> None:
    """``known_at=None`` on a point-in-time join: still everything committed for this release,
    with a warning naming the explicit spelling (it is refused from the next release)."""
    warnings.warn(
        "known_at=None means every revision committed so far, corrections made after the "
        "events included; pass known_at='all_committed' to keep that, or leave known_at out "
        "for what was known at each event's time (the default). known_at=None will be "
        "refused in the next release",
        FutureWarning,
        stacklevel=stacklevel + 1,
    )
