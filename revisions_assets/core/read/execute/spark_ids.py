"""What a Spark filter says about the id columns, as ``IdBounds`` (``read/plan/pruning.py``).

A Column or SQL text is turned into Spark's own (unresolved) expression tree and read from
its JSON: comparisons of an id column with a literal (``=``, ``<=>``, ``<``, ``<=``, ``>``,
``>=``), ``IN`` a list of literals, ``BETWEEN``, and their combinations by ``AND`` and
``OR``, whether written with the Column API or as SQL text. Anything else bounds nothing
(every file is kept), and so does a literal whose type is not the id column's (Spark would
cast it: ``id = '7'``), a column named in another case than the table's, and a filter on
Spark Connect (its expressions stay on the server). Turning a filter of thousands of
literals into JSON costs the driver about as much as building it: a filter whose SQL text
is longer than ``MAX_FILTER_SQL`` is not read (every file is kept; join with the ids
instead).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import date
from decimal import Decimal, InvalidOperation
from functools import reduce
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from ..plan.pruning import EVERY_ID, IdBounds, typed_id

#: the longest filter (as SQL text) read for pruning: about 3,000 literal ids
MAX_FILTER_SQL = 20_000
_CATALYST = "org.apache.spark.sql.catalyst."
#: comparisons as ranges of ``column op literal``, by Catalyst class and by function name
_OPS = {
    "expressions.EqualTo": "=",
    "expressions.EqualNullSafe": "=",
    "expressions.LessThan": "<",
    "expressions.LessThanOrEqual": "<",
    "expressions.GreaterThan": ">",
    "expressions.GreaterThanOrEqual": ">",
}
_FUNCTION_OPS = {"=": "=", "==": "=", "<=>": "=", "<": "<", "<=": "<", ">": ">", ">=": ">"}
_SWAPPED = {"=": "=", "<": ">", ">": "<"}
_ONE_NAME = re.compile(r"^\[([^\[\],]*)\]$")
_INTEGERS = ("integer", "long", "short", "byte")


def spark_id_bounds(
    spark: SparkSession, condition: Column | str, id_types: Mapping[str, str]
) -> IdBounds:
    """The ids ``condition`` allows, by id column (``id_types``: each id column's Spark type
    name, as the log records it); ``EVERY_ID`` when it bounds none."""
    jvm_session = getattr(spark, "_jsparkSession", None)
    if jvm_session is None:  # Spark Connect
        return EVERY_ID
    try:
        column = F.expr(condition) if isinstance(condition, str) else condition
        expression = jvm_session.expression(column._jc)
        if len(expression.sql()) > MAX_FILTER_SQL:
            return EVERY_ID
        nodes = json.loads(expression.toJSON())
        tree, _ = _tree(nodes, 0)
        return _bounds(tree, id_types) or EVERY_ID
    except Exception:  # a form this version of Spark builds otherwise: no pruning
        return EVERY_ID


Node = tuple[dict[str, Any], list[Any]]


def _tree(nodes: list[dict[str, Any]], at: int) -> tuple[Node, int]:
    """The node at ``at`` of Spark's pre-order JSON with its children, and the next index."""
    node, children, following = nodes[at], [], at + 1
    for _ in range(node["num-children"]):
        child, following = _tree(nodes, following)
        children.append(child)
    return (node, children), following


def _kind(node: dict[str, Any]) -> str:
    name = node["class"]
    return name[len(_CATALYST) :] if name.startswith(_CATALYST) else name


def _bounds(tree: Node, types: Mapping[str, str]) -> IdBounds | None:
    """The bounds of a boolean expression; None: unbounded."""
    node, children = tree
    kind = _kind(node)
    if kind in ("expressions.And", "expressions.Or"):
        function, args = kind.rsplit(".", 1)[1].lower(), children
    elif kind == "expressions.In":
        function, args = "in", [children[node["value"]], *(children[i] for i in node["list"])]
    elif kind in _OPS:
        function, args = _OPS[kind], [children[node["left"]], children[node["right"]]]
    elif kind == "analysis.UnresolvedFunction" and not node.get("isDistinct"):
        names = _ONE_NAME.match(node["nameParts"])
        function = names.group(1).lower() if names else ""
        function = _FUNCTION_OPS.get(function, function)
        args = [children[i] for i in node["arguments"]]
    else:
        return None
    if function == "and":
        known = [b for b in (_bounds(a, types) for a in args) if b is not None]
        return reduce(IdBounds.__and__, known) if known else None
    if function == "or":  # a literal false (a disjunction built up from it) adds nothing
        parts = [_bounds(a, types) for a in args if not _false(a)]
        return None if not parts or None in parts else reduce(IdBounds.__or__, parts)  # type: ignore[arg-type]
    if function in _SWAPPED and len(args) == 2:
        return _comparison(args[0], function, args[1], types)
    if function == "in" and args:
        return _is_in(args[0], args[1:], types)
    if function == "between" and len(args) == 3:
        return _between(args, types)
    return None


def _false(tree: Node) -> bool:
    node, _ = tree
    return (
        _kind(node) == "expressions.Literal"
        and node.get("dataType") == "boolean"
        and node.get("value") == "false"
    )


def _column(tree: Node, types: Mapping[str, str]) -> str | None:
    """The id column a node names (one name part, exactly as the table spells it)."""
    node, _ = tree
    if _kind(node) != "analysis.UnresolvedAttribute":
        return None
    name = _ONE_NAME.match(node.get("nameParts", ""))
    return name.group(1) if name and name.group(1) in types else None


def _value(tree: Node, type_name: str) -> Any:
    """A literal's value as an id of ``type_name``, or None."""
    node, _ = tree
    if _kind(node) != "expressions.Literal" or node.get("value") is None:
        return None
    text, data_type = node["value"], node.get("dataType")
    if data_type in _INTEGERS:
        value: Any = int(text)
    elif data_type == "string":
        value = text
    elif data_type == "boolean":
        value = {"true": True, "false": False}.get(text)
    elif data_type == "date":
        value = date.fromisoformat(text)
    elif isinstance(data_type, str) and data_type.startswith("decimal("):
        try:
            value = Decimal(text)
        except InvalidOperation:
            return None
    else:
        return None
    return typed_id(type_name, value)


def _comparison(left: Node, op: str, right: Node, types: Mapping[str, str]) -> IdBounds | None:
    column = _column(left, types)
    if column is None:
        column, op, right = _column(right, types), _SWAPPED[op], left
    if column is None:
        return None
    value = _value(right, types[column])
    if value is None:
        return None
    low, high = {"=": (value, value), "<": (None, value), ">": (value, None)}[op]
    return IdBounds.of(column, [(low, high)])


def _is_in(value: Node, items: list[Node], types: Mapping[str, str]) -> IdBounds | None:
    column = _column(value, types)
    if column is None:
        return None
    values = []
    for item in items:
        node, _ = item
        if _kind(node) == "expressions.Literal" and node.get("value") is None:
            continue  # a null in the list matches no id
        found = _value(item, types[column])
        if found is None:
            return None
        values.append(found)
    return IdBounds.values(column, values)


def _between(args: list[Node], types: Mapping[str, str]) -> IdBounds | None:
    column = _column(args[0], types)
    if column is None:
        return None
    low, high = _value(args[1], types[column]), _value(args[2], types[column])
    if low is None or high is None:
        return None
    return IdBounds.of(column, [(low, high)])


__all__ = ["MAX_FILTER_SQL", "spark_id_bounds"]
