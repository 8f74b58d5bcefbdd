"""Which files a read needs: the ids its filters allow, against each file's id range in the log.

A read's filters are the engine's expressions (Polars on ``DatasetReader``, Spark on
``RevisionedDataset``); each handle turns what they say about the id columns into an
``IdBounds`` (``read/execute/polars_ids.py``, ``read/execute/spark_ids.py``): per id
column, the closed ranges its value must lie in (an ``is_in`` list is a range per value).
A plan then keeps, per ``ScanTask``, only the files whose logged ``[id_min, id_max]`` can
hold such an id (``prune``): before any file is opened, so a lookup of a few ids in files
clustered by id (majors, compactions, purges: ``write/transaction.clustered``) reads about
one file per revision.

Pruning never changes a result. The rows a filter on the ids keeps all belong to entities
whose ids it allows, and the latest row of such an entity competes only with rows of the
same entity: a file that cannot hold an allowed id holds none of them (the rows it would
give are dropped by the filter afterwards anyway), while every file that may hold one is
kept, however old, so no older row comes back. A file with no recorded range (an entry
written before the log recorded file statistics, or a column the footer keeps no
statistics for) is always kept. The SCD2 history and the changes of a few entities work
per entity too, and are pruned alike.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from decimal import Decimal
from typing import Any, TypeVar

from ...log.records import FileStats
from .requests import ChangePlan, HistoryPlan, StatePlan
from .scans import MergePlan, ScanTask

Plan = TypeVar("Plan", StatePlan, ChangePlan, HistoryPlan)

#: a closed range of one id column's values; None: unbounded on that side
IdRange = tuple[Any, Any]


@dataclass(frozen=True)
class IdBounds:
    """The ids a read may return, as its filters bound them: per id column, the sorted,
    disjoint closed ranges its value lies in (no range: no id at all). A column left out
    is not bounded. ``a & b``: both hold; ``a | b``: either does."""

    ranges: tuple[tuple[str, tuple[IdRange, ...]], ...] = ()

    @classmethod
    def of(cls, column: str, ranges: Iterable[IdRange]) -> IdBounds:
        """``column`` within ``ranges``."""
        return cls(((column, _normal(ranges)),))

    @classmethod
    def values(cls, column: str, values: Iterable[Any]) -> IdBounds:
        """``column`` equal to one of ``values`` (nulls left out: no id is null)."""
        return cls.of(column, [(v, v) for v in values if v is not None])

    @property
    def by_column(self) -> dict[str, tuple[IdRange, ...]]:
        return dict(self.ranges)

    def __and__(self, other: IdBounds) -> IdBounds:
        mine, theirs = self.by_column, other.by_column
        out = dict(mine)
        for column, ranges in theirs.items():
            out[column] = _intersection(mine[column], ranges) if column in mine else ranges
        return IdBounds(tuple(sorted(out.items())))

    def __or__(self, other: IdBounds) -> IdBounds:
        mine, theirs = self.by_column, other.by_column
        common = sorted(set(mine) & set(theirs))
        return IdBounds(tuple((c, _normal([*mine[c], *theirs[c]])) for c in common))

    @property
    def points(self) -> int | None:
        """How many ids these bounds allow when each bounded column allows single values
        (the product of their counts); None when a column allows a range."""
        if not self.ranges:
            return None
        count = 1
        for _, ranges in self.ranges:
            if any(low is None or low != high for low, high in ranges):
                return None
            count *= len(ranges)
        return count

    def may_hold(self, id_columns: Sequence[str], stats: FileStats) -> bool:
        """Whether a file of these stats (id ranges in the order of ``id_columns``) can hold
        an id these bounds allow; True where a range is unknown."""
        for column, _ in self.ranges:
            if column not in id_columns:
                continue
            n = list(id_columns).index(column)
            low, high = stats.id_min[n], stats.id_max[n]
            if low is not None and high is not None and not self.meets(column, low, high):
                return False
        return True

    def meets(self, column: str, low: Any, high: Any) -> bool:
        """Whether a value of ``column`` within ``[low, high]`` (a file's or a row group's
        range) can be one these bounds allow; True for a column they leave out."""
        ranges = self.by_column.get(column)
        try:
            return ranges is None or _meets(ranges, low, high)
        except TypeError:  # values of another type than the range's: keep it
            return True


#: a filter allowing at most this many ids is a lookup: its merge holds them at once
LOOKUP_IDS = 100_000

#: no bound on any id column: every file may hold a wanted id
EVERY_ID = IdBounds()

_INTEGERS = ("byte", "short", "integer", "long")


def typed_id(type_name: str, value: Any) -> Any:
    """``value`` as a value of an id column of the Spark type ``type_name`` as the log
    records its bounds (``FileStats.id_min``), or None when it is not one: only the Python
    type of the column is taken (an int for an integer column, a str for a string, ...),
    never a conversion (a float compared with an integer id bounds nothing)."""
    if type_name in _INTEGERS:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if type_name == "string":
        return value if isinstance(value, str) else None
    if type_name == "boolean":
        return value if isinstance(value, bool) else None
    if type_name == "date":
        return value if isinstance(value, date) and not isinstance(value, datetime) else None
    if type_name.startswith("decimal("):
        if isinstance(value, int) and not isinstance(value, bool):
            return Decimal(value)
        return value if isinstance(value, Decimal) and value.is_finite() else None
    return None


def _below(a: Any, b: Any) -> bool:
    """``a <= b`` for a range's low ``a`` and high ``b`` (None: unbounded)."""
    return a is None or b is None or a <= b


