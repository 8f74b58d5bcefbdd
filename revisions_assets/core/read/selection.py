"""Which revisions a read merges: pure functions of the log (SPEC §3, §8), no Spark.

Every rule works on the *history of one table*: the data revisions that wrote it
(maintenance entries never enter a history). Revisions are ordered by
``Revision.key == (timestamp, sequence)``; "later wins".

A read first selects its revisions from the history alone (``state_selection``,
``changes_by_*``): compactions and vacuums never change *which* revisions a read means.
``plan_read`` then decides *how* to read them: from a compaction that holds the state of
some of them, and from the files of the others; a revision whose files a vacuum removed
makes the read fail with ``RetentionError`` instead of returning partial data.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from ..errors import (
    ArgumentTypeError,
    CarriedStateError,
    CommitConflictError,
    ConsumerPositionConflictError,
    InvalidArgumentError,
    NoMajorRevisionError,
    RetentionError,
    UnknownRevisionError,
    UnknownTableError,
)
from ..log.records import Revision, UpstreamPosition
from ..log.view import Compaction, LogView
from ..uris import describe, redact

Position = int | str | None
HEAD_PATTERN = re.compile(r"^HEAD(?:~(\d+))?$")


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

    @property
    def restrict(self) -> bool:
        return not self.is_reset and bool(self.window) and len(self.merge) != len(self.window)


def table_history(records: Sequence[Revision], table: str) -> list[Revision]:
    """The data revisions of ``table``, in sequence order; UnknownTableError if none."""
    history = [r for r in records if r.wrote(table)]
    if not history:
        known = sorted({t for r in records if r.is_data for t in r.tables})
        raise UnknownTableError(
            f"table {table!r} has no revisions in this dataset; known tables: {known or 'none'}"
        )
    return history


def resolve_position(records: Sequence[Revision], table: str, at: Position) -> int:
    """The highest sequence a read pinned ``at`` may see.

    ``None``/``"HEAD"``: everything; ``"HEAD~n"``: n revisions back in the table's history;
    a revision name; or a sequence number.
    """
    head = records[-1].sequence if records else 0
    if at is None:
        return head
    if isinstance(at, bool) or not isinstance(at, int | str):
        raise ArgumentTypeError(
            f"at must be 'HEAD', 'HEAD~n', a revision name or a sequence number (int), "
            f"got {describe(at)}"
        )
    if isinstance(at, int):
        if at < 0:
            raise InvalidArgumentError(f"at={at}: a sequence number is >= 0")
        if at > head:
            raise UnknownRevisionError(f"sequence {at} is outside the log (1..{head})")
        return at
    match = HEAD_PATTERN.match(at)
    if match:
        back = int(match.group(1) or 0)
        history = table_history(records, table)
        if back >= len(history):
            raise UnknownRevisionError(f"{at}: table {table!r} has only {len(history)} revisions")
        return head if back == 0 else history[-1 - back].sequence
    for record in records:
        if record.name == at:
            return record.sequence
    if at.isascii() and at.isdigit():
        return resolve_position(records, table, int(at))
    raise UnknownRevisionError(f"no revision named {redact(repr(at))} in this dataset")


def _visible(history: Sequence[Revision], as_of: datetime | None, max_sequence: int):
    return [
        r for r in history if r.sequence <= max_sequence and (as_of is None or r.timestamp <= as_of)
    ]


def _latest_major(visible: Sequence[Revision], table: str, as_of: datetime | None) -> Revision:
    majors = [r for r in visible if r.is_major]
    if not majors:
        when = f" as of {as_of.isoformat()}" if as_of is not None else ""
        raise NoMajorRevisionError(
            f"table {table!r} has no major revision{when}; the first major defines the state"
        )
    return max(majors, key=lambda r: r.key)


def state_selection(
    history: Sequence[Revision],
    table: str,
    as_of: datetime | None = None,
    max_sequence: int | None = None,
) -> Selection:
    """State as of T (rules 1–3): the latest major M with timestamp <= T and every
    revision with timestamp <= T whose key is >= key(M), plus the revisions M carries (a
    carrying major keeps their state under its own rows; they are all ordered before it)."""
    max_seq = max_sequence if max_sequence is not None else _max_seq(history)
    visible = _visible(history, as_of, max_seq)
    major = _latest_major(visible, table, as_of)
    carried = carried_by(major, table)
    merge = tuple(
        sorted(
            (r for r in visible if r.key >= major.key or r.sequence in carried),
            key=lambda r: r.key,
        )
    )
    return Selection(table, major, merge, merge, True, max_seq, as_of)


def carried_by(major: Revision, table: str) -> frozenset[int]:
    """The sequences of the revisions whose state ``major`` carries for ``table`` (empty
    for a complete major, and for entries that are not majors)."""
    if not major.is_major or table not in major.tables:
        return frozenset()
    return frozenset(major.tables[table].carries)


def head_state(view: LogView, table: str) -> Selection:
    """The state selection of ``table`` at the head of ``view`` (computed once per view)."""
    return view.memo(("head_state", table), lambda: state_selection(view.history(table), table))


def changes_by_time(
    history: Sequence[Revision],
    table: str,
    since: datetime | None,
    until: datetime | None,
    max_sequence: int | None = None,
) -> Selection:
    """Changes in (since, until]: a reset when the governing major is newer than ``since``."""
    state = state_selection(history, table, until, max_sequence)
    if since is None or state.major.timestamp > since:
        return state
    window = tuple(r for r in state.merge if r.timestamp > since)
    # the window is the tail of the state in key order: its rows are the latest ones
    merge = window or state.merge  # an empty window keeps the state (for its schema)
    return Selection(table, state.major, merge, window, False, state.head_sequence, until)


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


# -- how a read is served: compactions and retention (SPEC §8) --------------------------------


@dataclass(frozen=True)
class ReadPlan:
    """How to read a selection: an optional compaction as the base, then the files of the
    other revisions of the merge.

    ``merge``: every revision whose rows compete, in key order (rows of the base carry the
    sequence of the revision that wrote them, so their order and revision columns follow).
    ``direct``: the revisions read from their own files, in key order.
    ``only_ids_of``: for change reads, report only the entities these revisions wrote.
    """

    table: str
    merge: tuple[Revision, ...]
    base: Compaction | None
    direct: tuple[Revision, ...]
    only_ids_of: tuple[Revision, ...] | None = None

    @property
    def base_is_prefix(self) -> bool:
        """Every row of the base is older than every directly read revision, so "the base
        loses against any newer row" holds (what the broadcast merge relies on)."""
        if self.base is None:
            return True
        newest = self.base.covers.timestamp
        return all(r.timestamp >= newest for r in self.direct)

    @property
    def on_base(self) -> int:
        """How many revisions are merged on top of the base (major or compaction)."""
        return len(self.direct) if self.base is not None else max(len(self.direct) - 1, 0)


