"""Commands that read data with Spark: ``show``, ``diff``, ``history``.

Every input is checked on the driver first (the root, the table, the times, positions and
ids, against the log), so bad input fails fast with one line and no JVM. Spark then plans
the read; only the rows shown (``--limit``) or a one-row aggregate reach the driver, and
``--json --limit 0`` streams its rows a partition at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import click
from pyspark.errors import AnalysisException
from pyspark.logger import PySparkLogger
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..core.dataset import ChangeSet, TableInfo
from ..core.errors import NoMajorRevisionError
from ..core.read.selection import (
    changes_by_sequence,
    changes_by_time,
    resolve_position,
    state_selection,
    table_history,
)
from ..core.read.spark_merge import DELETED
from ..core.timeutil import from_micros, to_utc
from .common import (
    InputError,
    common_options,
    debugging,
    first_line,
    json_option,
    limit_option,
    open_dataset,
    parse_point,
    parse_position,
    parse_time,
    start_spark,
)
from .output import Output, text

CHANGE = "_change"
BEFORE = "_before"


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


@click.command("show")
@click.argument("root")
@click.argument("table")
@click.option("--as-of", help="The state as of a time with an offset, e.g. 2020-01-03T00:00Z.")
@click.option("--at", help="The state pinned at HEAD, HEAD~n, a sequence or a revision name.")
@click.option("--where", help="A Spark SQL filter, e.g. \"day > 3 AND city = 'Oslo'\".")
@click.option("--with-revision", is_flag=True, help="Add the revision that wrote each row.")
@limit_option(20)
@json_option
@common_options
def show_command(
    root: str,
    table: str,
    as_of: str | None,
    at: str | None,
    where: str | None,
    with_revision: bool,
    limit: int,
    as_json: bool,
    endpoint_url: str | None,
) -> None:
    """Rows of TABLE: its latest state, as of a time, or pinned at a revision."""
    if as_of is not None and at is not None:
        raise click.UsageError("give --as-of or --at, not both")
    ds = open_dataset(root, endpoint_url)
    when, position = parse_time(as_of, "--as-of"), parse_position(at)
    records = ds.revisions()
    history = table_history(records, table)
    selection = state_selection(history, table, when, resolve_position(records, table, position))
    start_spark(ds, endpoint_url)
    df = ds.read(table, as_of=when, at=position, with_revision=with_revision)
    if where:
        df = filtered(df, where)
    out = Output(as_json)
    point = f"as of {text(when)}" if when else f"at {at}" if at else "latest"
    out.note(
        f"{table} ({point}): major {selection.major.name} + {len(selection.merge) - 1} "
        "later revision(s)"
    )
    emit(out, df.orderBy(*[quoted(c) for c in history[-1].tables[table].id_columns]), limit)


@click.command("diff")
@click.argument("root")
@click.argument("table")
@click.option(
    "--since", required=True, help="From (exclusive): a time with an offset or a sequence."
)
@click.option("--until", help="Up to (inclusive): a time or a sequence (default: the head).")
@click.option("--stats", is_flag=True, help="Counts of changed values per column instead of rows.")
@limit_option(20)
@json_option
@common_options
def diff_command(
    root: str,
    table: str,
    since: str,
    until: str | None,
    stats: bool,
    limit: int,
    as_json: bool,
    endpoint_url: str | None,
) -> None:
    """Entities of TABLE added, changed and deleted between --since and --until.

    Times compare the states as of two logical times; sequences (digits) compare the
    states at two points of the commit order. When a major lies in between, the change is
    a RESET (consumers replace, not merge): then the rows compare the full states.
    """
    start, end = parse_point(since, "--since"), parse_point(until, "--until")
    by_sequence = isinstance(start, int)
    if end is not None and isinstance(end, int) != by_sequence:
        raise click.UsageError("--since and --until must both be sequences or both be times")
    ds = open_dataset(root, endpoint_url)
    records = ds.revisions()
    history = table_history(records, table)
    if by_sequence:
        selection = changes_by_sequence(
            history, table, start, resolve_position(records, table, end)
        )
        before_at = {"at": start}
    else:
        selection = changes_by_time(history, table, start, end)
        before_at = {"as_of": start}
    try:
        state_selection(history, table, before_at.get("as_of"), before_at.get("at"))
        had_state = True
    except NoMajorRevisionError:  # nothing existed before: everything is added
        had_state = False
    ids = list(history[-1].tables[table].id_columns)

    start_spark(ds, endpoint_url)
    if by_sequence:
        changes = ds.changes(table, since_sequence=start, until_sequence=end)
    else:
        changes = ds.changes(table, since=start, until=end)
    before = ds.read(table, **before_at) if had_state else None
    diff, values = diff_frame(changes, before, ids)

    out = Output(as_json)
    window = f"({since}, {until or 'HEAD'}]"
    if changes.is_reset:
        major = selection.major
        out.note(
            f"RESET: {table} {window} - major {major.name} (seq {major.sequence}, "
            f"{text(major.timestamp)}) re-evaluated every entity; consumers replace their "
            "copy. Rows compare the full states."
        )
    else:
        names = ", ".join(r.name for r in changes.revisions) or "none"
        out.note(f"{table} {window}: {len(changes.revisions)} revision(s) ({names})")
    if stats:
        emit_stats(out, diff, values, changes.is_reset)
        return
    diff = diff.withColumn("_reset", F.lit(changes.is_reset)).orderBy(*[quoted(c) for c in ids])
    rows, more = collect_rows(diff, limit, stream=as_json and not limit)
    shaped = (diff_row(r, ids, values) for r in rows)
    if as_json and not limit:
        out.stream_json(shaped)
        return
    shaped = list(shaped)
    if as_json:
        out.rows(shaped)
        return
    for row in shaped:
        before_values = row[BEFORE] or {}
        for c in values:
            if c in before_values and row[CHANGE] == "changed":
                row[c] = f"{text(before_values[c])} -> {text(row[c])}"
            elif row[CHANGE] == "deleted":
                row[c] = before_values.get(c)
    out.rows(shaped, columns=[CHANGE, *ids, *values])
    if more:
        out.note(f"the first {limit} rows (--limit N shows more, --limit 0 all)")


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


def diff_row(row: dict, ids: list[str], values: list[str]) -> dict[str, Any]:
    """A diff row for people and JSON: values after, and ``_before`` for what changed."""
    change = row[CHANGE]
    out: dict[str, Any] = {CHANGE: change, **{c: row[c] for c in ids}}
    after = {c: row[f"__a{i}"] for i, c in enumerate(values)}
    before = {c: row[f"__b{i}"] for i, c in enumerate(values)}
    out.update(after if change != "deleted" else dict.fromkeys(values))
    if change == "changed":
        out[BEFORE] = {c: before[c] for c in values if before[c] != after[c]}
    else:
        out[BEFORE] = before if change == "deleted" else None
    out["_reset"] = row["_reset"]
    return out


def emit_stats(out: Output, diff: DataFrame, values: list[str], is_reset: bool) -> None:
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
    result = {
        "reset": is_reset,
        "added": counts["added"],
        "changed": counts["changed"],
        "deleted": counts["deleted"],
        "columns": {c: counts[f"c{i}"] for i, c in enumerate(values)},
    }
    if out.as_json:
        out.json(result)
        return
    out.note(f"{result['added']} added, {result['changed']} changed, {result['deleted']} deleted")
    out.rows(
        [{"column": c, "changed values": n} for c, n in result["columns"].items()],
        columns=["column", "changed values"],
    )


@click.command("history")
@click.argument("root")
@click.argument("table")
@click.option(
    "--id",
    "id_values",
    multiple=True,
    required=True,
    help="An id column and value: --id col=value.",
)
@click.option("--since", help="Only versions still valid after this time (with an offset).")
@click.option("--until", help="The history as known at this logical time.")
@limit_option(100)
@json_option
@common_options
def history_command(
    root: str,
    table: str,
    id_values: tuple[str, ...],
    since: str | None,
    until: str | None,
    limit: int,
    as_json: bool,
    endpoint_url: str | None,
) -> None:
    """Every version of the entities of TABLE with the given ids (SCD2, in logical time)."""
    ds = open_dataset(root, endpoint_url)
    records = ds.revisions()
    history = table_history(records, table)
    info = ds.tables()[table]
    ids = parse_ids(id_values, info)
    start, end = parse_time(since, "--since"), parse_time(until, "--until")
    start_spark(ds, endpoint_url)
    condition = F.lit(True)
    for column, value in ids.items():
        condition = condition & (quoted(column) == F.lit(value))
    versions = ds.history(table, since=start, until=end).where(condition)
    order = [*[quoted(c) for c in info.id_columns], F.col("valid_from")]
    rows, more = collect_rows(versions.orderBy(*order), limit, stream=False)
    by_name = {r.name: r for r in history}
    for row in rows:
        revision = by_name[row["_revision"]]
        row["_revision_sequence"] = revision.sequence
        row["_revision_kind"] = "major" if revision.is_major else "minor"
    out = Output(as_json)
    if as_json:
        out.rows(rows)
        return
    if not rows:
        out.note(f"no version of {table} with {ids}")
        return
    system = ["valid_from", "valid_to", "is_current", "is_deleted", "_revision", "_revision_kind"]
    data = [c for c in rows[0] if c not in system and c != "_revision_sequence"]
    short = ("from", "to", "current", "deleted", "revision", "kind")
    out.rows(rows, columns=[*system, *data], headers=dict(zip(system, short, strict=True)))
    if more:
        out.note(f"the first {limit} versions (--limit N shows more, --limit 0 all)")


def parse_ids(pairs: Sequence[str], info: TableInfo) -> dict[str, Any]:
    """``--id col=value`` pairs, each value converted to its id column's type."""
    out: dict[str, Any] = {}
    for pair in pairs:
        column, sep, raw = pair.partition("=")
        if not sep or not column:
            raise InputError(
                f"--id {pair!r}: expected column=value, e.g. --id {info.id_columns[0]}=42"
            )
        if column not in info.id_columns:
            raise InputError(
                f"--id {pair!r}: {column!r} is not an id column of table {info.name!r} "
                f"(id columns: {', '.join(info.id_columns)})"
            )
        data_type = info.schema[column].dataType
        try:
            out[column] = id_value(raw, data_type)
        except (ValueError, InvalidOperation) as exc:
            raise InputError(
                f"--id {pair!r}: {raw!r} is not a {data_type.simpleString()} ({exc})"
            ) from exc
    return out


