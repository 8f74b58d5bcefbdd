"""The filters Spark pushes into ``format("revisions")``: those on the id columns are taken.

Spark hands a Python data source the conjuncts of a query's ``WHERE`` as ``Filter`` values
(``pushFilters``). A filter on an id column is applied to the rows the read returns, as a
Polars condition the Polars optimizer pushes into every Parquet scan below the merge: files
are sorted by the ids, so a lookup of a few ids reads a few row groups per revision. A
filter on an id never brings back an older row of an entity (an entity's ids never
change), and one the source does not take stays with Spark, which evaluates it on the
rows it gets: the result is the same either way. The same conditions prune the parts of a
read split by id ranges (``planning.py``) before any is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
)

if TYPE_CHECKING:
    import polars as pl

_COMPARISONS = (EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)


def _literal(value: Any) -> bool:
    """A value compared the same way by Spark and Polars: a whole number, a string or a date
    (not a datetime, whose zone Spark and Polars may read differently; not a float)."""
    return (
        isinstance(value, int | str | date)
        and not isinstance(value, datetime)
        and not isinstance(value, bool)
    )


def _column(attribute: tuple[str, ...], id_columns: Sequence[str]) -> str | None:
    """The id column a filter's attribute names (a top-level column), or None."""
    if len(attribute) != 1:
        return None
    by_lower = {c.lower(): c for c in id_columns}
    return by_lower.get(attribute[0].lower())


def taken(condition: Filter, id_columns: Sequence[str]) -> bool:
    """Whether the source applies ``condition`` itself: a comparison of an id column with a
    literal, a list of literals, not null, or the negation of an equality or a list."""
    if isinstance(condition, Not):
        inner = condition.child
        return isinstance(inner, EqualTo | In) and taken(inner, id_columns)
    column = _column(getattr(condition, "attribute", ()), id_columns)
    if column is None:
        return False
    if isinstance(condition, IsNotNull):
        return True
    if isinstance(condition, In):
        return bool(condition.value) and all(_literal(v) for v in condition.value)
    return isinstance(condition, _COMPARISONS) and _literal(condition.value)


def polars_condition(condition: Filter, id_columns: Sequence[str]) -> pl.Expr:
    """A taken filter as a Polars condition on the read's rows."""
    import polars as pl

    if isinstance(condition, Not):
        return ~polars_condition(condition.child, id_columns)
    column = pl.col(_column(condition.attribute, id_columns))  # type: ignore[arg-type]
    if isinstance(condition, IsNotNull):
        return column.is_not_null()
    if isinstance(condition, In):
        return column.is_in(list(condition.value))
    value = condition.value  # type: ignore[attr-defined]
    if isinstance(condition, EqualTo | EqualNullSafe):
        return column == value
    if isinstance(condition, GreaterThan):
        return column > value
    if isinstance(condition, GreaterThanOrEqual):
        return column >= value
    if isinstance(condition, LessThan):
        return column < value
    assert isinstance(condition, LessThanOrEqual)
    return column <= value


def range_may_hold(
    conditions: Sequence[Filter], column: str, low: Any | None, high: Any | None
) -> bool:
    """Whether rows with ``low <= column < high`` (None: unbounded) may meet every condition
    on ``column``: a part of a read whose range no row may meet is not read at all. Only
    equalities, lists and bounds prune; anything else may hold."""

    def inside(value: Any) -> bool:
        try:
            return (low is None or low <= value) and (high is None or value < high)
        except TypeError:  # a literal of another type than the range's bounds
            return True

    for condition in conditions:
        if getattr(condition, "attribute", ()) != (column,):
            continue
        value = getattr(condition, "value", None)
        try:
            if isinstance(condition, EqualTo | EqualNullSafe) and not inside(value):
                return False
            if isinstance(condition, In) and not any(inside(v) for v in value):
                return False
            if isinstance(condition, GreaterThan | GreaterThanOrEqual) and high is not None:
                if value >= high:
                    return False
            if isinstance(condition, LessThan) and low is not None and value <= low:
                return False
            if isinstance(condition, LessThanOrEqual) and low is not None and value < low:
                return False
        except TypeError:
            continue
    return True
