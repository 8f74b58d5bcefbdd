"""The reads both handles offer, written once: ``RevisionedDataset`` (Spark) and
``DatasetReader`` (Polars) differ only in their executor, their file gate and how a scan
is converted.

Every read is a scan (``read/scan.py``): one ``ReadRequest`` bound to one snapshot of the
log, planned once (``read/plan/``) and run on the handle's executor (``read/execute/``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar, Unpack

from ..arguments import check_text
from ..errors import UnsupportedConversionError
from ..log.consumers import consumer_position
from ..log.records import Revision
from ..log.view import LogView
from ..timeutil import TimeLike
from .execute.files import FileGate
from .execute.frames import Executor
from .plan.pruning import IdBounds
from .plan.refs import Position
from .plan.requests import ReadOptions, ReadRequest, plan_state
from .plan.schema import Schema
from .plan.spans import EVENT, KnownAt, warn_known_at_none
from .results import ChangeSet, TableInfo
from .scan import DatasetSnapshot, Scan, planned

Frame = TypeVar("Frame")
SchemaT = TypeVar("SchemaT")


class DatasetReads(ABC, Generic[Frame, SchemaT]):
    """Reads of one dataset: snapshots, scans, and the reads made of them.

    A subclass gives the root, the executor, the file gate, a view of the log (caught up or
    not), its engine's schema and filter types, how lazy frames become its results, and
    the conversions of a scan it offers (the others raise ``UnsupportedConversionError``).
    """

    root: str
    _executor: Executor[Any]
    _gate: FileGate
    #: the handle that offers what this one does not (named in errors)
    _other_handle: str

    @abstractmethod
    def _log_view(self, refresh: bool) -> LogView:
        """The log as this handle holds it, first caught up with storage if ``refresh``."""

    @abstractmethod
    def _schema(self, schema: Schema) -> SchemaT:
        """A read schema in the engine's types."""

    @abstractmethod
    def _check_filter(self, condition: Any, call: str) -> None:
        """Refuse a filter that is not the engine's expression type."""

    @abstractmethod
    def _id_bounds(self, condition: Any, id_types: Mapping[str, str]) -> IdBounds:
        """The ids ``condition`` (a checked filter) allows, by id column (``id_types``: their
        Spark type names): what a plan prunes files by (``read/plan/pruning.py``)."""

    @abstractmethod
    def _filtered(self, frame: Any, condition: Any) -> Any:
        """``frame`` keeping the rows that meet ``condition`` (an engine expression)."""

    @abstractmethod
    def _results(self, frames: Sequence[Any], what: str) -> list[Any]:
        """The results of a read from its executor's frames (``what`` names the read in
        errors)."""

    @abstractmethod
    def _log_frame(self) -> Any:
        """The log as a frame, one row per entry (``inspect.log()``)."""

    # -- the log --------------------------------------------------------------------------

    def snapshot(self, *, refresh: bool = True) -> DatasetSnapshot[Frame, SchemaT]:
        """One frozen state of the log: what reads plan from (``DatasetSnapshot``). Its
        scans and lists all see the same revisions, however many commits land meanwhile.

        ``refresh=False``: the log as this handle last read it (when it opened, or at its
        last read), without reading storage; by default it first catches up with commits
        by others."""
        return DatasetSnapshot(self.root, self._log_view(refresh), self)

    def revisions(self, table: str | None = None) -> list[Revision]:
        """Every log entry as committed (maintenance entries included), or the data
        revisions of a table as reads see them (a purge's swaps applied)."""
        return self.snapshot().revisions(table)

    def revision(self, ref: Position, *, table: str | None = None) -> Revision:
        """An entry by name (or a unique prefix of one) or sequence, or a data revision by
        ``HEAD`` or ``HEAD~n``: n data revisions back among those of ``table``, as reads
        count them (without a table: among the data revisions of every table). Maintenance
        entries are never counted."""
        return self.snapshot().revision(ref, table=table)

    def tables(self) -> dict[str, TableInfo[SchemaT]]:
        """Every table with its id columns and its current schema (latest major + additions)."""
        return self.snapshot().tables()

    @property
    def inspect(self) -> DatasetInspection:
        """What the log says about the dataset, as tables and counts: ``log()``,
        ``revisions_on_base(table)``, ``upstream_position(...)``."""
        return DatasetInspection(self)

    # -- reads ----------------------------------------------------------------------------

    def scan(self, table: str, **options: Unpack[ReadOptions]) -> Scan[Frame]:
        """A read of ``table`` on a fresh snapshot of the log, not run yet (``Scan``): the
        options are ``read``'s (``ReadOptions``); its builders (``select``, ``filter``,
        ``changes``, ``history``, ``as_of_join``, ...) return new scans, its conversions
        (``to_polars``, ``to_spark``, ``to_arrow``, ``to_batches``, ``to_pandas``,
        ``count``, ``plan_files``, ``download``) run it."""
        return self.snapshot().scan(table, **options)

    def read(self, table: str, **options: Unpack[ReadOptions]) -> Frame:
        """The state of ``table`` as of a logical time (``as_of``), as known at a commit
        time (``known_at``: only the revisions committed by then) and/or pinned at a
        position (``at``: ``HEAD~n``, a revision name or a sequence), by the rules of
        docs/concepts/read-semantics.md; ``columns``, ``filter`` and ``with_revision``
        shape the rows. ``options``: ``ReadOptions``, which says what each one takes.
        ``scan(...)`` with the same options, run.
        """
        return self.scan(table, **options).read()

    def changes(
        self,
        table: str,
        *,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        since_sequence: int | None = None,
        until_sequence: int | None = None,
        at: Position = None,
        known_at: TimeLike | None = None,
        with_revision: bool = False,
        only_changed: bool = False,
        columns: Sequence[str] | None = None,
        compared_columns: Sequence[str] | None = None,
    ) -> ChangeSet[Frame]:
        """Changes in (since, until], or since a sequence up to a pinned head
        (docs/concepts/read-semantics.md): ``.df`` with ``_deleted``, ``.is_reset``,
        ``.until_sequence`` (a consumer's next position), ``.changed`` on a reset.

        ``known_at``: the changes as known at that commit time. ``only_changed``: report
        only the entities whose row hash differs from the state before the window
        (tombstones and null hashes always count): a rewrite of the same values is no
        change. A reset carries ``changed`` either way (see ``ChangeSet``).

        ``columns``: the columns to return, in ``df`` and ``changed`` (the id columns always
        come first, then ``_deleted`` and the revision columns; only those are read from the
        files). ``compared_columns``: only changes of these columns count, for
        ``only_changed`` and ``changed`` (their hash is computed at read time, old rows
        included; an id column counts for nothing); by default every value column counts,
        returned or not. ``scan(table, columns=...).changes(...)``, run.
        """
        request = ReadRequest(
            table,
            "changes",
            at=at,
            known_at=known_at,
            columns=columns,
            with_revision=with_revision,
            since=since,
            until=until,
            since_sequence=since_sequence,
            until_sequence=until_sequence,
            only_changed=only_changed,
            compared_columns=compared_columns,
        )
        return Scan(self.snapshot(), request).to_changes()

    def history(
        self,
        table: str,
        *,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        known_at: TimeLike | None = None,
        columns: Sequence[str] | None = None,
    ) -> Frame:
        """The SCD2 history of ``table`` in logical time (``read/execute/history.py``).

        The table's columns plus ``valid_from``, ``valid_to`` (null while current),
        ``is_current``, ``is_deleted`` and ``_revision``; one row per version of an entity.
        ``until``: the history as known at that logical time (like ``read(as_of=until)``);
        ``since``: only the versions still valid after it; ``known_at``: as the revisions
        committed by then told it; ``columns``: the history of these columns only (a
        version opens where one of them changes). ``scan(table).history(...)``, run.
        """
        request = ReadRequest(
            table, "history", known_at=known_at, columns=columns, since=since, until=until
        )
        return Scan(self.snapshot(), request).read()

    def as_of_join(
        self,
        events_df: Any,
        table: str,
        *,
        event_time: str,
        on: Sequence[str] | Mapping[str, str],
        known_at: KnownAt = EVENT,
        columns: Sequence[str] | None = None,
    ) -> Any:
        """A point-in-time join: each row of ``events_df`` with the row of ``table`` as of
        its ``event_time``, as known at ``known_at`` (``read/plan/as_of_join.py``), then the
        table's value columns and ``_revision`` (the revision that wrote the row); nulls
        where the entity did not exist then or was deleted. Every event row is kept.

        ``known_at``: ``"event"`` (the default: what was committed by each event's own
        time, so corrections made later never leak into a training set),
        ``"all_committed"`` (every revision committed so far, corrections included) or an
        aware time. ``on``: the event columns matching the id columns (a list of shared
        names, or ``{event column: id column}``). ``columns``: only these value columns.
        ``events_df``: a Spark DataFrame on Spark; in ``DatasetReader``, a Polars DataFrame
        or LazyFrame (a lazy one gives a lazy result) or a pandas DataFrame, and the result
        is a Polars frame whatever the input. ``event_time`` must be an instant (a time
        zone on the column, pandas included): a naive one is refused.
        ``scan(table, columns=...).as_of_join(events_df, ...)``, run.
        """
        if known_at is None:
            warn_known_at_none(stacklevel=2)
        scan = self.scan(table, columns=columns).as_of_join(
            events_df, event_time=event_time, on=on, known_at=known_at
        )
        return self._joined(scan._frames()[0], events_df, planned(scan).what)

    def _joined(self, frame: Any, events_df: Any, what: str) -> Any:
        """The result of a point-in-time join, as the handle's other reads hand theirs over."""
        return self._results([frame], what)[0]

    # -- the conversions of a scan (``read/scan.py``): each handle overrides what it offers

    def _unsupported(self, conversion: str) -> UnsupportedConversionError:
        return UnsupportedConversionError(
            f"{conversion}() is not offered by {type(self).__name__} (reading {self.root}): "
            f"open {self._other_handle}(root) and call scan(...).{conversion}() there"
        )

    def _to_polars(self, scan: Scan[Frame]) -> Any:
        raise self._unsupported("to_polars")

    def _to_spark(self, scan: Scan[Frame]) -> Any:
        raise self._unsupported("to_spark")

    def _to_batches(self, scan: Scan[Frame], batch_size: int | None) -> Any:
        raise self._unsupported("to_batches")

    def _download(self, scan: Scan[Frame]) -> Any:
        raise self._unsupported("download")

    @abstractmethod
    def _to_arrow(self, scan: Scan[Frame]) -> Any: ...

    @abstractmethod
    def _count(self, scan: Scan[Frame]) -> int: ...