def id_value(raw: str, data_type: T.DataType) -> Any:
    """A command-line value as the Python value of a Spark type."""
    if isinstance(data_type, T.StringType):
        return raw
    if isinstance(data_type, T.IntegralType):
        return int(raw)
    if isinstance(data_type, T.FractionalType) and not isinstance(data_type, T.DecimalType):
        return float(raw)
    if isinstance(data_type, T.DecimalType):
        return Decimal(raw)
    if isinstance(data_type, T.BooleanType):
        if raw.lower() not in ("true", "false"):
            raise ValueError("expected true or false")
        return raw.lower() == "true"
    if isinstance(data_type, T.DateType):
        return date.fromisoformat(raw)
    if isinstance(data_type, T.TimestampType):
        return to_utc(raw, "--id")
    if isinstance(data_type, T.TimestampNTZType):
        return datetime.fromisoformat(raw)
    raise ValueError(f"ids of type {data_type.simpleString()} cannot be given on the command line")


def filtered(df: DataFrame, where: str) -> DataFrame:
    """``df`` filtered by a Spark SQL expression; a bad one is bad input (exit 2)."""
    if not debugging():  # PySpark also logs the error it raises, as JSON on stderr
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    try:
        return df.where(where)
    except AnalysisException as exc:
        raise InputError(f"--where {where!r}: {first_line(exc)}") from exc


COMMANDS = (show_command, diff_command, history_command)
