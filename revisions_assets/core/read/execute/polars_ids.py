"""What a Polars filter says about the id columns, as ``IdBounds`` (``read/plan/pruning.py``).

The expression is read from Polars' own serialization of it (``Expr.meta.serialize``, JSON):
comparisons of an id column with a literal (``==``, ``<``, ``<=``, ``>``, ``>=``),
``is_in`` a literal list or Series, ``is_between``, and their combinations by ``&``, ``|``,
``all_horizontal`` and ``any_horizontal``. Anything else bounds nothing (every file is
kept), and so does a literal whose type is not the id column's (an integer id compared
with a float): pruning is an optimization that never guesses.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from datetime import date, timedelta
from functools import reduce
from typing import Any

import polars as pl

from ..plan.pruning import EVERY_ID, IdBounds, typed_id

_EPOCH_DAY = date(1970, 1, 1)
#: a comparison of ``column op literal`` as a range of the column, and the op with its
#: sides swapped (``literal op column``)
_RANGES = {
    "Eq": lambda v: (v, v),
    "Lt": lambda v: (None, v),
    "LtEq": lambda v: (None, v),
    "Gt": lambda v: (v, None),
    "GtEq": lambda v: (v, None),
}
_SWAPPED = {"Eq": "Eq", "Lt": "Gt", "LtEq": "GtEq", "Gt": "Lt", "GtEq": "LtEq"}
_NOT_A_LITERAL = object()


def polars_id_bounds(condition: pl.Expr, id_types: Mapping[str, str]) -> IdBounds:
    """The ids ``condition`` allows, by id column (``id_types``: each id column's Spark type
    name, as the log records it); ``EVERY_ID`` when it bounds none."""
    try:
        tree = json.loads(condition.meta.serialize(format="json"))
        return _bounds(tree, id_types) or EVERY_ID
    except Exception:  # a form this version of Polars serializes otherwise: no pruning
        return EVERY_ID


def _bounds(node: Any, types: Mapping[str, str]) -> IdBounds | None:
    """The bounds of a boolean expression node; None: unbounded."""
    if not isinstance(node, dict) or len(node) != 1:
        return None
    ((kind, body),) = node.items()
    if kind == "BinaryExpr":
        op = body["op"]
        if op in ("And", "LogicalAnd"):
            return _all([_bounds(body["left"], types), _bounds(body["right"], types)])
        if op in ("Or", "LogicalOr"):  # a literal false adds nothing
            sides = [side for side in (body["left"], body["right"]) if not _false(side)]
            return _any([_bounds(side, types) for side in sides])
        if op in _RANGES:
            return _comparison(body["left"], op, body["right"], types)
        return None
    if kind == "Function":
        function, inputs = body["function"], body["input"]
        boolean = function.get("Boolean") if isinstance(function, dict) else None
        if boolean == "AllHorizontal":
            return _all([_bounds(n, types) for n in inputs])
        if boolean == "AnyHorizontal":
            return _any([_bounds(n, types) for n in inputs if not _false(n)])
        if isinstance(boolean, dict) and "IsIn" in boolean:
            return _is_in(inputs, types)
        if isinstance(boolean, dict) and "IsBetween" in boolean:
            return _between(inputs, types)
    return None


def _false(node: Any) -> bool:
    """Whether a node is the literal ``False``."""
    return node == {"Literal": {"Scalar": {"Boolean": False}}}


def _all(parts: list[IdBounds | None]) -> IdBounds | None:
    known = [p for p in parts if p is not None]
    return reduce(IdBounds.__and__, known) if known else None


def _any(parts: list[IdBounds | None]) -> IdBounds | None:
    if not parts or any(p is None for p in parts):
        return None
    return reduce(IdBounds.__or__, parts)  # type: ignore[arg-type]


def _column(node: Any, types: Mapping[str, str]) -> str | None:
    """The id column a node names, or None."""
    if isinstance(node, dict) and isinstance(name := node.get("Column"), str) and name in types:
        return name
    return None


def _comparison(left: Any, op: str, right: Any, types: Mapping[str, str]) -> IdBounds | None:
    column = _column(left, types)
    if column is None:
        column, op, right = _column(right, types), _SWAPPED[op], left
    if column is None:
        return None
    values = _literal(right)
    if not isinstance(values, list) or len(values) != 1:
        return None
    value = typed_id(types[column], values[0])
    if value is None:
        return None
    return IdBounds.of(column, [_RANGES[op](value)])


def _is_in(inputs: list[Any], types: Mapping[str, str]) -> IdBounds | None:
    if len(inputs) != 2 or (column := _column(inputs[0], types)) is None:
        return None
    values = _literal(inputs[1])
    if not isinstance(values, list):
        return None
    typed = [typed_id(types[column], v) for v in values if v is not None]
    if any(v is None for v in typed):
        return None
    return IdBounds.values(column, typed)


def _between(inputs: list[Any], types: Mapping[str, str]) -> IdBounds | None:
    if len(inputs) != 3 or (column := _column(inputs[0], types)) is None:
        return None
    low, high = _literal(inputs[1]), _literal(inputs[2])
    if not (isinstance(low, list) and isinstance(high, list) and len(low) == len(high) == 1):
        return None
    bounds = typed_id(types[column], low[0]), typed_id(types[column], high[0])
    if None in bounds:
        return None
    return IdBounds.of(column, [bounds])  # closed: wider than a half-open one, never narrower


def _literal(node: Any) -> list[Any] | object:
    """The values of a literal node: one for a scalar, each of a list or Series; a value
    whose kind is not read here is ``_NOT_A_LITERAL`` (its node bounds nothing)."""
    if not isinstance(node, dict) or not isinstance(literal := node.get("Literal"), dict):
        return _NOT_A_LITERAL
    if "Series" in literal:
        return _ipc_values(literal["Series"])
    ((kind, value),) = literal.items()
    if kind == "Dyn":
        ((dyn, scalar),) = value.items()
        return [scalar] if dyn in ("Int", "Str") else _NOT_A_LITERAL
    if kind != "Scalar":
        return _NOT_A_LITERAL
    ((scalar_type, scalar),) = value.items()
    if scalar_type == "List":
        return _ipc_values(scalar)
    if scalar_type.startswith(("Int", "UInt")) and isinstance(scalar, int):
        return [scalar]
    if scalar_type in ("String", "Boolean"):
        return [scalar]
    if scalar_type == "Date" and isinstance(scalar, int):
        return [_EPOCH_DAY + timedelta(days=scalar)]
    return _NOT_A_LITERAL


def _ipc_values(data: Any) -> list[Any] | object:
    """The values of a Series Polars serializes as an Arrow IPC stream (a list of bytes)."""
    if not isinstance(data, list):
        return _NOT_A_LITERAL
    frame = pl.read_ipc_stream(io.BytesIO(bytes(data)))
    if frame.width != 1:
        return _NOT_A_LITERAL
    series = frame.to_series()
    if not (series.dtype.is_integer() or series.dtype in (pl.String, pl.Boolean, pl.Date)):
        return _NOT_A_LITERAL
    return series.to_list()


__all__ = ["polars_id_bounds"]