def best_compaction(view: LogView, selection: Selection) -> Compaction | None:
    """The compaction (with its files) replacing the most revisions of the selection's
    state; None if no compaction of the table fits it (SPEC §8: reads use it)."""
    usable = [
        c
        for c in view.compactions(selection.table)
        if not view.is_removed(c.sequence)
        and c.usable_for(
            selection.major, selection.head_sequence, selection.as_of, view.history(selection.table)
        )
    ]
    return max(usable, key=lambda c: (c.covers.revisions, c.sequence), default=None)


def head_plan(view: LogView, table: str) -> ReadPlan:
    """How a default read of ``table`` at the head is served: its best compaction as the base
    and the revisions on top (NoMajorRevisionError before the first major)."""
    selection = head_state(view, table)
    base = best_compaction(view, selection)
    direct = tuple(r for r in selection.merge if base is None or not base.contains(r))
    return ReadPlan(table, selection.merge, base, direct)


def plan_read(view: LogView, selection: Selection, what: str) -> ReadPlan:
    """How to read ``selection``; RetentionError when it needs files a vacuum removed.

    A state read (or a reset) uses the best compaction as its base and reads the rest of
    its merge directly. A change read reads its revisions directly (they are few, and
    their ids are the ones it reports); only when some of them are gone does it take its
    state part from a compaction. ``what`` describes the read in the error message.
    """
    merge = selection.merge
    changes = not selection.is_reset
    base = None
    if not changes or any(view.is_removed(r.sequence) for r in merge):
        base = best_compaction(view, selection)
    direct = tuple(r for r in merge if base is None or not base.contains(r))
    # a change read reports the entities of its window only: a base holds all of them
    only = selection.window if selection.restrict or (changes and base is not None) else None
    for revision in (*direct, *(only or ())):
        vacuum = view.removed_by(revision.sequence)
        if vacuum is not None:
            raise RetentionError(retention_message(what, revision, vacuum))
    return ReadPlan(selection.table, merge, base, direct, only)


