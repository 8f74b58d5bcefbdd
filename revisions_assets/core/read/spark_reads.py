"""The Spark reads of a dataset handle: a selection merged into one DataFrame, and change
reads with their row-hash comparisons (SPEC §3, §9). Nothing is collected to the driver.

What to read is planned by ``read.requests`` and ``read.selection`` (pure, shared with the
Polars reader); the merge plans themselves are ``read.spark_merge``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ..columns import ROW_HASH
from ..errors import (
    InvalidArgumentError,
    MissingFileError,
    NoMajorRevisionError,
    RetentionError,
    RevisionsError,
    StorageError,
)
from ..hashing import row_hash, value_columns
from ..log.records import Revision
from ..log.revision_log import RevisionLog
from ..spark_errors import storage_cause
from ..sqltext import quoted
from ..storage.base import Storage
from .data_files import check_data_files, plan_files
from .requests import ChangeRead
from .selection import ReadPlan, Selection, carried_by, plan_read, state_selection
from .spark_merge import (
    BROADCAST_MAX_ROWS,
    DELETED,
    REVISION_COLUMNS,
    MergeStrategy,
    blank_deletions,
    current_schema,
    merge_plan,
    table_schema,
)


@dataclass(frozen=True)
class ChangeSet:
    """The result of a change read.

    ``df`` has the table's columns plus ``_deleted``; when ``is_reset`` it is the full state
    and consumers must replace, not merge. ``until_sequence`` is the head the read was
    pinned to: a consumer records it as its new position.

    ``changed`` (a reset only, else None): the soft major, the entities of ``df`` whose row
    hash differs from the state at the read's ``since``/``since_sequence`` (added or changed,
    ``_deleted`` false; a null hash counts as changed), plus the entities that state had
    and ``df`` lacks (``_deleted`` true, ids only). Without a ``since`` that state is empty
    and ``changed`` holds every row of ``df``.
    """

    df: DataFrame
    is_reset: bool
    revisions: tuple[Revision, ...]
    since_sequence: int | None = None
    until_sequence: int = 0
    changed: DataFrame | None = None


class SparkReads:
    """Reads of one dataset handle on Spark: the log it walks, where its files are, the
    session (asked for only when a read runs) and the merge strategy."""

    def __init__(
        self,
        storage: Storage,
        revision_log: RevisionLog,
        spark: Callable[[], SparkSession],
        strategy: MergeStrategy,
    ):
        self.storage = storage
        self._log = revision_log
        self._spark = spark
        self.strategy = strategy
        #: data files whose last bytes were found to be Parquet (``read.data_files``)
        self.checked: set[str] = set()

    @property
    def spark(self) -> SparkSession:
        return self._spark()

    def changes(
        self,
        request: ChangeRead,
        *,
        with_revision: bool,
        only_changed: bool,
        columns: Sequence[str] | None,
    ) -> ChangeSet:
        """The ``ChangeSet`` of a change read planned by ``read.requests.change_read``."""
        selection, what, before = request.selection, request.what, request.before
        table = selection.table
        history = self._log.view().history(table)
        ids = list(request.id_columns)
        if columns is not None:
            columns = self._hashed_columns(table, columns, ids)
        changed = None
        if not selection.window:
            df = self._empty_changes(table_schema(selection.merge, table), with_revision)
        elif selection.is_reset:
            df = self.merge(selection, what, keep_deleted=False, with_revision=with_revision)
            changed = self._changed_on_top(history, selection, before, what, columns, df.schema)
            if changed is None:
                hashed = self.merge(
                    selection, what, keep_deleted=False, with_revision=with_revision, with_hash=True
                )
                previous = self.hashes_before(history, table, *before, what, columns)
                changed = _soft_major(_rehashed(hashed, columns), previous, ids)
            df = df.withColumn(DELETED, F.lit(False))
        else:
            df = self.merge(
                selection, what, keep_deleted=True, with_revision=with_revision, with_hash=True
            )
            df = _rehashed(df, columns)
            compare = only_changed and not (
                request.by_sequence
                and _holds_only_real_changes(history, table, selection.window, columns)
            )
            previous = (
                self.hashes_before(history, table, *before, what, columns) if compare else None
            )
            if previous is not None:
                window_rows = sum(r.tables[table].rows for r in selection.window)
                df = _really_changed(df, previous, ids, window_rows)
            df = blank_deletions(df.drop(ROW_HASH), ids)
        return ChangeSet(
            df=_system_last(df),
            is_reset=selection.is_reset,
            revisions=selection.window,
            since_sequence=request.since_sequence,
            until_sequence=selection.head_sequence,
            changed=_system_last(changed) if changed is not None else None,
        )

    def _changed_on_top(
        self,
        history: Sequence[Revision],
        reset: Selection,
        before: tuple[datetime | None, int | None],
        what: str,
        columns: Sequence[str] | None,
        schema: StructType,
    ) -> DataFrame | None:
        """A reset's ``changed`` without comparing two whole states, when every revision
        of the state before is still merged (a carrying major kept it): then only entities
        the other revisions wrote can differ, so ``changed`` is the change read of those
        revisions, compared with the state before unless they are one carrying major that
        compared its rows with exactly that state. None when the states do not nest."""
        table = reset.table
        if before == (None, None):
            return None
        try:
            start = state_selection(history, table, *before)
        except NoMajorRevisionError:
            return None
        old = {r.sequence for r in start.merge}
        if not old <= {r.sequence for r in reset.merge}:
            return None
        window = tuple(r for r in reset.merge if r.sequence not in old)
        ids = list(history[-1].tables[table].id_columns)
        if not window:
            return self._empty_changes(schema, False)
        merge = tuple(r for r in reset.merge if r.key >= window[0].key)
        on_top = Selection(
            table, reset.major, merge, window, False, reset.head_sequence, reset.as_of
        )
        rows = self.merge(
            on_top,
            what,
            keep_deleted=True,
            with_revision=REVISION_COLUMNS[0] in schema.names,
            with_hash=True,
        )
        rows = _rehashed(rows, columns)
        # one carrying major that compared its rows with exactly the state before wrote only
        # real changes (tombstones given to carry=True may name absent entities: compare)
        (first,) = window if len(window) == 1 else (None,)
        compared = (
            columns is None
            and first is not None
            and first.tables[table].rows_offered is not None
            and not first.tables[table].tombstones
            and set(carried_by(first, table)) == old
        )
        if not compared:
            previous = self.hashes_before(history, table, *before, what, columns)
            window_rows = sum(r.tables[table].rows for r in window)
            if previous is not None:
                rows = _really_changed(rows, previous, ids, window_rows, absent_deletions=False)
        # one select: deletions carry only their ids, in the columns of the reset's df
        present, keep = set(rows.columns), set(ids)
        return rows.selectExpr(
            *[
                quoted(f.name)
                if f.name in keep or f.name in REVISION_COLUMNS
                else f"CASE WHEN {quoted(DELETED)} THEN NULL ELSE {quoted(f.name)} END "
                f"AS {quoted(f.name)}"
                if f.name in present
                else f"CAST(NULL AS {f.dataType.simpleString()}) AS {quoted(f.name)}"
                for f in schema.fields
            ],
            quoted(DELETED),
        )

    def hashes_before(
        self,
        history: Sequence[Revision],
        table: str,
        as_of: datetime | None,
        max_sequence: int | None,
        what: str,
        columns: Sequence[str] | None = None,
    ) -> DataFrame | None:
        """The (ids, ``_row_hash``) of the state as of ``as_of`` pinned at ``max_sequence``:
        where a change read starts, or what a skip-unchanged minor replaces. None (every row
        counts as changed) when there is no start, no major by then, or a vacuum removed
        that state's files."""
        if as_of is None and max_sequence is None:
            return None
        try:
            selection = state_selection(history, table, as_of, max_sequence)
            ids = list(history[-1].tables[table].id_columns)
            state = self.merge(
                selection,
                f"{what} (the state before)",
                keep_deleted=False,
                with_revision=False,
                with_hash=True,
            )
        except (NoMajorRevisionError, RetentionError):
            return None
        return _rehashed(state, columns).select(*ids, ROW_HASH)

    def _hashed_columns(self, table: str, columns: Sequence[str], ids: Sequence[str]) -> list[str]:
        """``columns`` checked against the table's value columns."""
        if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
            raise InvalidArgumentError(
                f"changes(): columns must be a list of column names, got {columns!r}"
            )
        values = value_columns(current_schema(self._log.view(), table), ids)
        unknown = [c for c in columns if c not in values]
        if unknown:
            raise InvalidArgumentError(
                f"changes(): columns {unknown} are not value columns of table {table!r}; "
                f"its value columns are {values}"
            )
        return list(columns)

    def merge(
        self,
        selection: Selection,
        what: str,
        *,
        keep_deleted: bool,
        with_revision: bool,
        with_hash: bool = False,
    ) -> DataFrame:
        """The rows of ``selection`` as one Spark plan; a storage failure names the files."""
        plan = plan_read(self._log.view(), selection, f"{self.storage.uri}: {what}")
        check_data_files(self.storage, plan.table, plan_files(plan), self.checked)
        try:
            return merge_plan(
                self.spark,
                self.storage,
                plan,
                keep_deleted=keep_deleted,
                with_revision=with_revision,
                with_hash=with_hash,
                strategy=self.strategy,
            )
        except RevisionsError:
            raise
        except Exception as exc:
            failure = self._read_failure(plan, exc)
            if failure is None:
                raise
            raise failure from exc

    def _read_failure(self, plan: ReadPlan, exc: Exception) -> StorageError | None:
        """A storage failure of a read, naming the missing data files when files are gone."""
        cause = storage_cause(exc)
        if cause is None:
            return None
        table = plan.table
        files = [(r.name, f) for r in plan.direct for f in r.tables[table].files]
        if plan.base is not None:
            files += [(plan.base.record.name, f) for f in plan.base.write.files]
        missing = [(name, f) for name, f in files if not self.storage.exists(f)]
        if not missing:
            return StorageError(f"read table {table!r} of {self.storage.uri}: {cause}")
        name, path = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        return MissingFileError(
            f"{self.storage.uri}: data file {path} of revision {name!r}, table {table!r}, is "
            f"missing{more}: the dataset is damaged; run ds.verify() and see 'Recovering a damaged "
            "dataset' in the docs"
        )

    def _empty_changes(self, schema: StructType, with_revision: bool) -> DataFrame:
        df = self.spark.createDataFrame([], schema).withColumn(DELETED, F.lit(False))
        if with_revision:
            df = df.withColumns(
                {
                    "_revision": F.lit(None).cast("string"),
                    "_revision_timestamp": F.lit(None).cast("timestamp"),
                    "_revision_sequence": F.lit(None).cast("long"),
                }
            )
        return df