def _normal(ranges: Iterable[IdRange]) -> tuple[IdRange, ...]:
    """``ranges`` without empty ones, sorted and merged where they overlap."""
    kept = sorted(
        (r for r in ranges if _below(r[0], r[1])),
        key=lambda r: (r[0] is not None, r[0]),
    )
    out: list[IdRange] = []
    for low, high in kept:
        if out and _below(low, out[-1][1]):
            last_low, last_high = out[-1]
            wider = None if high is None or last_high is None else max(high, last_high)
            out[-1] = (last_low, wider)
        else:
            out.append((low, high))
    return tuple(out)


def _intersection(a: Sequence[IdRange], b: Sequence[IdRange]) -> tuple[IdRange, ...]:
    """The ranges in both of two normal sequences (one sweep)."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lows = [x for x in (a[i][0], b[j][0]) if x is not None]
        highs = [x for x in (a[i][1], b[j][1]) if x is not None]
        low, high = (max(lows) if lows else None), (min(highs) if highs else None)
        if _below(low, high):
            out.append((low, high))
        a_first = a[i][1] is not None and (b[j][1] is None or a[i][1] <= b[j][1])
        i, j = (i + 1, j) if a_first else (i, j + 1)
    return tuple(out)


def _meets(ranges: Sequence[IdRange], low: Any, high: Any) -> bool:
    """Whether one of the normal ``ranges`` meets ``[low, high]``: the first range that
    does not end before ``low``, found by bisection, starts at or before ``high``."""
    ends = [r[1] for r in ranges]
    open_end = bool(ends) and ends[-1] is None
    n = bisect.bisect_left(ends[:-1] if open_end else ends, low)
    return n < len(ranges) and _below(ranges[n][0], high)


def prune_task(task: ScanTask, bounds: IdBounds, id_columns: Sequence[str]) -> ScanTask:
    """``task`` with only the files that may hold an id of ``bounds``; its rows and bytes
    those of the files kept (tombstones: at most the write's). Unchanged without stats."""
    if not bounds.ranges:
        return task
    return keep_files(task, lambda stats: bounds.may_hold(id_columns, stats))


def keep_files(task: ScanTask, keep: Callable[[FileStats], bool]) -> ScanTask:
    """``task`` with only the files whose logged stats ``keep`` accepts; its rows and bytes
    those of the files kept (tombstones: at most the write's). Unchanged without stats."""
    stats = task.file_stats
    if stats is None or len(stats) != len(task.files):
        return task
    kept = [(f, s) for f, s in zip(task.files, stats, strict=True) if keep(s)]
    if len(kept) == len(stats):
        return task
    rows = sum(s.rows for _, s in kept)
    return replace(
        task,
        files=tuple(f for f, _ in kept),
        file_stats=tuple(s for _, s in kept),
        rows=rows,
        bytes=sum(s.bytes for _, s in kept),
        tombstones=min(task.tombstones, rows),
    )


def prune_merge(plan: MergePlan, bounds: IdBounds) -> MergePlan:
    """``plan`` reading only the files that may hold an id of ``bounds``."""
    if not bounds.ranges:
        return plan
    ids = plan.id_columns

    def prune(tasks: Sequence[ScanTask]) -> tuple[ScanTask, ...]:
        return tuple(prune_task(t, bounds, ids) for t in tasks)

    only = plan.only_ids_of
    return replace(
        plan,
        base=prune_task(plan.base, bounds, ids),
        newer=prune(plan.newer),
        only_ids_of=prune(only) if only is not None else None,
        looks_up=bounds.points is not None and bounds.points <= LOOKUP_IDS,
    )


def prune_tasks(
    tasks: Sequence[ScanTask], bounds: IdBounds, id_columns: Sequence[str]
) -> tuple[ScanTask, ...]:
    """Each of ``tasks`` reading only the files that may hold an id of ``bounds``."""
    return tuple(prune_task(t, bounds, id_columns) for t in tasks)


def pruned(plan: Plan, bounds: IdBounds) -> Plan:
    """A read's plan reading only the files that may hold an id of ``bounds``: a state
    read's merge, a change read's merges, the SCD2 history's spans."""
    if not bounds.ranges:
        return plan
    if isinstance(plan, StatePlan):
        return replace(plan, rows=prune_merge(plan.rows, bounds))
    if isinstance(plan, HistoryPlan):
        ids = plan.id_columns
        base = prune_task(plan.base, bounds, ids) if plan.base is not None else None
        return replace(plan, tasks=prune_tasks(plan.tasks, bounds, ids), base=base)
    on_top = plan.on_top
    if on_top is not None and on_top.rows is not None:
        on_top = replace(on_top, rows=prune_merge(on_top.rows, bounds))
    return replace(
        plan,
        rows=prune_merge(plan.rows, bounds) if plan.rows is not None else None,
        before=prune_merge(plan.before, bounds) if plan.before is not None else None,
        on_top=on_top,
    )


def id_types(plan: Plan) -> dict[str, str]:
    """The Spark type name of each id column a plan reads (what ``typed_id`` takes)."""
    if isinstance(plan, StatePlan):
        ids, schema = plan.rows.id_columns, plan.rows.schema
    else:
        ids, schema = plan.id_columns, plan.schema
    types = {f.name: f.type for f in schema}
    return {c: t for c in ids if isinstance(t := types.get(c), str)}


def key_bounds(ranges: Mapping[str, tuple[Any, Any]], id_types: Mapping[str, str]) -> IdBounds:
    """The ids some keys can match, from each id column's (smallest, largest) key (as
    ``typed_id`` takes them; a column whose range is unknown or of another type is not
    bounded): what a point-in-time join prunes by, from its events' keys."""
    bounds = EVERY_ID
    for column, (low, high) in ranges.items():
        low, high = (
            typed_id(id_types.get(column, ""), low),
            typed_id(id_types.get(column, ""), high),
        )
        if low is not None and high is not None:
            bounds = bounds & IdBounds.of(column, [(low, high)])
    return bounds


__all__ = [
    "EVERY_ID",
    "IdBounds",
    "IdRange",
    "key_bounds",
    "keep_files",
    "id_types",
    "prune_merge",
    "prune_task",
    "prune_tasks",
    "pruned",
    "typed_id",
]
