"""What both executors do alike, written once: the executor protocol and the row diffs.

An executor (``spark.SparkExecutor``, ``polars.PolarsExecutor``) scans files and keeps the
latest row per entity of a plan in its own engine; the tail of every merge (only the
entities a window wrote, tombstones dropped, the system columns) and everything built on
top of merged rows — the real-change diff, deletions that carry only their ids, the order
of the system columns — is written here once, on Narwhals' lazy API, which runs on PySpark
DataFrames and Polars LazyFrames alike.
The change reads (``changes.py``), the SCD2 history (``history.py``) and the commit path's
comparisons (``core/write/``) use these functions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import narwhals as nw

from ...columns import DELETED, REVISION_COLUMNS, ROW_HASH, SOURCE_SEQUENCE
from ..plan.as_of_join import AsOfJoinPlan
from ..plan.scans import MergePlan, ScanTask
from ..plan.schema import Schema, names

Frame = TypeVar("Frame")
#: the column of ``span_rows`` rows giving the index of their task
SPAN_ORDER = "__order"
#: up to this many rows, the rows of some revisions are few: Spark broadcasts their ids
#: (the newer revisions of a merge, the window of a change read) instead of shuffling, and
#: the state a change window is compared with is first narrowed to the window's ids
SMALL_ROWS = 2_000_000
_BEFORE, _WAS, _NOW, _RIGHT = "__before", "__was", "__now", "__right"


@dataclass(frozen=True)
class Rows:
    """What a merge returns beside the table's columns."""

    keep_deleted: bool = False  #: tombstone rows too, flagged ``_deleted``
    with_revision: bool = False  #: the name, timestamp and sequence of each row's revision
    with_hash: bool = False  #: ``_row_hash`` (null where not recorded)
    with_sequence: bool = False  #: only ``_revision_sequence`` (what a compaction writes)


#: the default: the state's rows, the table's columns only
STATE = Rows()


@dataclass(frozen=True)
class SpanScan:
    """The rows of some revisions, each tagged with values of its revision: ``values``
    maps a column to (one value per task, its kind: "timestamp" or "string")."""

    table: str
    schema: Schema
    tasks: tuple[ScanTask, ...]
    values: dict[str, tuple[tuple[object, ...], str]]
    #: a compaction whose rows stand for tasks: the sequence that wrote a row -> its indexes
    base: ScanTask | None = None
    base_orders: tuple[tuple[int, tuple[int, ...]], ...] = ()


def system_columns(rows: Rows) -> list[str]:
    """The system columns a merge returns after the table's columns, as ``rows`` asks."""
    system = [DELETED] if rows.keep_deleted else []
    if rows.with_hash:
        system.append(ROW_HASH)
    if rows.with_revision:
        system += REVISION_COLUMNS
    elif rows.with_sequence:
        system.append(SOURCE_SEQUENCE)
    return system


class Executor(ABC, Generic[Frame]):
    """What an engine provides: scans, the latest row per entity, and the few operations it
    does its own way; the tail of a merge is written once (``merge``)."""

    def merge(self, plan: MergePlan, rows: Rows = STATE) -> Frame:
        """The latest row per entity of ``plan`` (tombstones dropped unless kept), with the
        system columns ``rows`` asks for: the engine's ``latest`` rows, then what every
        engine does alike: only the entities ``plan.only_ids_of`` wrote, tombstones
        dropped, the table's columns and then the system ones."""
        merged = self.latest(plan, rows)
        if plan.only_ids_of is not None:
            merged = self.only_entities_of(merged, plan)
        frame = lazy(merged)
        if not rows.keep_deleted and plan.tombstones:
            frame = frame.filter(~nw.col(DELETED))
        return frame.select(*names(plan.schema), *system_columns(rows)).to_native()

    def eager(self) -> Executor[Frame]:
        """The executor for a read collected whole (its result is held anyway): where an
        engine streams a large merge one id range at a time to bound memory, it merges
        in one pass."""
        return self

    @abstractmethod
    def latest(self, plan: MergePlan, rows: Rows) -> Frame:
        """The latest row per entity of ``plan``'s tasks, tombstones included, with
        ``_deleted``, ``_row_hash`` and, as ``rows`` asks, the revision columns or
        ``_revision_sequence`` (other columns may come along: ``merge`` selects)."""

    @abstractmethod
    def only_entities_of(self, frame: Frame, plan: MergePlan) -> Frame:
        """The rows of ``frame`` whose entity ``plan.only_ids_of`` wrote: a semi-join with
        their ids, built on the ids."""

    @abstractmethod
    def empty(self, schema: Schema, rows: Rows) -> Frame:
        """No rows, in ``schema`` (+ ``_deleted`` and the revision columns if ``rows`` asks)."""

    @abstractmethod
    def rehash(self, frame: Frame, columns: Sequence[str]) -> Frame:
        """``frame`` with ``_row_hash`` over ``columns`` only (null on tombstones)."""

    def broadcast(self, frame: Frame) -> Frame:
        """A hint that ``frame`` is small (Spark broadcasts it; others ignore it)."""
        return frame

    @abstractmethod
    def span_rows(self, scan: SpanScan) -> Frame:
        """Every row of every task of ``scan`` with ``SPAN_ORDER`` (its task's ``order``),
        and the rows of ``scan.base`` once per index its writer maps to, each with the
        values of ``scan.values`` at its index."""

    @abstractmethod
    def as_of_join(self, plan: AsOfJoinPlan, events: Any, *, event_time: str, on: object) -> Frame:
        """Every row of ``events`` (the engine's frame) with the row of ``plan``'s table as
        of its ``event_time``, as the plan knows it (``read/plan/as_of_join.py``)."""


