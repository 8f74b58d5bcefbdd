"""The Polars reads of ``DatasetReader``: state, change and history reads without a JVM.

The sibling of ``spark_reads`` and ``history``: the same requests (``read.requests``), the
same selections and read plans (``read.selection``), merged by ``polars_merge``. Results
are eager Polars DataFrames.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from ..columns import (
    DELETED,
    IS_CURRENT,
    IS_DELETED,
    REVISION,
    REVISION_COLUMNS,
    ROW_HASH,
    VALID_FROM,
    VALID_TO,
)
from ..errors import InvalidArgumentError, NoMajorRevisionError, RetentionError
from ..log.records import Revision
from ..log.view import LogView
from .polars_merge import (
    SEQUENCE,
    UTC_MICROS,
    LocalFiles,
    Schema,
    blank_deletions,
    empty_frame,
    merge_frame,
    plan_columns,
    scan_compaction,
    scan_files,
    table_columns,
)
from .requests import ChangeRead
from .selection import HistoryPlan, Selection, plan_read, state_selection


@dataclass(frozen=True)
class PolarsChangeSet:
    """The result of ``DatasetReader.changes``, as ``ChangeSet`` is of the Spark engine.

    ``df`` has the table's columns plus ``_deleted``; when ``is_reset`` it is the full state
    and consumers must replace, not merge. ``until_sequence`` is the head the read was
    pinned to. ``changed`` (a reset only): the entities whose row hash differs from the
    state the read starts from, and the ones that state had and ``df`` lacks (``_deleted``).
    """

    df: pl.DataFrame
    is_reset: bool
    revisions: tuple[Revision, ...]
    since_sequence: int | None = None
    until_sequence: int = 0
    changed: pl.DataFrame | None = None


class PolarsReads:
    """Reads of one dataset on Polars: the log view they plan on and where files are."""

    def __init__(self, local: LocalFiles, root: str):
        self.local = local
        self.root = root

    def merge(
        self,
        view: LogView,
        selection: Selection,
        what: str,
        *,
        keep_deleted: bool,
        with_revision: bool,
        with_hash: bool = False,
        columns: Sequence[str] | None = None,
    ) -> pl.LazyFrame:
        """The rows of ``selection``; RetentionError when a vacuum removed files it needs."""
        plan = plan_read(view, selection, f"{self.root}: {what}")
        check_columns(columns, plan_columns(plan), selection.table)
        return merge_frame(
            self.local,
            plan,
            keep_deleted=keep_deleted,
            with_revision=with_revision,
            with_hash=with_hash,
            columns=columns,
        )

    def changes(
        self, view: LogView, request: ChangeRead, *, only_changed: bool, with_revision: bool
    ) -> PolarsChangeSet:
        selection, what, before = request.selection, request.what, request.before
        table = selection.table
        history = view.history(table)
        ids = list(request.id_columns)
        changed = None
        if not selection.window:
            schema = table_columns(selection.merge, table)
            df = empty_frame({**schema, DELETED: pl.Boolean()})
            if with_revision:
                df = df.with_columns(_null_revision_columns())
        elif selection.is_reset:
            state = self.merge(
                view,
                selection,
                what,
                keep_deleted=False,
                with_revision=with_revision,
                with_hash=True,
            ).collect()
            previous = self.hashes_before(view, history, table, *before, what)
            changed = _soft_major(state.lazy(), previous, ids).collect()
            df = state.lazy().drop(ROW_HASH).with_columns(pl.lit(False).alias(DELETED))
        else:
            df = self.merge(
                view,
                selection,
                what,
                keep_deleted=True,
                with_revision=with_revision,
                with_hash=True,
            )
            if only_changed:
                previous = self.hashes_before(view, history, table, *before, what)
                if previous is not None:
                    df = _really_changed(df, previous, ids)
            df = blank_deletions(df.drop(ROW_HASH), ids)
        return PolarsChangeSet(
            df=_system_last(df).collect(),
            is_reset=selection.is_reset,
            revisions=selection.window,
            since_sequence=request.since_sequence,
            until_sequence=selection.head_sequence,
            changed=_system_last(changed.lazy()).collect() if changed is not None else None,
        )

    def hashes_before(
        self,
        view: LogView,
        history: Sequence[Revision],
        table: str,
        as_of: datetime | None,
        max_sequence: int | None,
        what: str,
    ) -> pl.LazyFrame | None:
        """The (ids, ``_row_hash``) of the state a change read starts from; None (every row
        counts as changed) when there is no start, no major by then, or its files are gone."""
        if as_of is None and max_sequence is None:
            return None
        ids = list(history[-1].tables[table].id_columns)
        try:
            selection = state_selection(history, table, as_of, max_sequence)
            state = self.merge(
                view,
                selection,
                f"{what} (the state before)",
                keep_deleted=False,
                with_revision=False,
                with_hash=True,
            )
        except (NoMajorRevisionError, RetentionError):
            return None
        return state.select(*ids, ROW_HASH)

    def history(
        self,
        table: str,
        history: Sequence[Revision],
        plan: HistoryPlan,
        since: datetime | None,
    ) -> pl.DataFrame:
        """The SCD2 history of ``table`` (``read/history.py``'s rules, in Polars)."""
        return history_frame(self.local, table, history, plan, since).collect()


def check_columns(columns: Sequence[str] | None, schema: Schema, table: str) -> None:
    """``columns`` (of a read) are a list of the table's column names."""
    if columns is None:
        return
    if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
        raise InvalidArgumentError(
            f"read(): columns must be a list of column names, got {columns!r}"
        )
    unknown = [c for c in columns if c not in schema]
    if unknown:
        raise InvalidArgumentError(
            f"read(): columns {unknown} are not columns of table {table!r}; its columns are "
            f"{list(schema)}"
        )


def _null_revision_columns() -> list[pl.Expr]:
    types = (pl.String(), UTC_MICROS, pl.Int64())
    return [pl.lit(None, dtype=t).alias(c) for c, t in zip(REVISION_COLUMNS, types, strict=True)]


def _system_last(df: pl.LazyFrame) -> pl.LazyFrame:
    names = df.collect_schema().names()
    system = [c for c in (DELETED, *REVISION_COLUMNS) if c in names]
    return df.select(*[c for c in names if c not in system], *system)


def _differs() -> pl.Expr:
    """A row's hash differs from the one before (a null hash, or none before: differs)."""
    return pl.col(ROW_HASH).ne_missing(pl.col("__before")) | pl.col(ROW_HASH).is_null()


def _really_changed(rows: pl.LazyFrame, previous: pl.LazyFrame, ids: Sequence[str]) -> pl.LazyFrame:
    """The change rows that change something: tombstones, and rows whose hash differs from
    the entity's before the window."""
    before = previous.rename({ROW_HASH: "__before"})
    joined = rows.join(before, on=ids, how="left")
    return joined.filter(pl.col(DELETED) | _differs()).drop("__before")


def _soft_major(
    state: pl.LazyFrame, previous: pl.LazyFrame | None, ids: Sequence[str]
) -> pl.LazyFrame:
    """A reset's ``changed``: the rows of ``state`` whose hash differs from ``previous``,
    and the ids ``previous`` has and ``state`` lacks, as tombstones."""
    columns = [c for c in state.collect_schema().names() if c != ROW_HASH]
    if previous is None:
        return state.select(*columns, pl.lit(False).alias(DELETED))
    joined = state.with_columns(pl.lit(True).alias("__now")).join(
        previous.rename({ROW_HASH: "__before"}), on=ids, how="full", coalesce=True
    )
    removed = pl.col("__now").is_null()
    return joined.filter(removed | _differs()).select(
        *[c if c in ids else pl.when(~removed).then(pl.col(c)).alias(c) for c in columns],
        removed.alias(DELETED),
    )


# -- SCD2 history ------------------------------------------------------------------------------


def history_frame(
    local: LocalFiles,
    table: str,
    history: Sequence[Revision],
    plan: HistoryPlan,
    since: datetime | None,
) -> pl.LazyFrame:
    """The SCD2 history from the live spans of the table's revisions (in rank order), read
    as ``plan`` says.

    Per entity: the interval each row wins (from its revision's time until the entity's
    next row, or until a major voids the revision), the absences a voiding major leaves,
    then one version per change of the state (values compared, not revisions).
    """
    ids = list(history[-1].tables[table].id_columns)
    spans = plan.spans
    system: Schema = {
        VALID_FROM: UTC_MICROS,
        VALID_TO: UTC_MICROS,
        IS_CURRENT: pl.Boolean(),
        IS_DELETED: pl.Boolean(),
        REVISION: pl.String(),
    }
    if not spans:
        return empty_frame({**table_columns(history, table), **system})
    schema = table_columns([s.revision for s in spans], table)
    values = [c for c in schema if c not in ids]
    direct = [
        scan_files(local, s.revision.tables[table].files, schema).with_columns(
            pl.lit(order, dtype=pl.Int64).alias("__order")
        )
        for order, s in enumerate(spans)
        if plan.base is None or not plan.base.contains(s.revision)
    ]
    if plan.base is not None:
        # its rows stand for the revisions it contains: each at its writer's spans
        orders: dict[int, list[int]] = {}
        for order, s in enumerate(spans):
            if plan.base.contains(s.revision):
                orders.setdefault(s.revision.sequence, []).append(order)
        at = pl.col(SEQUENCE).replace_strict(orders, default=None, return_dtype=pl.List(pl.Int64))
        base = scan_compaction(local, plan.base.write, schema)
        base = base.with_columns(at.alias("__order")).explode("__order").drop(SEQUENCE)
        direct.append(base.filter(pl.col("__order").is_not_null()))

    def by_order(values: list, dtype: pl.DataType) -> pl.Expr:
        return pl.col("__order").replace_strict(dict(enumerate(values)), return_dtype=dtype)

    rows = pl.concat(direct).with_columns(
        by_order([s.start for s in spans], UTC_MICROS).alias("__start"),
        by_order([s.end for s in spans], UTC_MICROS).alias("__end"),
        by_order([s.revision.name for s in spans], pl.String()).alias("__name"),
        by_order([s.ended_by.name if s.ended_by else None for s in spans], pl.String()).alias(
            "__ended_by"
        ),
    )

    # 1. the interval each row wins; rows beaten at their own time win nothing
    next_row = pl.col("__start").shift(-1).over(ids, order_by="__order")
    won = rows.with_columns(pl.min_horizontal("__end", next_row).alias("__to")).filter(
        pl.col("__to").is_null() | (pl.col("__to") > pl.col("__start"))
    )

    # 2. segments of constant state: each row's interval, and after a row voided by a major
    #    with no next row at that time, the absence until the next row (or for good)
    next_from = pl.col("__start").shift(-1).over(ids, order_by=["__start", "__order"])
    won = won.with_columns(
        (pl.col("__to").is_not_null() & (next_from.is_null() | (next_from > pl.col("__to")))).alias(
            "__gap"
        )
    )
    present = ~pl.col(DELETED)
    row_segments = won.select(
        *ids,
        pl.col("__start").alias("__from"),
        present.alias("__present"),
        *[pl.when(present).then(pl.col(c)).alias(c) for c in values],
        pl.col("__name").alias("__revision"),
        pl.lit(0, dtype=pl.Int64).alias("__piece"),
    )
    absences = won.filter("__gap").select(
        *ids,
        pl.col("__to").alias("__from"),
        pl.lit(False).alias("__present"),
        *[pl.lit(None, dtype=schema[c]).alias(c) for c in values],
        pl.col("__ended_by").alias("__revision"),
        pl.lit(1, dtype=pl.Int64).alias("__piece"),
    )
    segments = pl.concat([row_segments, absences])
    in_time = {"partition_by": ids, "order_by": ["__from", "__piece"]}
    if plan.starts_at is not None:
        # 2b. from the state at starts_at: the segment then holding starts at it
        later = pl.col("__from").shift(-1).over(**in_time)
        start = pl.lit(plan.starts_at, dtype=UTC_MICROS)
        segments = segments.filter(later.is_null() | (later > start)).with_columns(
            pl.max_horizontal("__from", start).alias("__from")
        )

    # 3. a version starts where the state changes; leading absences are no versions
    was_present = pl.col("__present").shift(1).over(**in_time)
    same_values = (
        pl.all_horizontal(pl.col(c).eq_missing(pl.col(c).shift(1).over(**in_time)) for c in values)
        if values
        else pl.lit(True)
    )
    starts = segments.with_columns(
        pl.col("__present").cast(pl.Int8).cum_max().over(**in_time).alias("__seen"),
        (
            was_present.is_null()
            | (was_present != pl.col("__present"))
            | (pl.col("__present") & ~same_values)
        ).alias("__changed"),
    ).filter((pl.col("__seen") == 1) & pl.col("__changed"))

    # 4. each version is valid until the next one starts
    valid_to = pl.col("__from").shift(-1).over(partition_by=ids, order_by="__from")
    out = starts.select(
        *schema,
        pl.col("__from").alias(VALID_FROM),
        valid_to.alias(VALID_TO),
        valid_to.is_null().alias(IS_CURRENT),
        (~pl.col("__present")).alias(IS_DELETED),
        pl.col("__revision").alias(REVISION),
    )
    if since is not None:
        out = out.filter(pl.col(VALID_TO).is_null() | (pl.col(VALID_TO) > since))
    return out
