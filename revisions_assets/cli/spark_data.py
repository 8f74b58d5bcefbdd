"""``show``, ``diff`` and ``history`` with ``--spark``: for tables too large for one process.

Every input is checked on the driver first (the root, the table, the times, positions and
ids, against the log), so bad input fails fast with one line before the JVM starts. Spark
then plans the read; only the rows shown (``--limit``) or a one-row aggregate reach the
driver, and ``--json --limit 0`` streams its rows a partition at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.logger import PySparkLogger
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..core.read.results import ChangeSet
from ..core.read.scan import Scan
from ..core.spark_columns import column
from ..core.timeutil import from_micros
from .common import InputError, debugging, first_line, start_spark
from .data_output import diff_row, emit_diff, emit_stats
from .entity_diff import diff_stats, entity_diff
from .output import Output


def collect_rows(df: DataFrame, limit: int, stream: bool) -> tuple[Iterator[dict] | list, bool]:
    """The first ``limit`` rows (0: all) as dicts with aware UTC times; and whether more exist.

    Spark hands timestamps to Python in the Python process's local zone: they cross as
    microseconds and become UTC datetimes here. ``stream``: an iterator over all rows.
    """
    instants = [f.name for f in df.schema.fields if isinstance(f.dataType, T.TimestampType)]
    df = df.select(
        *[F.unix_micros(column(c)).alias(c) if c in instants else column(c) for c in df.columns]
    )

    def as_dict(row) -> dict:
        out = row.asDict(recursive=False)
        for c in instants:
            out[c] = None if out[c] is None else from_micros(out[c])
        return out

    if stream:
        return (as_dict(r) for r in df.toLocalIterator()), False
    rows = df.limit(limit + 1).collect() if limit else df.collect()
    more = bool(limit) and len(rows) > limit
    return [as_dict(r) for r in rows[: limit or None]], more


def emit(out: Output, df: DataFrame, limit: int, columns: Sequence[str] | None = None) -> None:
    rows, more = collect_rows(df, limit, stream=out.as_json and not limit)
    if out.as_json and not limit:
        out.stream_json(rows)
        return
    out.limited(rows, limit, more, columns=columns)  # type: ignore[arg-type]


def show(scan: Scan, ids: Sequence[str], where: str | None, endpoint_url: str | None) -> DataFrame:
    """``revisions show --spark``: the read planned by Spark (``emit`` collects the rows)."""
    start_spark(scan.snapshot.dataset, endpoint_url)
    df = filtered(scan, where) if where else scan.to_spark()
    return df.orderBy(*[column(c) for c in ids])


def diff(
    changed: Scan,
    before: Scan | None,
    ids: list[str],
    stats: bool,
    limit: int,
    out: Output,
    endpoint_url: str | None,
) -> ChangeSet:
    """``revisions diff --spark``: the changes and the state before, joined by Spark."""
    start_spark(changed.snapshot.dataset, endpoint_url)
    changes = changed.to_changes()
    diff, values = entity_diff(changes, before.to_spark() if before else None, ids)
    if stats:
        emit_stats(out, diff_stats(diff, values, changes.is_reset))
        return changes
    diff = diff.withColumn("_reset", F.lit(changes.is_reset)).orderBy(*[column(c) for c in ids])
    rows, more = collect_rows(diff, limit, stream=out.as_json and not limit)
    emit_diff(out, (diff_row(r, ids, values) for r in rows), ids, values, limit, more)
    return changes


def history(
    versions: Scan,
    entities: list[dict[str, Any]],
    ids: Sequence[str],
    limit: int,
    endpoint_url: str | None,
) -> tuple[list[dict], bool]:
    """``revisions history --spark``: the versions of ``entities``, oldest first."""
    start_spark(versions.snapshot.dataset, endpoint_url)
    condition = F.lit(False)
    for entity in entities:
        matches = F.lit(True)
        for name, value in entity.items():
            matches = matches & (column(name) == F.lit(value))
        condition = condition | matches
    versions_df = versions.filter(condition).to_spark()
    order = [*[column(c) for c in ids], F.col("valid_from")]
    return collect_rows(versions_df.orderBy(*order), limit, stream=False)  # type: ignore[return-value]


def filtered(scan: Scan, where: str) -> DataFrame:
    """``scan`` keeping the rows a Spark SQL condition allows, as a lazy DataFrame: the
    scan's own filter, so its ids prune the plan's files and reach the Parquet scans; a bad
    condition is bad input (exit 2)."""
    if not debugging():  # PySpark also logs the error it raises, as JSON on stderr
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    try:
        return scan.filter(where).to_spark()
    except AnalysisException as exc:
        raise InputError(f"--where {where!r}: {first_line(exc)}") from exc