def _rehashed(df: DataFrame, columns: Sequence[str] | None) -> DataFrame:
    """``df`` with ``_row_hash`` over ``columns`` only, computed now (None: as stored)."""
    if columns is None:
        return df
    hashed = row_hash(df.schema, columns)
    if DELETED in df.columns:
        hashed = F.when(~F.col(DELETED), hashed)
    return df.withColumn(ROW_HASH, hashed)


def _system_last(df: DataFrame) -> DataFrame:
    system = [c for c in (DELETED, *REVISION_COLUMNS) if c in df.columns]
    return df.select(*[c for c in df.columns if c not in system], *system)


def _previous(previous: DataFrame, ids: Sequence[str]) -> DataFrame:
    return previous.select(*ids, F.col(ROW_HASH).alias("__before"))


def _differs() -> Column:
    """A row's hash differs from the one before (a null hash, or none before: differs)."""
    return ~F.col(ROW_HASH).eqNullSafe(F.col("__before")) | F.col(ROW_HASH).isNull()


def _holds_only_real_changes(
    history: Sequence[Revision],
    table: str,
    window: Sequence[Revision],
    columns: Sequence[str] | None,
) -> bool:
    """Whether a change window already holds only real changes, so ``only_changed`` needs
    no hash join: one minor committed with ``skip_unchanged`` in logical order (no earlier
    revision has a later timestamp) whose commit compared every row with the state just
    before it (no revision of the table landed between the head it compared with, its
    ``compared_with``, and its own sequence: a concurrent commit may have), the state a
    change read since then starts from. Hashing only some ``columns`` always compares."""
    if columns is not None or len(window) != 1:
        return False
    (minor,) = window
    compared_with = minor.tables[table].compared_with
    if minor.is_major or compared_with is None:
        return False
    earlier = [r for r in history if r.sequence < minor.sequence]
    return all(r.sequence <= compared_with and r.timestamp <= minor.timestamp for r in earlier)


