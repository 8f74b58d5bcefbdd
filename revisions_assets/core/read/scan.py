"""The scan: one read, asked for once and bound to one snapshot of the log.

``ds.scan(table, ...)`` on either handle — or ``ds.snapshot().scan(...)``, for several
reads of one state of the log — returns a ``Scan``: a ``ReadRequest`` (what the read asks
for, checked when built) bound to one ``DatasetSnapshot``. Its builders (``select``,
``filter``, ``changes``, ``history``, ...) return new scans; nothing reads data until a
conversion runs it (``to_polars``, ``to_arrow``, ``to_batches``, ``to_pandas``,
``to_spark``, ``count``, ``to_changes``). ``plan_files`` lists the files it scans and
``download`` fetches them into a reader's cache. A scan plans once, on first use
(``read/plan/requests.py``), and passes its files through the file gate
(``execute/files.py``) before an executor scans them.

Every read of both handles is a scan: ``read``, ``changes``, ``history``, ``as_of_join``,
the reader's ``batches`` and ``download``; the CLI takes one snapshot per command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from functools import cached_property, reduce
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, Unpack

from ..arguments import check_text
from ..columns import REVISION_COLUMNS
from ..errors import InvalidArgumentError
from ..log.records import Revision
from ..log.view import LogView
from ..timeutil import TimeLike
from .execute.changes import read_changes
from .execute.files import FileGate
from .execute.frames import Executor, Rows, lazy
from .execute.history import read_history
from .plan.as_of_join import AsOfJoinPlan, plan_as_of_join
from .plan.pruning import IdBounds, id_types, pruned
from .plan.refs import Position, find_revision
from .plan.requests import (
    ChangePlan,
    HistoryPlan,
    ReadOptions,
    ReadRequest,
    StatePlan,
    current_schema,
    plan_read,
    state_request,
)
from .plan.scans import ScanTask
from .plan.schema import Schema
from .plan.spans import EVENT, KnownAt
from .results import ChangeSet, TableInfo

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd
    import polars as pl
    import pyarrow as pa
    from pyspark.sql import DataFrame

Frame = TypeVar("Frame")
SchemaT = TypeVar("SchemaT")


class ScanSource(Protocol[Frame, SchemaT]):
    """What a scan needs from its handle (``read/facade.py``'s ``DatasetReads``): where the
    dataset is, its executor and file gate, its engine's types, and the conversions it
    offers."""

    root: str
    _executor: Executor[Any]
    _gate: FileGate

    def _schema(self, schema: Schema) -> SchemaT: ...
    def _check_filter(self, condition: Any, call: str) -> None: ...
    def _id_bounds(self, condition: Any, id_types: Mapping[str, str]) -> IdBounds: ...
    def _filtered(self, frame: Any, condition: Any) -> Any: ...
    def _results(self, frames: Sequence[Any], what: str) -> list[Any]: ...
    def _joined(self, frame: Any, events_df: Any, what: str) -> Any: ...
    def _to_polars(self, scan: Scan[Frame]) -> Any: ...
    def _to_spark(self, scan: Scan[Frame]) -> Any: ...
    def _to_arrow(self, scan: Scan[Frame]) -> Any: ...
    def _to_batches(self, scan: Scan[Frame], batch_size: int | None) -> Any: ...
    def _count(self, scan: Scan[Frame]) -> int: ...
    def _download(self, scan: Scan[Frame]) -> Any: ...


@dataclass(frozen=True)
class PlannedFiles:
    """The data files of one log entry that a read scans (``Scan.plan_files()``).

    ``paths`` are relative to the dataset root: with a filter on the id columns, only the
    files whose id ranges can hold an id it allows (none: the read opens no file of the
    entry). ``rows`` (tombstones included) and ``bytes`` are those of ``paths`` as the log
    records them; ``tombstones`` is the write's count (the log counts them per write), at
    most ``rows``. ``is_compaction``: the files of a compaction, whose rows stand for the
    revisions it replaces.
    """

    table: str
    revision: str
    sequence: int
    timestamp: datetime
    paths: tuple[str, ...]
    rows: int
    tombstones: int
    bytes: int
    is_compaction: bool


class DatasetSnapshot(Generic[Frame, SchemaT]):
    """One frozen state of a dataset's log: what reads plan from.

    ``ds.snapshot()`` catches up with the log (commits by others included) and freezes
    it: its ``revisions``, ``tables`` and every ``scan`` see the same revisions, however
    many commits land meanwhile. Each read of a handle takes one of its own.

    The engine's own layers (a commit, compaction, verify, the Spark data source's driver)
    plan on a snapshot of the log alone, ``DatasetSnapshot(root, view)``: it lists and
    plans as any other, and scans nothing (``scan`` and ``tables`` need a handle's engine).
    """

    def __init__(self, root: str, view: LogView, dataset: ScanSource[Frame, SchemaT] | None = None):
        self._root = root
        self._view = view
        self._dataset = dataset

    def __repr__(self) -> str:
        return f"DatasetSnapshot({self.root!r}, head_sequence={self.head_sequence})"

    @property
    def dataset(self) -> ScanSource[Frame, SchemaT]:
        """The handle this snapshot was taken from: a ``RevisionedDataset`` or a
        ``DatasetReader``."""
        if self._dataset is None:
            raise InvalidArgumentError(
                f"this snapshot of {self._root} holds its log alone: scan on the snapshot of "
                "a handle, RevisionedDataset(root).snapshot() or DatasetReader(root).snapshot()"
            )
        return self._dataset

    @property
    def root(self) -> str:
        """The dataset's root."""
        return self._root

    @property
    def head_sequence(self) -> int:
        """The sequence of the newest log entry this snapshot holds (0: an empty log)."""
        return self._view.head

    @property
    def view(self) -> LogView:
        """The log with its maintenance entries applied (for the engine's own layers)."""
        return self._view

    def revisions(self, table: str | None = None) -> list[Revision]:
        """Every log entry as committed (maintenance entries included), or the data
        revisions of a table as reads see them (a purge's swaps applied)."""
        check_text(table, "table", optional=True)
        view = self._view
        return list(view.logged) if table is None else view.table_revisions(table)

    def revision(self, ref: Position, *, table: str | None = None) -> Revision:
        """An entry by name (or a unique prefix of one) or sequence, or a data revision by
        ``HEAD`` or ``HEAD~n``: n data revisions back among those of ``table``, as reads
        count them (without a table: among the data revisions of every table). Maintenance
        entries are never counted."""
        check_text(table, "table", optional=True)
        return find_revision(self._view.logged, ref, table)

    def tables(self) -> dict[str, TableInfo[SchemaT]]:
        """Every table with its id columns and its current schema (latest major +
        additions), in the handle's schema type."""
        view = self._view
        return {
            name: TableInfo(
                name,
                tuple(view.table_revisions(name)[-1].tables[name].id_columns),
                self.dataset._schema(current_schema(self, name)),
            )
            for name in view.tables()
        }

    def scan(self, table: str, **options: Unpack[ReadOptions]) -> Scan[Frame]:
        """A read of the state of ``table`` on this snapshot (``Scan``; ``options``:
        ``ReadOptions``, as ``read`` takes them)."""
        return Scan(self, state_request(table, options, "scan"))


@dataclass(frozen=True, eq=False)
class Scan(Generic[Frame]):
    """One read: what it asks for (``request``), bound to one ``snapshot`` of the log.

    A state read (``ds.scan(table, as_of=..., at=..., known_at=..., columns=...,
    filter=..., with_revision=...)``) by default; ``changes(...)``, ``history(...)`` and
    ``as_of_join(...)`` make it a change read, the SCD2 history or a point-in-time join, by
    the rules of docs/concepts/read-semantics.md. Builders return new scans; the conversions run the
    read. What each handle offers:

    | conversion | ``DatasetReader`` | ``RevisionedDataset`` |
    |---|---|---|
    | ``read()`` | a Polars ``DataFrame`` | a lazy Spark ``DataFrame`` |
    | ``to_polars()`` | a lazy ``LazyFrame`` | — |
    | ``to_spark()`` | — | a lazy Spark ``DataFrame`` |
    | ``to_arrow()``, ``to_pandas()``, ``count()`` | yes | yes (collected to the driver) |
    | ``to_batches()`` | a ``RecordBatchReader`` | — |
    | ``to_changes()`` | a ``ChangeSet`` of DataFrames | of Spark DataFrames |
    | ``plan_files()`` | yes | yes |
    | ``download()`` | into its cache | — |

    A conversion a handle does not offer raises ``UnsupportedConversionError`` naming the
    handle that does. The rows of a change read are its ``ChangeSet.df``.
    """

    snapshot: DatasetSnapshot[Frame, Any]
    request: ReadRequest

    def __post_init__(self) -> None:
        for condition in self.request.filters:
            self.snapshot.dataset._check_filter(condition, self.request.call)

    def __repr__(self) -> str:
        given = [
            f"{f.name}={getattr(self.request, f.name)!r}"
            for f in fields(self.request)
            if f.name not in ("table", "events") and getattr(self.request, f.name) != f.default
        ]
        options = "".join(f", {g}" for g in given)
        return (
            f"Scan({self.snapshot.root!r}, {self.request.table!r}{options}, "
            f"head_sequence={self.snapshot.head_sequence})"
        )

    # -- builders: each returns a new scan on the same snapshot ---------------------------

    def update(self, **options: Any) -> Scan[Frame]:
        """This scan with some options of its ``ReadRequest`` replaced (checked again)."""
        return Scan(self.snapshot, replace(self.request, **options))

    def select(self, *columns: str) -> Scan[Frame]:
        """Only these columns (the id columns always come first; only these are read from
        the files). A list of names is taken too."""
        if len(columns) == 1 and isinstance(columns[0], list | tuple):
            columns = tuple(columns[0])
        return self.update(columns=columns)

    def filter(self, *conditions: Any) -> Scan[Frame]:
        """Only the rows that meet every condition (a Polars expression on
        ``DatasetReader``, a Spark Column or SQL text on Spark), on the merged state: what
        a condition says about the id columns (``is_in``, ``==``, comparisons, ``between``,
        under ``&`` and ``|``) prunes the files whose id ranges in the log hold none of its
        ids before any is opened (``plan_files()`` lists the rest), and the condition
        reaches every Parquet scan of the merge, where the row groups whose min/max ids
        exclude it are skipped (files are sorted by the ids), so a lookup of a few ids
        reads a few row groups of about one file per revision; one on another column never
        brings back an older row of an entity whose newest row it drops."""
        return self.update(filters=(*self.request.filters, *conditions))

    def as_of(self, when: TimeLike | None) -> Scan[Frame]:
        """The state as of a logical time."""
        return self.update(as_of=when)

    def known_at(self, when: TimeLike | None) -> Scan[Frame]:
        """As known at a commit time: only the revisions committed by then."""
        return self.update(known_at=when)

    def at(self, position: Position) -> Scan[Frame]:
        """Pinned at ``HEAD~n``, a revision name or a sequence."""
        return self.update(at=position)

    def with_revision(self, flag: bool = True) -> Scan[Frame]:
        """With the name, timestamp and sequence of the revision that wrote each row."""
        return self.update(with_revision=flag)

    def changes(
        self,
        *,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        since_sequence: int | None = None,
        until_sequence: int | None = None,
        only_changed: bool = False,
        compared_columns: Sequence[str] | None = None,
    ) -> Scan[Frame]:
        """The changes in (since, until], or since a sequence up to a pinned head, of this
        scan's table (``changes()`` of the handles; ``at``, ``known_at``, ``with_revision``
        and the projection, ``columns`` or ``select``, carry over: only those columns are
        returned). ``compared_columns``: only changes of these columns count."""
        return self.update(
            kind="changes",
            since=since,
            until=until,
            since_sequence=since_sequence,
            until_sequence=until_sequence,
            only_changed=only_changed,
            compared_columns=compared_columns,
        )

    def history(
        self, *, since: TimeLike | None = None, until: TimeLike | None = None
    ) -> Scan[Frame]:
        """The SCD2 history of this scan's table (``history()`` of the handles;
        ``known_at``, ``columns`` and the filters carry over)."""
        return self.update(kind="history", since=since, until=until)

    def as_of_join(
        self,
        events_df: Any,
        *,
        event_time: str,
        on: Sequence[str] | Mapping[str, str],
        known_at: KnownAt = EVENT,
    ) -> Scan[Frame]:
        """A point-in-time join of ``events_df`` with this scan's table: each event row with
        the table's row as of its ``event_time``, as known at ``known_at`` (``as_of_join()``
        of the handles says what each argument takes; ``columns`` or ``select`` carry over:
        only those value columns are added). Only the files whose id ranges meet the events'
        keys are read."""
        return self.update(
            kind="as_of_join", events=events_df, event_time=event_time, on=on, known_at=known_at
        )

    # -- what it reads --------------------------------------------------------------------

    @cached_property
    def _plan(self) -> StatePlan | ChangePlan | HistoryPlan | AsOfJoinPlan:
        """The plan, reading only the files that may hold an id the filters allow (a
        point-in-time join prunes by its events' keys when it runs)."""
        request = self.request
        if request.kind == "as_of_join":
            return plan_as_of_join(
                self.snapshot, request.table, known_at=request.known_at, columns=request.columns
            )
        plan = plan_read(self.snapshot, request)
        if not self.request.filters:
            return plan
        types = id_types(plan)
        reads = self.snapshot.dataset
        bounds = [reads._id_bounds(condition, types) for condition in self.request.filters]
        return pruned(plan, reduce(IdBounds.__and__, bounds))

    def plan_files(self) -> list[PlannedFiles]:
        """The files the read scans, one entry per log entry that wrote them, oldest
        first (a change read's state before included): with a filter on the id columns,
        only the files whose id ranges (in the log) can hold an id it allows."""
        return [
            PlannedFiles(
                table=self.request.table,
                revision=t.entry,
                sequence=t.sequence,
                timestamp=t.timestamp,
                paths=t.files,
                rows=t.rows,
                tombstones=t.tombstones,
                bytes=t.bytes,
                is_compaction=t.is_compaction,
            )
            for t in plan_tasks(self._plan)
        ]

    # -- conversions ----------------------------------------------------------------------

    def read(self) -> Frame:
        """The rows as the handle's reads return them: a Polars DataFrame
        (``DatasetReader``), a lazy Spark DataFrame (``RevisionedDataset``). ``ds.read(...)``
        is ``ds.scan(...).read()``, ``ds.history(...)`` ``ds.scan(...).history(...).read()``."""
        frame = self._frames(eager=True)[0]
        return self.snapshot.dataset._results([frame], self._plan.what)[0]

    def to_polars(self) -> pl.LazyFrame:
        """The rows as a Polars ``LazyFrame`` (``DatasetReader``): a ``select`` on it
        reads only those columns, a filter on the id columns reaches the Parquet scans;
        collect it, stream it (``collect(engine="streaming")``, ``sink_parquet``) or join
        it. The merge streams: each revision's rows are anti-joined with the ids the later
        revisions wrote, so a streamed read holds those ids and about a row group per file,
        not the state; a large merge runs one id range at a time and holds the newer ids of
        one range. Its files are fetched and checked now."""
        return self.snapshot.dataset._to_polars(self)

    def to_spark(self) -> DataFrame:
        """The rows as a lazy Spark ``DataFrame`` (``RevisionedDataset``)."""
        return self.snapshot.dataset._to_spark(self)

    def to_arrow(self) -> pa.Table:
        """The rows as an Arrow table, in this process (collected to the driver on Spark)."""
        return self.snapshot.dataset._to_arrow(self)

    def to_batches(self, batch_size: int | None = None) -> pa.RecordBatchReader:
        """The rows as a stream of Arrow record batches of about ``batch_size`` rows
        (``DatasetReader``), in bounded memory (the ids of the newer revisions, of one id
        range in a large merge, and about a row group per file, as ``to_polars()``
        streams): for results larger than memory,
        or for DuckDB (``duckdb.sql("select ... from batches")``)."""
        return self.snapshot.dataset._to_batches(self, batch_size)

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame (through ``to_arrow()``: instants in UTC)."""
        return self.to_arrow().to_pandas()

    def count(self) -> int:
        """How many rows the read returns (a state read without filters reads only the id
        columns)."""
        plain = self.request.kind == "state" and not self.request.filters
        return self.snapshot.dataset._count(self.update(columns=()) if plain else self)

    def to_changes(self) -> ChangeSet[Frame]:
        """The ``ChangeSet`` of a change read (``changes(...)``): its frames in the
        handle's type (collected on ``DatasetReader``, lazy on Spark)."""
        plan = self._plan
        if not isinstance(plan, ChangePlan):
            raise InvalidArgumentError(
                f"to_changes() converts a change read; this is a {self.request.call}() of "
                f"table {self.request.table!r}: call scan(...).changes(since=...) first"
            )
        df, changed = self._frames(eager=True)
        results = self.snapshot.dataset._results(
            [df] if changed is None else [df, changed], plan.what
        )
        return ChangeSet(
            df=results[0],
            is_reset=plan.is_reset,
            revisions=plan.window,
            since_sequence=plan.since_sequence,
            until_sequence=plan.until_sequence,
            changed=results[1] if changed is not None else None,
        )

    def download(self) -> list[Path]:
        """Fetch into the reader's cache the files the read needs, and only those; their
        local paths (a read then needs no download; ``DatasetReader`` with a
        ``cache_dir``)."""
        return self.snapshot.dataset._download(self)

    # -- what the handles run -------------------------------------------------------------

    def _frames(self, eager: bool = False) -> tuple[Any, Any | None]:
        """(the rows, a reset's ``changed`` or None) as the executor's lazy frames, after
        the file gate passed every file of the plan; ``eager``: for a read collected whole
        (``Executor.eager``)."""
        reads, request, plan = self.snapshot.dataset, self.request, self._plan
        reads._gate.check(request.table, plan.scanned)
        executor = reads._executor.eager() if eager else reads._executor
        return run_plan(plan, request, executor, reads._filtered)


def plan_tasks(plan: StatePlan | ChangePlan | HistoryPlan | AsOfJoinPlan) -> list[ScanTask]:
    """The scan tasks of a plan, one per log entry whose files it reads, oldest first (a
    change read's state before included; a point-in-time join's before its events' keys
    prune them)."""
    if isinstance(plan, AsOfJoinPlan):
        tasks = plan.scanned
    elif isinstance(plan, HistoryPlan):
        tasks = [*plan.tasks, *([plan.base] if plan.base else [])]
    else:
        merges = (
            [plan.rows, plan.before, plan.on_top.rows if plan.on_top else None]
            if isinstance(plan, ChangePlan)
            else [plan.rows]
        )
        tasks = [t for m in merges if m is not None for t in (*m.tasks, *(m.only_ids_of or ()))]
    unique = {(t.sequence, t.is_compaction): t for t in tasks}
    return sorted(unique.values(), key=lambda t: (t.sequence, t.is_compaction))


def run_plan(
    plan: StatePlan | ChangePlan | HistoryPlan | AsOfJoinPlan,
    request: ReadRequest,
    executor: Executor[Any],
    filtered: Callable[[Any, Any], Any],
) -> tuple[Any, Any | None]:
    """(the rows, a reset's ``changed`` or None) of a planned read as ``executor``'s lazy
    frames, its files already through the file gate: what every conversion of a scan runs,
    and the Spark data source's workers (``revisions_assets/spark``) run on a part of one.
    ``filtered(frame, condition)`` applies one of the request's filters."""
    if isinstance(plan, AsOfJoinPlan):
        frame = executor.as_of_join(
            plan, request.events, event_time=request.event_time, on=request.on
        )
        return frame, None
    if isinstance(plan, ChangePlan):
        return read_changes(executor, plan, with_revision=request.with_revision)
    if isinstance(plan, HistoryPlan):
        frame = read_history(executor, plan)
    else:
        frame = executor.merge(plan.rows, Rows(with_revision=request.with_revision))
    for condition in request.filters:
        frame = filtered(frame, condition)
    if isinstance(plan, StatePlan) and plan.select is not None:
        system = REVISION_COLUMNS if request.with_revision else ()
        frame = lazy(frame).select(*plan.select, *system).to_native()
    return frame, None


def planned(scan: Scan[Any]) -> StatePlan | ChangePlan | HistoryPlan | AsOfJoinPlan:
    """The frozen plan of ``scan`` (made once, on first use): for the engine's own layers,
    such as the headings of the command line."""
    return scan._plan
