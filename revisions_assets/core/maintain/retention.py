"""What a vacuum may remove: pure rules over the log (docs/concepts/lifecycle.md), no Spark, no
storage.

The retention horizon, for ``retain``: S_h is the newest sequence committed at or
before ``now - retain`` (0 if none), T_h the newest logical timestamp among the data
revisions up to S_h. The reads vacuum keeps working (*allowed reads*) are the reads
pinned at a sequence >= S_h (the default: the head) and as of a time >= T_h (the
default: no limit), the change reads since a sequence >= S_h or a time >= T_h, and the
next change read of every consumer whose position is given.

Every data revision up to S_h is visible to every allowed read (its timestamp is at most
T_h), so, per table, an allowed read merges exactly those of them ordered at or after
its governing major, which is the latest major up to S_h (M_h) or a later major
committed after S_h. Hence a revision up to S_h is *needed* when:

* it is ordered at or after M_h, or M_h carries it, and no compaction that fits every
  read governed by M_h (one whose replaced set lies within M_h's merge at S_h) holds it;
* it is ordered at or after, or carried by, a major committed after S_h but ordered
  after M_h (such reads cannot use the compactions of M_h);
* it is a major that governs the default read (the newest base), or, with
  ``keep_majors``, any major;
* a consumer's next change read reports it: committed after the consumer's position
  and not voided by the latest major, unless that read is a reset.

Everything else up to S_h is removable: revisions voided by M_h and revisions held by a
compaction. Of the compactions committed up to S_h, only the one every M_h read uses
(the largest that fits) stays. A later major stamped before removed data would make
allowed reads need it: the commit refuses such a major (``write/rules.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..log.records import Revision
from ..log.view import Compaction, LogView
from ..read.plan.selection import carried_by


@dataclass(frozen=True)
class Horizon:
    """The retention horizon: the oldest position (S_h) and time (T_h) reads are kept for."""

    sequence: int
    timestamp: datetime | None  # None: no data revision at or before ``sequence``

    def describe(self) -> str:
        stamp = "no data" if self.timestamp is None else self.timestamp.isoformat()
        return f"sequence {self.sequence} ({stamp})"


def retention_horizon(records: Sequence[Revision], now: datetime, retain: timedelta) -> Horizon:
    """S_h: the newest sequence such that it and every entry before it were committed at or
    before ``now - retain``; T_h: the newest timestamp of a data revision up to S_h."""
    cutoff = now - retain
    sequence = 0
    for record in records:
        if record.committed_at > cutoff:
            break
        sequence = record.sequence
    stamps = [r.timestamp for r in records[:sequence] if r.is_data]
    return Horizon(sequence, max(stamps, default=None))


def removable(
    view: LogView,
    horizon: Horizon,
    *,
    keep_majors: bool = True,
    consumer_positions: Mapping[str, Iterable[int]] | None = None,
) -> list[Revision]:
    """The entries (data revisions and compactions) whose files no allowed read needs and
    that no earlier vacuum removed yet, in sequence order."""
    keep: set[int] = set()
    candidates: set[int] = set()
    positions = consumer_positions or {}
    for table in view.tables():
        table_keep, table_candidates = _judge_table(
            view, table, horizon.sequence, keep_majors, tuple(positions.get(table, ()))
        )
        keep |= table_keep
        candidates |= table_candidates
    # an entry of several tables goes only when every one of its tables lets it go
    return [view.records[seq - 1] for seq in sorted(candidates - keep) if not view.is_removed(seq)]


def _judge_table(
    view: LogView,
    table: str,
    horizon: int,
    keep_majors: bool,
    positions: Sequence[int],
) -> tuple[set[int], set[int]]:
    """(sequences to keep, sequences that may go) among the entries of one table."""
    history = view.table_revisions(table)
    old = [r for r in history if r.sequence <= horizon]
    old_majors = [r for r in old if r.is_major]
    if not old_majors:
        return {r.sequence for r in history}, set()  # nothing is voided or compacted yet
    m_h = max(old_majors, key=lambda r: r.key)
    carried_h = carried_by(m_h, table)
    merge_h = [r for r in old if r.key >= m_h.key or r.sequence in carried_h]

    keep = {r.sequence for r in history if r.sequence > horizon}
    base = _fitting_compaction(view, table, m_h, horizon)
    keep |= {r.sequence for r in merge_h if base is None or not base.contains(r)}
    for later in history:
        if later.is_major and later.sequence > horizon and later.key > m_h.key:
            carried = carried_by(later, table)
            keep |= {r.sequence for r in old if r.key >= later.key or r.sequence in carried}
    head_major = max((r for r in history if r.is_major), key=lambda r: r.key)
    keep.add(head_major.sequence)
    if keep_majors:
        keep |= {r.sequence for r in old_majors}
    for position in positions:
        if head_major.sequence <= position:  # not a reset: it reports what came after
            keep |= {
                r.sequence for r in history if r.sequence > position and r.key >= head_major.key
            }
    candidates = {r.sequence for r in old}

    for compaction in view.compactions(table):
        if compaction.sequence > horizon or compaction is base:
            keep.add(compaction.sequence)
        else:
            candidates.add(compaction.sequence)
    return keep, candidates


def _fitting_compaction(
    view: LogView, table: str, m_h: Revision, horizon: int
) -> Compaction | None:
    """The largest compaction whose replaced set lies within the merge of M_h at S_h: it
    fits every read governed by M_h, so the revisions it holds need not stay."""
    fitting = [
        c
        for c in view.compactions(table)
        if not view.is_removed(c.sequence)
        and c.usable_for(m_h, horizon, None, view.table_revisions(table))
    ]
    return max(fitting, key=lambda c: (c.covers.revisions, c.sequence), default=None)