def _really_changed(
    rows: DataFrame,
    previous: DataFrame,
    ids: Sequence[str],
    window_rows: int,
    absent_deletions: bool = True,
) -> DataFrame:
    """The change rows (with ``_row_hash``) that change something: tombstones (only of
    entities the state before had, unless ``absent_deletions``), and rows whose hash
    differs from the entity's before the window. One join on the ids; when the window is
    small (the log's row counts), the state before is narrowed to the window's ids by a
    broadcast semi-join and broadcast itself: the state is scanned, never shuffled."""
    before = _previous(previous, ids).withColumn("__was", F.lit(True))
    if window_rows <= BROADCAST_MAX_ROWS:
        touched = F.broadcast(rows.select(*ids))
        before = F.broadcast(before.join(touched, on=list(ids), how="left_semi"))
    joined = rows.join(before, on=list(ids), how="left")
    deleted = F.col(DELETED) if absent_deletions else F.col(DELETED) & F.col("__was").isNotNull()
    return joined.where(deleted | (~F.col(DELETED) & _differs())).drop("__before", "__was")


def _soft_major(state: DataFrame, previous: DataFrame | None, ids: Sequence[str]) -> DataFrame:
    """A reset's ``changed``: the rows of ``state`` (with ``_row_hash``) whose hash differs
    from ``previous``, and the ids ``previous`` has and ``state`` lacks as tombstones. One
    full outer join on the ids."""
    columns = [c for c in state.columns if c != ROW_HASH]
    if previous is None:
        return state.select(*columns, F.lit(False).alias(DELETED))
    joined = state.withColumn("__now", F.lit(True)).join(
        _previous(previous, ids), on=list(ids), how="full_outer"
    )
    removed = F.col("__now").isNull()
    kept = joined.where(removed | _differs())
    return kept.select(
        *[F.col(c) if c in ids else F.when(~removed, F.col(c)).alias(c) for c in columns],
        removed.alias(DELETED),
    )


__all__ = ["ChangeSet", "SparkReads"]
