"""``revisions diff``: the entities added, changed and deleted between two states, written once
on Narwhals for both engines (the reader's Polars frames, or Spark's with ``--spark``)."""

from __future__ import annotations

from typing import Any

import narwhals as nw

from ..core.columns import DELETED
from ..core.read.execute.frames import lazy
from ..core.read.results import ChangeSet
from .data_output import CHANGE

_RIGHT = "__right"


def _differs(after: str, before: str) -> nw.Expr:
    """Two values differ (nulls equal each other)."""
    a, b = nw.col(after), nw.col(before)
    return ~((a == b).fill_null(value=False) | (a.is_null() & b.is_null()))


def entity_diff(changes: ChangeSet[Any], before: Any, ids: list[str]) -> tuple[Any, list[str]]:
    """Changed entities as the engine's lazy frame: ``_change`` (added/changed/deleted), the
    ids, the values after (``__a<i>``) and before (``__b<i>``); and the value columns.
    ``before`` (the state the changes start from, None when there was none) is restricted
    to the changed entities unless the change is a reset."""
    after = lazy(changes.df)
    values = [c for c in after.collect_schema().names() if c not in ids and c != DELETED]
    a = after.select(
        *ids,
        *[nw.col(c).alias(f"__a{i}") for i, c in enumerate(values)],
        (~nw.col(DELETED)).alias("__in_a"),
    )
    types = a.collect_schema()
    if before is None:
        joined = a.with_columns(
            *[nw.lit(None, dtype=types[f"__a{i}"]).alias(f"__b{i}") for i in range(len(values))],
            nw.lit(value=False).alias("__in_b"),
        )
    else:
        b = lazy(before)
        present = set(b.collect_schema().names())
        b = b.select(
            *ids,
            *[
                (
                    nw.col(c).cast(types[f"__a{i}"])
                    if c in present
                    else nw.lit(None, dtype=types[f"__a{i}"])
                ).alias(f"__b{i}")
                for i, c in enumerate(values)
            ],
            nw.lit(value=True).alias("__in_b"),
        )
        if not changes.is_reset:
            b = b.join(a.select(ids), on=ids, how="semi")
        joined = a.join(b, on=ids, how="full", suffix=_RIGHT).with_columns(
            nw.coalesce(nw.col(c), nw.col(c + _RIGHT)).alias(c) for c in ids
        )
        joined = joined.drop(*[c + _RIGHT for c in ids])
    in_a = nw.col("__in_a").fill_null(value=False)
    in_b = nw.col("__in_b").fill_null(value=False)
    differs = nw.lit(value=False)
    for i in range(len(values)):
        differs = differs | _differs(f"__a{i}", f"__b{i}")
    change = (
        nw.when(in_a & ~in_b)
        .then(nw.lit("added"))
        .otherwise(
            nw.when(~in_a & in_b)
            .then(nw.lit("deleted"))
            .otherwise(nw.when(in_a & in_b & differs).then(nw.lit("changed")))
        )
    )
    out = joined.with_columns(change.alias(CHANGE)).filter(~nw.col(CHANGE).is_null())
    rest = [c for c in out.collect_schema().names() if c not in ("__in_a", "__in_b", CHANGE)]
    return out.select(CHANGE, *rest).to_native(), values


def diff_stats(diff: Any, values: list[str], is_reset: bool) -> dict[str, Any]:
    """Counts by kind of change, and of changed values per column: one aggregate row."""
    frame = lazy(diff)
    changed = nw.col(CHANGE) == "changed"
    counts = (
        frame.select(
            *[(nw.col(CHANGE) == k).cast(nw.Int64()).sum().alias(k) for k in KINDS],
            *[
                (changed & _differs(f"__a{i}", f"__b{i}")).cast(nw.Int64()).sum().alias(f"c{i}")
                for i in range(len(values))
            ],
        )
        .collect()
        .rows(named=True)[0]
    )
    return {
        "reset": is_reset,
        **{k: int(counts[k] or 0) for k in KINDS},
        "columns": {c: int(counts[f"c{i}"] or 0) for i, c in enumerate(values)},
    }


KINDS = ("added", "changed", "deleted")