def retention_message(what: str, revision: Revision, vacuum: Revision) -> str:
    mark = vacuum.vacuum
    assert mark is not None
    horizon = f"sequence {mark.horizon_sequence}"
    if mark.horizon_timestamp is not None:
        horizon += f", time {mark.horizon_timestamp.isoformat()}"
    return (
        f"{what} needs revision {revision.name!r} (sequence {revision.sequence}, "
        f"{revision.timestamp.isoformat()}), whose files vacuum {vacuum.name!r} "
        f"(sequence {vacuum.sequence}) removed; its retention horizon was {horizon}: "
        "read at or after the horizon"
    )


# -- carrying majors ------------------------------------------------------------------------


def check_carried(
    view: LogView,
    table: str,
    timestamp: datetime,
    carries: Sequence[int] = (),
    compared_with: int | None = None,
) -> None:
    """The commit rules of carrying majors, re-checked on every attempt of a major.

    A major stamped before a carrying major must not void a revision that major carries
    (it would leave the state at the major's time and return at the carrying major's). A
    carrying major (``carries``, compared with the state at ``compared_with``) needs its
    carried revisions' files, and no major ordered before it may have landed since it
    compared: its carried state would not know that major.
    """
    if table not in view.tables():
        return
    history = view.history(table)
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
    landed = [
        r
        for r in history
        if r.is_major and r.sequence > (compared_with or 0) and r.timestamp <= timestamp
    ]
    if landed:
        raise CommitConflictError(
            f"table {table!r}: major {landed[0].name!r} (sequence {landed[0].sequence}) landed "
            "while a carrying major compared its rows with the state before it; nothing was "
            "committed: commit again"
        )


# -- consumer positions (SPEC §6) -------------------------------------------------------------


def consumer_position(
    records: Sequence[Revision], dataset: str, table: str, consumer_table: str | None = None
) -> int:
    """The last upstream sequence of ``dataset#table`` recorded as consumed (0 if none).

    ``consumer_table``: only revisions that wrote this table of the consumer count.
    """
    best = 0
    for r in records:
        if consumer_table is not None and consumer_table not in r.tables:
            continue
        seq = r.position_in(dataset, table)
        if seq is not None and seq > best:
            best = seq
    return best


def recorded_positions(records: Sequence[Revision]) -> dict[tuple[str, str, str], int]:
    """Every position a consumer dataset recorded: (consumer table, upstream dataset,
    upstream table) -> the last upstream sequence consumed (the maximum ever recorded)."""
    out: dict[tuple[str, str, str], int] = {}
    for r in records:
        for position in r.upstream:
            for table in r.tables:
                key = (table, position.dataset, position.table)
                out[key] = max(out.get(key, 0), position.sequence)
    return out


def unconsumed(records: Sequence[Revision], table: str, position: int) -> list[Revision]:
    """The revisions of ``table`` committed after a consumer's ``position``: its lag."""
    return [r for r in table_history(records, table) if r.sequence > position]


def moves_positions(
    records: Sequence[Revision],
    upstream: Sequence[UpstreamPosition],
    consumer_tables: Sequence[str],
) -> bool:
    """Whether committing ``upstream`` moves any recorded position of the consumer tables."""
    return any(
        p.sequence > consumer_position(records, p.dataset, p.table, t)
        for p in upstream
        for t in consumer_tables
    )


def check_positions(
    records: Sequence[Revision],
    root: str,
    consumer_tables: Sequence[str],
    upstream: Sequence[UpstreamPosition],
    expected: Mapping[tuple[str, str], int],
) -> None:
    """Positions never decrease, and a consumer commits only from the position it started at."""

    def current(dataset: str, table: str) -> int:
        return max(
            (consumer_position(records, dataset, table, t) for t in consumer_tables), default=0
        )

    for position in upstream:
        now = current(position.dataset, position.table)
        if position.sequence < now:
            raise ConsumerPositionConflictError(
                f"{root}: position in {position.key} would go back from {now} to "
                f"{position.sequence}; positions never decrease"
            )
    for (dataset, table), since in expected.items():
        now = current(dataset, table)
        if now != since:
            raise ConsumerPositionConflictError(
                f"{root}: expected to consume {dataset}#{table} from sequence "
                f"{since}, but {now} is already recorded (another run committed it)"
            )


# -- SCD2 history (SPEC §8) -------------------------------------------------------------------


