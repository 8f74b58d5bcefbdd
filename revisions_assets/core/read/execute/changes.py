"""Change reads run: a ``ChangePlan`` (``read/plan/requests.py``) on any executor, once;
the facades wrap the result in a ``ChangeSet`` (``read/results.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import narwhals as nw

from ...columns import DELETED, REVISION_COLUMNS, ROW_HASH
from ..plan.requests import ChangePlan
from ..plan.scans import MergePlan
from .frames import (
    SMALL_ROWS,
    Executor,
    Rows,
    blank_deletions,
    hinted,
    lazy,
    real_changes,
    system_last,
)


def read_changes(
    executor: Executor[Any], plan: ChangePlan, *, with_revision: bool
) -> tuple[Any, Any | None]:
    """(``df``, ``changed``) of a change read, as the executor's lazy frames."""
    ids = list(plan.id_columns)
    changed = None
    if plan.rows is None:
        df = lazy(executor.empty(plan.schema, Rows(keep_deleted=True, with_revision=with_revision)))
    elif plan.is_reset:
        df = lazy(executor.merge(plan.rows, Rows(with_revision=with_revision)))
        changed = _reset_changed(executor, plan, plan.rows, with_revision)
        df = df.with_columns(nw.lit(value=False).alias(DELETED))
    else:
        rows = _hashed(
            executor, plan.rows, plan.compared, keep_deleted=True, revision=with_revision
        )
        if plan.before is not None:
            rows = real_changes(
                rows,
                _state_hashes(executor, plan.before, plan.compared, ids),
                ids,
                gone=False,
                narrow=hinted(executor.broadcast) if plan.window_rows <= SMALL_ROWS else None,
            )
        df = blank_deletions(rows.drop(ROW_HASH), ids)
    return (
        _returned(df, plan).to_native(),
        _returned(changed, plan).to_native() if changed is not None else None,
    )


def _returned(frame: nw.LazyFrame, plan: ChangePlan) -> nw.LazyFrame:
    """The columns a change read returns: the projection (without the compared columns it
    read beside it), then ``_deleted`` and the revision columns."""
    frame = system_last(frame)
    if plan.columns is None:
        return frame
    system = [c for c in frame.collect_schema().names() if c in (DELETED, *REVISION_COLUMNS)]
    return frame.select(*plan.columns, *system)


def _reset_changed(
    executor: Executor[Any], plan: ChangePlan, state: MergePlan, with_revision: bool
) -> nw.LazyFrame:
    """A reset's ``changed``: from the revisions on top of the state before when the states
    nest, else the whole state compared with the state before."""
    ids = list(plan.id_columns)
    before = plan.before
    on_top = plan.on_top
    if on_top is None:
        rows = _hashed(executor, state, plan.compared, keep_deleted=False, revision=with_revision)
        previous = _state_hashes(executor, before, plan.compared, ids) if before else None
        return real_changes(rows, previous, ids, gone=True).drop(ROW_HASH)
    if on_top.rows is None:
        return lazy(
            executor.empty(plan.schema, Rows(keep_deleted=True, with_revision=with_revision))
        )
    rows = _hashed(executor, on_top.rows, plan.compared, keep_deleted=True, revision=with_revision)
    if before is not None:
        rows = real_changes(
            rows,
            _state_hashes(executor, before, plan.compared, ids),
            ids,
            gone=False,
            absent_deletions=False,
            narrow=hinted(executor.broadcast) if on_top.window_rows <= SMALL_ROWS else None,
        )
    return blank_deletions(rows.drop(ROW_HASH), ids)


def _hashed(
    executor: Executor[Any],
    plan: MergePlan,
    columns: Sequence[str] | None,
    *,
    keep_deleted: bool,
    revision: bool,
) -> nw.LazyFrame:
    """The rows of ``plan`` with ``_row_hash``: as stored, or over ``columns`` only."""
    rows = executor.merge(
        plan, Rows(keep_deleted=keep_deleted, with_revision=revision, with_hash=True)
    )
    return lazy(executor.rehash(rows, columns) if columns is not None else rows)


def _state_hashes(
    executor: Executor[Any], plan: MergePlan, columns: Sequence[str] | None, ids: list[str]
) -> nw.LazyFrame:
    """The (ids, ``_row_hash``) of a state a comparison starts from."""
    return _hashed(executor, plan, columns, keep_deleted=False, revision=False).select(
        *ids, ROW_HASH
    )


def state_hashes(executor: Executor[Any], plan: MergePlan) -> Any:
    """The (ids, ``_row_hash``) of the state ``plan`` reads, as the executor's frame: what a
    skip-unchanged commit or a carrying major compares its rows with."""
    return _state_hashes(executor, plan, None, list(plan.id_columns)).to_native()
