"""Which id ranges a streamed merge takes one at a time, from the id ranges the log records.

A merge streams each revision's rows against the ids the revisions after it wrote
(``read/execute/polars.py``), so it holds those ids: all of them when it merges the whole
table at once. An entity's rows all lie in one range of the first id column, whichever
revision wrote them, so the merge of the whole table is the merges of any ranges that cut
the id space, stacked: each holds the newer ids of its own range only, and reads only the
files (and, by an id filter given to every Parquet scan, the row groups) that overlap it.

The rule (``id_ranges``), from what the log says before any file is opened:

* the base's files (a major's or a compaction's, clustered by id: their first-id ranges do
  not overlap) cut the id space: at each file's first id, and, for an integer first id
  column, inside a file of more than ``RANGE_ROWS`` rows at evenly spaced ids (files are
  sorted by the ids, in row groups of ``ROW_GROUP_ROWS``, so the cuts fall near row group
  boundaries); pieces are joined until each range holds about ``RANGE_ROWS`` rows of the
  base;
* the merge runs once, over the whole table, when cutting buys nothing or costs more: the
  revisions on the base wrote fewer than ``RANGED_FROM_ROWS`` rows, or the read's filters
  allow only a few ids (a lookup: the ids are held at once in little memory, and one merge
  opens each file once), a file of the plan has no
  id range in the log (an entry of an earlier release: every range would read it whole),
  the base's files overlap (not clustered: every range would read them all), the first id
  column is neither an integer nor a string, or the cuts leave one range.

The ranges are half-open ``[low, high)`` (None: unbounded), in order, and cover every id:
stacked in that order, the merges give the rows of the table range by range.
"""

from __future__ import annotations

from typing import Any

from .pruning import IdRange, keep_files
from .scans import MergePlan, ScanTask

#: the rows of the revisions on the base (as logged) from which a merge streams by id range
RANGED_FROM_ROWS = 262_144
#: the rows of the base a range aims at (32 row groups of 16,384 rows)
RANGE_ROWS = 524_288

_INTEGERS = ("byte", "short", "integer", "long")


def clustered_by_id(task: ScanTask) -> bool:
    """Whether no two files of ``task`` overlap in the range of their first id column, as
    the log records it (two may share a boundary value of a first column of several ids);
    True where the ranges are unknown (nothing to gain then)."""
    ranges = [(s.id_min[0], s.id_max[0]) for s in task.file_stats or ()]
    if any(low is None or high is None for low, high in ranges):
        return True
    ranges.sort(key=lambda r: r[0])
    return all(before[1] <= after[0] for before, after in zip(ranges, ranges[1:], strict=False))


def id_ranges(plan: MergePlan) -> tuple[IdRange, ...] | None:
    """The ranges of the first id column a streamed merge of ``plan`` takes one at a time,
    in order; None: the merge runs once over the whole table (the rule: module doc)."""
    kind = _first_id_type(plan)
    if kind is None or plan.looks_up or sum(t.rows for t in plan.newer) < RANGED_FROM_ROWS:
        return None
    if not all(_ranges_known(t) for t in plan.tasks) or not clustered_by_id(plan.base):
        return None
    cuts = _cuts(plan.base, integers=kind in _INTEGERS)
    if not cuts:
        return None
    bounds: list[Any] = [None, *cuts, None]
    return tuple(zip(bounds, bounds[1:], strict=False))


def within(task: ScanTask, low: Any, high: Any) -> ScanTask:
    """``task`` with only the files whose first-id range meets ``[low, high)`` (the rows
    and bytes theirs)."""

    def meets(stats) -> bool:
        first, last = stats.id_min[0], stats.id_max[0]
        return (low is None or last >= low) and (high is None or first < high)

    return keep_files(task, meets)


def _first_id_type(plan: MergePlan) -> str | None:
    """The Spark type of the first id column when a range merge can cut it."""
    types = {f.name: f.type for f in plan.schema}
    kind = types.get(plan.id_columns[0])
    return kind if kind in (*_INTEGERS, "string") else None


def _ranges_known(task: ScanTask) -> bool:
    stats = task.file_stats
    return (
        stats is not None
        and len(stats) == len(task.files)
        and all(s.id_min[0] is not None and s.id_max[0] is not None for s in stats)
    )


def _cuts(base: ScanTask, *, integers: bool) -> list[Any]:
    """Where ranges start, past the first: at a piece (a file, or an even part of a large
    file of integer ids) once the range before holds ``RANGE_ROWS`` rows."""
    pieces: list[tuple[Any, int]] = []
    for stats in base.file_stats or ():
        low, high = stats.id_min[0], stats.id_max[0]
        parts = max(1, stats.rows // RANGE_ROWS) if integers else 1
        span = high - low + 1 if integers else 0
        for k in range(parts):
            start = low + span * k // parts if k else low
            pieces.append((start, stats.rows // parts))
    pieces.sort(key=lambda p: p[0])
    cuts: list[Any] = []
    held = 0
    for start, rows in pieces:
        if held >= RANGE_ROWS and start > (cuts[-1] if cuts else pieces[0][0]):
            cuts.append(start)
            held = 0
        held += rows
    return cuts


def ranged_tasks(plan: MergePlan, low: Any, high: Any) -> list[ScanTask]:
    """The tasks of ``plan`` (the base first) restricted to ``[low, high)``, those left
    with no file dropped."""
    return [t for t in (within(task, low, high) for task in plan.tasks) if t.files]


__all__ = [
    "RANGED_FROM_ROWS",
    "RANGE_ROWS",
    "clustered_by_id",
    "id_ranges",
    "ranged_tasks",
    "within",
]