@dataclass(frozen=True)
class LiveSpan:
    """When one revision's rows take part in the state of their table, in logical time.

    For every T in ``[start, end)`` the revision is in the state-as-of-T set of SPEC §3, so
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
    governing = {r.timestamp: r for r in ordered if r.is_major}  # later keys overwrite
    spans = []
    seen_major = False
    for revision, voider in zip(ordered, next_major, strict=True):
        seen_major = seen_major or revision.is_major
        if not seen_major or (voider is not None and voider.timestamp <= revision.timestamp):
            continue
        end = voider.timestamp if voider is not None else None
        ended_by = governing[end] if end is not None else None
        spans.append(LiveSpan(revision, revision.timestamp, end, ended_by))
    carrying = [(r, r.timestamp) for r in ordered if carried_by(r, table)]
    return tuple(carried_pieces(spans, carrying, table))


@dataclass(frozen=True)
class HistoryPlan:
    """How an SCD2 history is served: the live spans it merges (in rank order), an
    optional compaction whose rows stand for the spans of the revisions it contains, and
    the time the history starts from.

    ``starts_at`` None: the whole history, every span read from its revision's files.
    Else a vacuum removed revisions the whole history needs: the history starts from the
    state at ``starts_at`` (the spans live after it), and a version already open then is
    reported from ``starts_at``: its true start is at or before it, and the revisions that
    would tell are gone.
    """

    spans: tuple[LiveSpan, ...]
    base: Compaction | None = None
    starts_at: datetime | None = None

    @property
    def direct(self) -> tuple[LiveSpan, ...]:
        """The spans read from their own revision's files."""
        return tuple(
            s for s in self.spans if self.base is None or not self.base.contains(s.revision)
        )


def plan_history(
    view: LogView,
    table: str,
    spans: Sequence[LiveSpan],
    since: datetime | None,
    what: str,
) -> HistoryPlan:
    """How the history of ``spans`` (``live_spans``) since ``since`` is read.

    Without a removed revision, from every span's files. Else from the earliest revision
    time (or end of a span) K whose later states the retained files hold: the spans live
    after K, each from its own files or, for the revisions a compaction contains, from the
    compaction's rows (see ``_history_from``). RetentionError when K is after ``since``
    (or there is no ``since``), naming K.
    """
    removed = [s.revision for s in spans if view.is_removed(s.revision.sequence)]
    if not removed:
        return HistoryPlan(tuple(spans))
    times = sorted({t for s in spans for t in (s.start, s.end) if t is not None})
    earliest = _earliest_start(view, table, spans)
    first = len(times) if earliest is None else bisect.bisect_left(times, earliest)
    plan = next(
        (p for t in times[first:] if (p := _history_from(view, table, spans, t)) is not None),
        None,
    )
    if plan is not None and since is not None and plan.starts_at <= since:
        return plan
    after = [s.revision for s in spans if since is None or s.end is None or s.end > since]
    revision = next((r for r in after if view.is_removed(r.sequence)), removed[0])
    vacuum = view.removed_by(revision.sequence)
    assert vacuum is not None
    message = retention_message(what, revision, vacuum)
    if plan is not None:
        message += f"; a history can start at {plan.starts_at.isoformat()} or later (since)"
    raise RetentionError(message)


def _earliest_start(view: LogView, table: str, spans: Sequence[LiveSpan]) -> datetime | None:
    """A time before which no history can start (None: none can): the spans of removed
    revisions end at or before the start, except those of a compaction stamped at or before
    it. Spares long histories a try at every revision time."""
    options = []
    live = [c for c in view.compactions(table) if not view.is_removed(c.sequence)]
    for compaction in [None, *live]:
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


def _history_from(
    view: LogView, table: str, spans: Sequence[LiveSpan], start: datetime
) -> HistoryPlan | None:
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
        return HistoryPlan(needed, None, start)
    history = view.history(table)
    try:
        state = state_selection(history, table, start)
    except NoMajorRevisionError:
        return None
    candidates = sorted(
        (c for c in view.compactions(table) if not view.is_removed(c.sequence)),
        key=lambda c: (c.covers.revisions, c.sequence),
        reverse=True,
    )
    for compaction in candidates:
        if not compaction.usable_for(state.major, state.head_sequence, start, history):
            continue
        contained = {r.sequence for r in history if compaction.contains(r)}
        fates: dict[int, list[tuple]] = {sequence: [] for sequence in contained}
        for span in needed:
            if span.revision.sequence in contained:
                fates[span.revision.sequence].append((max(span.start, start), span.end))
        if gone <= contained and len({tuple(f) for f in fates.values()}) == 1:
            return HistoryPlan(needed, compaction, start)
    return None


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
