"""Reading through the source's own code without Spark: the options planned as the driver
plans them, every part read as a task reads it (the Polars executor), in this process.

What Spark adds around it (the Python processes, the Arrow transfer, SQL, streams) is
tested on the session in ``test_batch_reads.py`` and ``test_change_feed.py``; this is what
the read-semantics property tests (tests/core/test_properties.py) run on every case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from revisions_assets.spark.options import parse_options
from revisions_assets.spark.planning import PlannedRead, plan_source_read, split
from revisions_assets.spark.worker import IdRange, ReadPart, read_part

#: cuts of the first id column that split a read of the tests' small id spaces in parts
CUTS = (3, 7)


def planned(root: str, **options: Any) -> PlannedRead:
    """A read planned from options given as a user gives them (values as text)."""
    return plan_source_read(parse_options({"path": root, **_text(options)}))


def _text(options: Mapping[str, Any]) -> dict[str, str]:
    return {
        k: ("true" if v is True else "false" if v is False else str(v))
        for k, v in options.items()
        if v is not None
    }


def read_parts(read: PlannedRead, parts: Sequence[ReadPart]) -> pa.Table:
    """The rows of every part, as Spark gets them (the source's schema)."""
    schema = read.spark_schema
    batches = [b for p in parts for b in read_part(p, schema)]
    return pa.Table.from_batches(batches, schema=to_arrow_schema(schema, timezone="UTC"))


def source_rows(root: str, cuts: Sequence[Any] = CUTS, **options: Any) -> pa.Table:
    """The rows of a read through the source's code, split both ways a read splits: by the
    ranges ``cuts`` make of the first id column (every entity in one range), and as
    ``split`` cuts it into 3 parts; both must give the same rows, returned."""
    read = planned(root, **options)
    (whole,) = split(read, ())
    column = read.id_columns[0]
    edges = [None, *cuts, None]
    ranged = [
        replace(whole, id_range=IdRange(column, edges[i], edges[i + 1]))
        for i in range(len(edges) - 1)
    ]
    rows = read_parts(read, ranged)
    in_three = replace(read, options=replace(read.options, partitions=3))
    three = read_parts(read, split(in_three, ()))
    assert sorted_rows(three) == sorted_rows(rows), "split in 3 parts: other rows"
    return rows


def sorted_rows(table: pa.Table | Any) -> list[tuple]:
    """Rows as sorted tuples (a Polars frame or an Arrow table), to compare results."""
    if not isinstance(table, pa.Table):
        table = table.to_arrow()
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)