def lazy(native: Any) -> nw.LazyFrame:
    """An engine's frame as a Narwhals lazy frame."""
    return nw.from_native(native).lazy()


def hinted(broadcast: Callable[[Any], Any]) -> Callable[[nw.LazyFrame], nw.LazyFrame]:
    """A broadcast hint on native frames (``Executor.broadcast``) for Narwhals frames."""
    return lambda frame: lazy(broadcast(frame.to_native()))


def _differs() -> nw.Expr:
    """A row's hash differs from the one before (a null hash, or none before: differs)."""
    hashed = nw.col(ROW_HASH)
    return ~(hashed == nw.col(_BEFORE)).fill_null(value=False) | hashed.is_null()


def real_changes(
    rows: nw.LazyFrame,
    before: nw.LazyFrame | None,
    ids: Sequence[str],
    *,
    gone: bool,
    absent_deletions: bool = True,
    narrow: Callable[[nw.LazyFrame], nw.LazyFrame] | None = None,
) -> nw.LazyFrame:
    """The rows of ``rows`` (with ``_row_hash``) that change something against ``before``
    (ids and ``_row_hash``): the real-change diff of reads, commits and soft majors.

    A row counts when its hash differs from the entity's hash before (a null hash always
    differs) or when it is a tombstone (``_deleted``; only of an entity ``before`` had,
    unless ``absent_deletions``). ``gone``: also report, as tombstones (``_deleted``, ids
    only), the entities ``before`` has and ``rows`` lacks: a complete new state against the
    one it replaces. ``before`` None: every row counts. ``narrow``: with a hint that
    ``rows`` is small, ``before`` is first narrowed to its ids (one left join, no full
    comparison of states).
    """
    ids = list(ids)
    names = rows.collect_schema().names()
    deleted = nw.col(DELETED) if DELETED in names else nw.lit(value=False)
    if before is None:
        return rows if not gone or DELETED in names else rows.with_columns(deleted.alias(DELETED))
    previous = before.select(*ids, nw.col(ROW_HASH).alias(_BEFORE), nw.lit(value=True).alias(_WAS))
    if not gone:
        if narrow is not None:
            previous = narrow(previous.join(narrow(rows.select(ids)), on=ids, how="semi"))
        joined = rows.join(previous, on=ids, how="left")
        counted = deleted if absent_deletions else deleted & ~nw.col(_WAS).is_null()
        return joined.filter(counted | (~deleted & _differs())).drop(_BEFORE, _WAS)
    joined = rows.with_columns(nw.lit(value=True).alias(_NOW)).join(
        previous, on=ids, how="full", suffix=_RIGHT
    )
    removed = nw.col(_NOW).is_null()
    return joined.filter(removed | deleted.fill_null(value=False) | _differs()).select(
        *[
            nw.coalesce(nw.col(c), nw.col(c + _RIGHT)).alias(c)
            if c in ids
            else nw.when(~removed).then(nw.col(c)).alias(c)
            for c in names
            if c not in (DELETED, ROW_HASH)
        ],
        (removed | deleted.fill_null(value=False)).alias(DELETED),
        *([nw.when(~removed).then(nw.col(ROW_HASH)).alias(ROW_HASH)] if ROW_HASH in names else []),
    )


def blank_deletions(frame: nw.LazyFrame, ids: Sequence[str]) -> nw.LazyFrame:
    """Deletion rows carry only their ids: value columns are null where ``_deleted``."""
    keep = {*ids, DELETED, ROW_HASH, *REVISION_COLUMNS}
    return frame.with_columns(
        nw.when(~nw.col(DELETED)).then(nw.col(c)).alias(c)
        for c in frame.collect_schema().names()
        if c not in keep
    )


def system_last(frame: nw.LazyFrame) -> nw.LazyFrame:
    """The table's columns, then ``_deleted`` and the revision columns."""
    names = frame.collect_schema().names()
    system = [c for c in (DELETED, *REVISION_COLUMNS) if c in names]
    return frame.select(*[c for c in names if c not in system], *system)
