"""Commands that read data: ``show``, ``diff``, ``history``.

They read through ``DatasetReader`` (Polars, in this process: no JVM to start); ``--spark``
reads through the Spark engine instead, for tables too large for one process
(``spark_data``). Each command reads the log once, when it opens the dataset, and plans
every read on that one snapshot. Every input is checked against the log first, so bad
input fails fast with one line.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..core.errors import InvalidTimestampError, NoMajorRevisionError
from ..core.log.records import Revision
from ..core.read.plan.selection import Selection, carried_by
from ..core.read.scan import DatasetSnapshot, Scan, planned
from .common import (
    InputError,
    common_options,
    json_option,
    limit_option,
    open_dataset,
    open_reader,
    parse_point,
    parse_position,
    parse_time,
    rows_limit,
)
from .data_output import (
    diff_row,
    emit_diff,
    emit_history,
    emit_stats,
    id_types,
    parse_entities,
)
from .entity_diff import diff_stats, entity_diff
from .output import Output, text

if TYPE_CHECKING:  # polars loads when a command runs: `revisions --help` starts fast
    import polars as pl


F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def spark_option(f: F) -> F:
    return click.option(
        "--spark",
        "use_spark",
        is_flag=True,
        help="Read with Spark instead of in this process (tables too large for one process).",
    )(f)


def open_snapshot(root: str, endpoint_url: str | None, use_spark: bool) -> DatasetSnapshot:
    """The log of the dataset at ``root`` as its handle read it when it opened: the one
    snapshot a command plans its reads on (the Spark engine's handle with ``--spark``)."""
    handle = open_dataset(root, endpoint_url) if use_spark else open_reader(root, endpoint_url)
    return handle.snapshot(refresh=False)


def merged(selection: Selection) -> str:
    """What a state read merges: its major, the revisions that major carries, the rest."""
    table, major = selection.table, selection.major
    carried = len(carried_by(major, table) & {r.sequence for r in selection.merge})
    on_top = len(selection.merge) - 1 - carried
    keeps = f" (carrying the state of {carried} earlier revision(s))" if carried else ""
    return f"merges major {major.name}{keeps} + {on_top} revision(s) on top"


def checked(
    parse: Callable[[str | None, str], T],
    value: str | None,
    option: str,
    history: list[Revision],
    table: str,
    committed: bool = False,
) -> T:
    """``parse(value, option)`` (``parse_time``, ``parse_point``); a bad time's message
    completed with the times the table's revisions span: their logical times, or their
    commit times (``committed``: ``--known-at``)."""
    try:
        return parse(value, option)
    except InvalidTimestampError as exc:
        times = [r.committed_at if committed else r.timestamp for r in history]
        what = "committed" if committed else "stamped"
        raise InputError(
            f"{exc}; table {table!r} holds revisions {what} {iso(min(times))} .. {iso(max(times))}"
        ) from exc


def iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


@click.command("show")
@click.argument("root")
@click.argument("table")
@click.option("--as-of", help="The state as of a time with an offset, e.g. 2020-01-03T00:00Z.")
@click.option("--at", help="The state pinned at HEAD, HEAD~n, a sequence or a revision name.")
@click.option(
    "--known-at",
    help="As known at a commit time: only the revisions committed by then, e.g. "
    "2020-01-05T12:00Z (with --as-of: that logical time, as known then).",
)
@click.option(
    "--where",
    help="A SQL filter, e.g. \"day > 3 AND city = 'Oslo'\" (Polars SQL; Spark SQL with --spark).",
)
@click.option("--with-revision", is_flag=True, help="Add the revision that wrote each row.")
@limit_option(20, paged=True)
@json_option
@spark_option
@common_options
def show_command(
    root: str,
    table: str,
    as_of: str | None,
    at: str | None,
    known_at: str | None,
    where: str | None,
    with_revision: bool,
    limit: int | None,
    as_json: bool,
    use_spark: bool,
    endpoint_url: str | None,
) -> None:
    """Rows of TABLE: its latest state, as of a time, or pinned at a revision; as known at a
    commit time with --known-at.

    Two clocks: --as-of is logical time (the time a revision is stamped with: the data's
    time), --known-at is commit time (when a revision was written). "The features of last
    Tuesday" is --as-of; "what we knew last Tuesday" is --known-at.
    """
    if as_of is not None and at is not None:
        raise click.UsageError("give --as-of or --at, not both")
    limit = rows_limit(limit, as_json, 20)
    snapshot = open_snapshot(root, endpoint_url, use_spark)
    history = snapshot.revisions(table)
    when, position = checked(parse_time, as_of, "--as-of", history, table), parse_position(at)
    known = checked(parse_time, known_at, "--known-at", history, table, committed=True)
    scan = snapshot.scan(
        table, as_of=when, at=position, known_at=known, with_revision=with_revision
    )
    out = Output(as_json)
    point = f"as of {text(when)}" if when else f"at {at}" if at else "latest"
    point += f", as known at {text(known)}" if known else ""
    heading = f"{table} ({point}): {merged(planned(scan).selection)}"
    ids = list(history[-1].tables[table].id_columns)
    if use_spark:
        from . import spark_data

        rows = spark_data.show(scan, ids, where, endpoint_url)
        out.note(heading)
        spark_data.emit(out, rows, limit)
        return
    df = (filtered(scan, where) if where else scan).read()
    out.note(heading)
    emit_rows(out, df.sort(ids), limit)


def emit_rows(out: Output, df: pl.DataFrame, limit: int) -> None:
    rows = df.head(limit).to_dicts() if limit else df.to_dicts()
    out.limited(rows, limit, bool(limit) and df.height > limit, df.height, columns=df.columns)


def filtered(scan: Scan, where: str) -> Scan:
    """``scan`` keeping the rows a Polars SQL condition allows: the scan's own filter, so its
    ids prune the plan's files and reach the Parquet scans. A condition that does not parse
    or names no column of the read is bad input (exit 2), found before any data is read."""
    import polars as pl

    try:
        kept = scan.filter(pl.sql_expr(where))
        kept.to_polars().collect_schema()
    except (pl.exceptions.PolarsError, ValueError) as exc:
        raise InputError(f"--where {where!r}: {str(exc).strip().splitlines()[0]}") from exc
    return kept


@click.command("diff")
@click.argument("root")
@click.argument("table")
@click.option(
    "--since", required=True, help="From (exclusive): a time with an offset or a sequence."
)
@click.option("--until", help="Up to (inclusive): a time or a sequence (default: the head).")
@click.option("--stats", is_flag=True, help="Counts of changed values per column instead of rows.")
@limit_option(20, paged=True)
@json_option
@spark_option
@common_options
def diff_command(
    root: str,
    table: str,
    since: str,
    until: str | None,
    stats: bool,
    limit: int | None,
    as_json: bool,
    use_spark: bool,
    endpoint_url: str | None,
) -> None:
    """Entities of TABLE added, changed and deleted between --since and --until.

    Times compare the states as of two logical times; sequences (digits) compare the
    states at two points of the commit order. When a major lies in between, the change is
    a RESET (consumers replace, not merge): then the rows compare the full states.
    """
    import polars as pl

    limit = rows_limit(limit, as_json, 20)
    snapshot = open_snapshot(root, endpoint_url, use_spark)
    history = snapshot.revisions(table)
    start = checked(parse_point, since, "--since", history, table)
    end = checked(parse_point, until, "--until", history, table)
    by_sequence = isinstance(start, int)
    if end is not None and isinstance(end, int) != by_sequence:
        raise click.UsageError("--since and --until must both be sequences or both be times")
    check_window(start, end, since, until, snapshot.head_sequence)
    if by_sequence:
        changed = snapshot.scan(table).changes(since_sequence=start, until_sequence=end)  # type: ignore[arg-type]
        before: Scan | None = snapshot.scan(table, at=start)
    else:
        changed = snapshot.scan(table).changes(since=start, until=end)
        before = snapshot.scan(table, as_of=start)
    selection = planned(changed).selection
    try:
        planned(before)
    except NoMajorRevisionError:  # nothing existed before: everything is added
        before = None
    ids = list(history[-1].tables[table].id_columns)

    out = Output(as_json)
    window = f"({since}, {until or 'HEAD'}]"
    if selection.is_reset:
        major = selection.major
        out.note(
            f"RESET: {table} {window} - major {major.name} (seq {major.sequence}, "
            f"{text(major.timestamp)}) re-evaluated every entity; consumers replace their "
            "copy. Rows compare the full states."
        )
    else:
        names = ", ".join(r.name for r in selection.window) or "none"
        out.note(f"{table} {window}: {len(selection.window)} revision(s) ({names})")
    if use_spark:
        from . import spark_data

        spark_data.diff(changed, before, ids, stats, limit, out, endpoint_url)
        return
    changes = changed.to_changes()
    lazy_diff, values = entity_diff(changes, before.to_polars() if before else None, ids)
    if stats:
        emit_stats(out, diff_stats(lazy_diff, values, changes.is_reset))
        return
    diff = lazy_diff.with_columns(pl.lit(changes.is_reset).alias("_reset")).sort(ids).collect()
    shown = diff.head(limit) if limit else diff
    emit_diff(
        out,
        (diff_row(r, ids, values) for r in shown.iter_rows(named=True)),
        ids,
        values,
        limit,
        bool(limit) and diff.height > limit,
        diff.height,
    )


def check_window(
    start: int | datetime, end: int | datetime | None, since: str, until: str | None, head: int
) -> None:
    """--since before --until (or, for a sequence, at most the log's head ``head``), said
    with the options: the engine's own refusal names its Python arguments."""
    if end is not None and start > end:  # type: ignore[operator]
        raise InputError(
            f"--since {since} is after --until {until}; the window is (--since, --until]: swap them"
        )
    if end is None and isinstance(start, int) and start > head:
        raise InputError(f"--since {since} is after the head of the log (sequence {head})")


@click.command("history")
@click.argument("root")
@click.argument("table")
@click.option(
    "--id",
    "id_values",
    multiple=True,
    required=True,
    help="An id column and value: --id col=value (repeat per id column, then per entity).",
)
@click.option("--since", help="Only versions still valid after this time (with an offset).")
@click.option("--until", help="The history as known at this logical time.")
@limit_option(100, paged=True)
@json_option
@spark_option
@common_options
def history_command(
    root: str,
    table: str,
    id_values: tuple[str, ...],
    since: str | None,
    until: str | None,
    limit: int | None,
    as_json: bool,
    use_spark: bool,
    endpoint_url: str | None,
) -> None:
    """Every version of the entities of TABLE with the given ids (SCD2, in logical time).

    --id id=1 --id id=2 asks for two entities of a one-column id; with several id columns,
    a column that comes again starts the next entity (an entity may give only some).
    """
    import polars as pl

    limit = rows_limit(limit, as_json, 100)
    snapshot = open_snapshot(root, endpoint_url, use_spark)
    history = snapshot.revisions(table)
    write = history[-1].tables[table]
    entities = parse_entities(
        id_values, table, write.id_columns, id_types(write.schema_json, write.id_columns)
    )
    start = checked(parse_time, since, "--since", history, table)
    end = checked(parse_time, until, "--until", history, table)
    versions_scan = snapshot.scan(table).history(since=start, until=end)
    if use_spark:
        from . import spark_data

        rows, more = spark_data.history(
            versions_scan, entities, write.id_columns, limit, endpoint_url
        )
        total = None
    else:
        versions = versions_scan.filter(
            pl.any_horizontal(
                pl.all_horizontal(pl.col(c) == v for c, v in entity.items()) for entity in entities
            )
        ).read()
        versions = versions.sort([*write.id_columns, "valid_from"])
        rows = (versions.head(limit) if limit else versions).to_dicts()
        more, total = bool(limit) and versions.height > limit, versions.height
    by_name = {r.name: r for r in history}
    for row in rows:
        revision = by_name[row["_revision"]]
        row["_revision_sequence"] = revision.sequence
        row["_revision_kind"] = "major" if revision.is_major else "minor"
    emit_history(Output(as_json), table, write.id_columns, entities, rows, (limit, more, total))


COMMANDS = (show_command, diff_command, history_command)
