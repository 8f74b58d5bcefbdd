"""The reads both handles offer, written once: ``RevisionedDataset`` (Spark) and
``DatasetReader`` (Polars) differ only in their executor and in how a result is handed over.

Each read takes one snapshot of the log when it starts, plans on it (``read/plan/``) and
runs the plan on the handle's executor (``read/execute/``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from ..arguments import check_text
from ..columns import REVISION_COLUMNS
from ..log.records import Revision
from ..timeutil import TimeLike
from .execute.changes import read_changes
from .execute.frames import Executor, Rows, lazy
from .execute.history import read_history
from .plan.as_of_join import plan_as_of_join
from .plan.refs import Position, find_revision
from .plan.requests import Snapshot, plan_changes, plan_history, plan_state, project
from .plan.scans import current_schema
from .plan.schema import Schema, names
from .plan.spans import EVENT, KnownAt, warn_known_at_none
from .results import ChangeSet, TableInfo

Frame = TypeVar("Frame")
SchemaT = TypeVar("SchemaT")


class DatasetReads(ABC, Generic[Frame, SchemaT]):
    """Reads of one dataset: revisions, tables, state, changes and history.

    A subclass gives the root, the executor, a fresh snapshot of the log, its engine's
    schema type, how a filter applies, and how lazy frames become its results.
    """

    root: str
    _executor: Executor[Any]

    @abstractmethod
    def snapshot(self) -> Snapshot:
        """One frozen view of the log, caught up with commits by others: what a read plans
        from (each read takes one when it starts)."""

    @abstractmethod
    def _schema(self, schema: Schema) -> SchemaT:
        """A read schema in the engine's types."""

    @abstractmethod
    def _filtered(self, frame: Any, condition: Any) -> Any:
        """``frame`` keeping the rows that meet ``condition`` (an engine expression)."""

    @abstractmethod
    def _results(self, frames: Sequence[Any], what: str) -> list[Any]:
        """The results of a read from its executor's frames (``what`` names the read in
        errors)."""

    # -- the log --------------------------------------------------------------------------

    def revisions(self, table: str | None = None) -> list[Revision]:
        """Every log entry as committed (maintenance entries included), or the data
        revisions of a table as reads see them (a purge's swaps applied)."""
        check_text(table, "table", optional=True)
        view = self.snapshot().view
        return list(view.logged) if table is None else view.table_revisions(table)

    def revision(self, ref: Position, *, table: str | None = None) -> Revision:
        """An entry by name (or a unique prefix of one) or sequence, or a data revision by
        ``HEAD`` or ``HEAD~n``: n data revisions back among those of ``table``, as reads
        count them (without a table: among the data revisions of every table). Maintenance
        entries are never counted."""
        check_text(table, "table", optional=True)
        return find_revision(self.snapshot().view.logged, ref, table)

    def tables(self) -> dict[str, TableInfo[SchemaT]]:
        """Every table with its id columns and its current schema (latest major + additions)."""
        view = self.snapshot().view
        return {
            name: TableInfo(
                name,
                tuple(view.table_revisions(name)[-1].tables[name].id_columns),
                self._schema(current_schema(view, name)),
            )
            for name in view.tables()
        }

    # -- reads ----------------------------------------------------------------------------

    def read(
        self,
        table: str,
        *,
        as_of: TimeLike | None = None,
        at: Position = None,
        known_at: TimeLike | None = None,
        columns: Sequence[str] | None = None,
        filter: Any = None,
        with_revision: bool = False,
    ) -> Frame:
        """The state of ``table`` as of a logical time (``as_of``), as known at a commit
        time (``known_at``: only the revisions committed by then) and/or pinned at a
        position (``at``: ``HEAD~n``, a revision name or a sequence), by the rules of
        docs/concepts/read-semantics.md.

        ``columns``: the value columns to return (the id columns always come first; only
        those are read from the files). ``filter``: a condition on the merged state, on
        any column (a Spark Column or SQL text on Spark, a Polars expression in
        ``DatasetReader``): it never brings back an older row of an entity whose newest
        row it drops.
        """
        projected = columns if filter is None else None
        plan = plan_state(
            self.snapshot(),
            table,
            as_of=as_of,
            at=at,
            known_at=known_at,
            columns=projected,
            with_revision=with_revision,
        )
        frame = self._executor.merge(plan.rows, Rows(with_revision=with_revision))
        if filter is not None:
            frame = self._filtered(frame, filter)
            if columns is not None:
                wanted = names(project(plan.rows, columns, "read").schema)
                system = REVISION_COLUMNS if with_revision else ()
                frame = lazy(frame).select(*wanted, *system).to_native()
        return self._results([frame], plan.rows.what)[0]

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
    ) -> ChangeSet[Frame]:
        """Changes in (since, until], or since a sequence up to a pinned head
        (docs/concepts/read-semantics.md): ``.df`` with ``_deleted``, ``.is_reset``,
        ``.until_sequence`` (a consumer's next position), ``.changed`` on a reset.

        ``known_at``: the changes as known at that commit time. ``only_changed``: report
        only the entities whose row hash differs from the state before the window
        (tombstones and null hashes always count): a rewrite of the same values is no
        change. A reset carries ``changed`` either way (see ``ChangeSet``). ``columns``:
        only changes of these value columns count, for ``only_changed`` and ``changed``
        (their hash is computed at read time, old rows included); rows keep every column.
        """
        plan = plan_changes(
            self.snapshot(),
            table,
            since=since,
            until=until,
            since_sequence=since_sequence,
            until_sequence=until_sequence,
            at=at,
            known_at=known_at,
            with_revision=with_revision,
            only_changed=only_changed,
            columns=columns,
        )
        df, changed = read_changes(self._executor, plan, with_revision=with_revision)
        results = self._results([df] if changed is None else [df, changed], plan.what)
        return ChangeSet(
            df=results[0],
            is_reset=plan.is_reset,
            revisions=plan.window,
            since_sequence=plan.since_sequence,
            until_sequence=plan.until_sequence,
            changed=results[1] if changed is not None else None,
        )

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
        committed by then told it; ``columns``: the history of these value columns only (a
        version opens where one of them changes).
        """
        plan = plan_history(
            self.snapshot(), table, since=since, until=until, known_at=known_at, columns=columns
        )
        return self._results([read_history(self._executor, plan)], plan.what)[0]

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
        ``events_df``: a Spark DataFrame on Spark; a Polars DataFrame or LazyFrame (a lazy
        one gives a lazy result), or a pandas DataFrame, in ``DatasetReader``.
        """
        if known_at is None:
            warn_known_at_none(stacklevel=2)
        plan = plan_as_of_join(self.snapshot(), table, known_at=known_at, columns=columns)
        frame = self._executor.as_of_join(plan, events_df, event_time=event_time, on=on)
        return self._joined(frame, events_df, plan.what)

    def _joined(self, frame: Any, events_df: Any, what: str) -> Any:
        """The result of a point-in-time join, as the handle's other reads hand theirs over."""
        return self._results([frame], what)[0]
