"""The read schema as the log records it: Spark's JSON types, no engine needed.

A read returns the columns of the first write it merges, then the columns later writes
added, in order (``spark_merge.read_schema`` builds the same as a StructType,
``polars_merge.read_columns`` as Polars types).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from ..log.records import TableWrite
from .selection import ReadPlan


@lru_cache(maxsize=256)
def parse_columns(schema_json: str) -> tuple[tuple[str, Any], ...]:
    """A recorded schema as (column, Spark JSON type) pairs, in order."""
    return tuple((f["name"], f["type"]) for f in json.loads(schema_json)["fields"])


def recorded_types(writes: Sequence[TableWrite]) -> dict[str, Any]:
    """The read schema of ``writes`` (column -> Spark JSON type), in order."""
    out: dict[str, Any] = {}
    for schema_json in dict.fromkeys(w.schema_json for w in writes):
        for name, data_type in parse_columns(schema_json):
            out.setdefault(name, data_type)
    return out


def plan_writes(plan: ReadPlan) -> list[TableWrite]:
    """The writes a plan reads: its base's, then those of its other revisions."""
    writes = [r.tables[plan.table] for r in plan.direct]
    return [plan.base.write, *writes] if plan.base is not None else writes