class DatasetInspection:
    """What the log says about a dataset (``ds.inspect``), read on a fresh snapshot."""

    def __init__(self, reads: DatasetReads[Any, Any]):
        self._reads = reads

    def log(self) -> Any:
        """One row per log entry, in sequence order: the columns of the storage layout's
        description log, the ``kind`` of each entry and whether a vacuum removed its files
        (``vacuumed``, ``vacuumed_by``). A pandas DataFrame on ``RevisionedDataset``, a
        Polars DataFrame on ``DatasetReader``."""
        return self._reads._log_frame()

    def revisions_on_base(self, table: str) -> int:
        """How many revisions a default read of ``table`` merges on top of its base (the
        governing major, or the compaction it uses): what ``compact_after`` bounds."""
        check_text(table, "table")
        return plan_state(self._reads.snapshot(), table).rows.on_base

    def upstream_position(self, dataset: str, table: str, consumer_table: str | None = None) -> int:
        """The last upstream sequence this dataset recorded as consumed from ``table`` of
        ``dataset`` (0 if none); ``consumer_table``: as recorded by that table's commits."""
        check_text(dataset, "dataset")
        check_text(table, "table")
        check_text(consumer_table, "consumer_table", optional=True)
        records = self._reads.snapshot().view.logged
        return consumer_position(records, dataset, table, consumer_table)
