"""``show``, ``diff`` and ``history`` with ``--spark``: for tables too large for one process.

Every input is checked on the driver first (the root, the table, the times, positions and
ids, against the log), so bad input fails fast with one line before the JVM starts. Spark
then plans the read; only the rows shown (``--limit``) or a one-row aggregate reach the
driver, and ``--json --limit 0`` streams its rows a partition at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.logger import PySparkLogger
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..core.columns import DELETED
from ..core.dataset import ChangeSet, RevisionedDataset
from ..core.timeutil import from_micros
from .common import InputError, debugging, first_line, start_spark
from .data_output import CHANGE, diff_row, emit_diff, emit_stats
from .output import Output


def quoted(column: str) -> Column:
    return F.col(f"`{column.replace('`', '``')}`")


def collect_rows(df: DataFrame, limit: int, stream: bool) -> tuple[Iterator[dict] | list, bool]:
    """The first ``limit`` rows (0: all) as dicts with aware UTC times; and whether more exist.

    Spark hands timestamps to Python in the Python process's local zone: they cross as
    microseconds and become UTC datetimes here. ``stream``: an iterator over all rows.
    """
    instants = [f.name for f in df.schema.fields if isinstance(f.dataType, T.TimestampType)]
    df = df.select(
        *[F.unix_micros(quoted(c)).alias(c) if c in instants else quoted(c) for c in df.columns]
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
    out.rows(rows, columns=columns)
    if more:
        out.note(f"the first {limit} rows (--limit N shows more, --limit 0 all)")


def show(
    ds: RevisionedDataset,
    table: str,
    point: tuple[datetime | None, int | str | None, datetime | None],
    where: str | None,
    with_revision: bool,
    endpoint_url: str | None,
) -> DataFrame:
    """``revisions show --spark``: the read planned by Spark (``emit`` collects the rows);
    ``point``: its as-of time, position and known-at time."""
    ids = ds.tables()[table].id_columns
    as_of, at, known_at = point
    start_spark(ds, endpoint_url)
    df = ds.read(table, as_of=as_of, at=at, known_at=known_at, with_revision=with_revision)
    if where:
        df = filtered(df, where)
    return df.orderBy(*[quoted(c) for c in ids])


def diff(
    ds: RevisionedDataset,
    table: str,
    start: int | datetime,
    end: int | datetime | None,
    before_at: dict[str, Any] | None,
    ids: list[str],
    stats: bool,
    limit: int,
    out: Output,
    endpoint_url: str | None,
) -> ChangeSet:
    """``revisions diff --spark``: the changes and the state before, joined by Spark."""
    start_spark(ds, endpoint_url)
    if isinstance(start, int):
        changes = ds.changes(table, since_sequence=start, until_sequence=end)  # type: ignore[arg-type]
    else:
        changes = ds.changes(table, since=start, until=end)
    before = ds.read(table, **before_at) if before_at is not None else None
    diff, values = diff_frame(changes, before, ids)
    if stats:
        emit_stats(out, diff_stats(diff, values, changes.is_reset))
        return changes
    diff = diff.withColumn("_reset", F.lit(changes.is_reset)).orderBy(*[quoted(c) for c in ids])
    rows, more = collect_rows(diff, limit, stream=out.as_json and not limit)
    emit_diff(out, (diff_row(r, ids, values) for r in rows), ids, values, limit, more)
    return changes


def diff_frame(
    changes: ChangeSet, before: DataFrame | None, ids: list[str]
) -> tuple[DataFrame, list[str]]:
    """Changed entities: ``_change`` (added/changed/deleted), ids, values after (``__a<i>``)
    and before (``__b<i>``). Before is restricted to the changed entities unless a reset."""
    after = changes.df
    values = [c for c in after.columns if c not in ids and c != DELETED]
    a = after.select(
        *[quoted(c) for c in ids],
        *[quoted(c).alias(f"__a{i}") for i, c in enumerate(values)],
        (~F.col(DELETED)).alias("__in_a"),
    )
    types = {f.name: f.dataType for f in after.schema.fields}
    if before is None:
        b_values = [F.lit(None).cast(types[c]).alias(f"__b{i}") for i, c in enumerate(values)]
        joined = a.select("*", *b_values, F.lit(False).alias("__in_b"))
    else:
        b = before.select(
            *[quoted(c) for c in ids],
            *[
                (quoted(c) if c in before.columns else F.lit(None).cast(types[c])).alias(f"__b{i}")
                for i, c in enumerate(values)
            ],
            F.lit(True).alias("__in_b"),
        )
        if not changes.is_reset:
            b = b.join(a.select(*[quoted(c) for c in ids]), on=ids, how="left_semi")
        joined = a.join(b, on=ids, how="full_outer")
    in_a = F.coalesce(F.col("__in_a"), F.lit(False))
    in_b = F.coalesce(F.col("__in_b"), F.lit(False))
    differs = [~F.col(f"__a{i}").eqNullSafe(F.col(f"__b{i}")) for i in range(len(values))]
    any_differs = F.lit(False)
    for d in differs:
        any_differs = any_differs | d
    change = (
        F.when(in_a & ~in_b, "added")
        .when(~in_a & in_b, "deleted")
        .when(in_a & in_b & any_differs, "changed")
    )
    out = joined.withColumn(CHANGE, change).where(F.col(CHANGE).isNotNull())
    return out.select(
        CHANGE, *[c for c in out.columns if c not in ("__in_a", "__in_b", CHANGE)]
    ), values


def diff_stats(diff: DataFrame, values: list[str], is_reset: bool) -> dict[str, Any]:
    """Counts by kind of change and of changed values per column: one aggregate row."""
    changed = F.col(CHANGE) == "changed"
    counts = diff.agg(
        *[F.count(F.when(F.col(CHANGE) == k, 1)).alias(k) for k in ("added", "changed", "deleted")],
        *[
            F.count(F.when(changed & ~F.col(f"__a{i}").eqNullSafe(F.col(f"__b{i}")), 1)).alias(
                f"c{i}"
            )
            for i in range(len(values))
        ],
    ).collect()[0]
    return {
        "reset": is_reset,
        "added": counts["added"],
        "changed": counts["changed"],
        "deleted": counts["deleted"],
        "columns": {c: counts[f"c{i}"] for i, c in enumerate(values)},
    }


def history(
    ds: RevisionedDataset,
    table: str,
    entities: list[dict[str, Any]],
    since: datetime | None,
    until: datetime | None,
    limit: int,
    endpoint_url: str | None,
) -> tuple[list[dict], bool]:
    """``revisions history --spark``: the versions of ``entities``, oldest first."""
    start_spark(ds, endpoint_url)
    condition = F.lit(False)
    for entity in entities:
        matches = F.lit(True)
        for column, value in entity.items():
            matches = matches & (quoted(column) == F.lit(value))
        condition = condition | matches
    versions = ds.history(table, since=since, until=until).where(condition)
    order = [*[quoted(c) for c in ds.tables()[table].id_columns], F.col("valid_from")]
    return collect_rows(versions.orderBy(*order), limit, stream=False)  # type: ignore[return-value]


def filtered(df: DataFrame, where: str) -> DataFrame:
    """``df`` filtered by a Spark SQL expression; a bad one is bad input (exit 2)."""
    if not debugging():  # PySpark also logs the error it raises, as JSON on stderr
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    try:
        return df.where(where)
    except AnalysisException as exc:
        raise InputError(f"--where {where!r}: {first_line(exc)}") from exc
