"""Commands that read only logs, never data: ``log``, ``tables``, ``lag``. No Spark."""

from __future__ import annotations

import click

from ..core.errors import RevisionsError
from ..core.log.records import Revision
from ..core.read.schemas import plan_writes, recorded_types
from ..core.read.selection import plan_read, recorded_positions, state_selection, unconsumed
from ..core.timeutil import now_utc
from .common import common_options, json_option, limit_option, open_log
from .data_output import sql_type
from .output import Output, text


@click.command("log")
@click.argument("root")
@click.option("--table", help="Only the revisions that wrote this table.")
@limit_option(20)
@json_option
@common_options
def log_command(
    root: str, table: str | None, limit: int, as_json: bool, endpoint_url: str | None
) -> None:
    """The log of ROOT: one row per revision, the newest LIMIT, in commit order."""
    revision_log = open_log(root, endpoint_url)
    every = revision_log.description().to_pylist()  # every entry, its kind and vacuum marks
    if table is not None:
        wrote = {r.sequence for r in revision_log.view().history(table)}
        every = [row for row in every if row["sequence"] in wrote]
    rows = every[-limit:] if limit else every
    out = Output(as_json)
    if as_json:
        out.rows(rows)
        return
    for row in rows:
        row["bytes"] = human_bytes(row["bytes"])
        row["committed_at"] = row["committed_at"].replace(microsecond=0)  # for people
        row["vacuumed"] = f"by {row['vacuumed_by']}" if row["vacuumed"] else ""
    columns = ["sequence", "name", "timestamp", "kind", "version", "tables", "rows"]
    columns += ["tombstones", "files", "bytes", "committed_at"]
    if any(row["vacuumed"] for row in rows):
        columns.append("vacuumed")
    if any(row["upstream"] for row in rows):  # a consumer: the positions it recorded
        columns.append("upstream")
    out.rows(rows, columns=columns)
    if len(rows) < len(every):
        out.note(f"the last {len(rows)} of {len(every)} revisions (--limit 0 shows all)")


@click.command("tables")
@click.argument("root")
@json_option
@common_options
def tables_command(root: str, as_json: bool, endpoint_url: str | None) -> None:
    """The tables of ROOT: id columns, schema, head revision, revisions since the base."""
    revision_log = open_log(root, endpoint_url)
    view = revision_log.view()
    rows = []
    for name in view.tables():
        history = view.history(name)
        where = f"{revision_log.storage.uri}: table {name!r}"
        plan = plan_read(view, state_selection(history, name), where)
        base = plan.base.record if plan.base is not None else plan.merge[0]
        head = history[-1]
        columns = recorded_types(plan_writes(plan))  # the schema a read returns
        rows.append(
            {
                "table": name,
                "id_columns": list(head.tables[name].id_columns),
                "schema": [
                    {"name": column, "type": sql_type(data_type), "nullable": True}
                    for column, data_type in columns.items()
                ],
                "revisions": len(history),
                "majors": sum(r.is_major for r in history),
                "head": head.name,
                "head_sequence": head.sequence,
                "head_timestamp": head.timestamp,
                "version": head.version_of(name),
                "base": base.name,
                "base_kind": base.kind,
                "base_sequence": base.sequence,
                "revisions_since_base": plan.on_base,
            }
        )
    out = Output(as_json)
    if as_json:
        out.rows(rows)
        return
    for row in rows:
        row["head"] = f"{row['head']} (seq {row['head_sequence']}, {text(row['head_timestamp'])})"
        row["base"] = f"{row['base']} ({row['base_kind']}, seq {row['base_sequence']})"
    out.rows(
        rows,
        columns=["table", "id_columns", "revisions", "majors", "head", "version", "base"]
        + ["revisions_since_base"],
        headers={"id_columns": "ids", "revisions_since_base": "since base"},
    )
    for row in rows:
        columns = ", ".join(f"{c['name']} {c['type']}" for c in row["schema"])
        out.note(f"{row['table']}: {columns}")


@click.command("lag")
@click.argument("consumer_root")
@json_option
@common_options
def lag_command(consumer_root: str, as_json: bool, endpoint_url: str | None) -> None:
    """How far the consumer at CONSUMER_ROOT is behind each upstream table it reads.

    Per consumer table and upstream table (the upstream roots are those recorded in the
    consumer's positions): the consumed position against the upstream head, the
    unconsumed revisions and the age of the oldest of them (by commit time).
    """
    consumer = open_log(consumer_root, endpoint_url)
    positions = recorded_positions(consumer.records)
    now = now_utc()
    upstream_logs: dict[str, tuple[Revision, ...] | str] = {}
    rows = []
    for (own_table, dataset, table), position in sorted(positions.items()):
        if dataset not in upstream_logs:
            try:
                upstream_logs[dataset] = open_log(dataset, endpoint_url).records
            except RevisionsError as exc:  # reported in its row; other upstreams still shown
                upstream_logs[dataset] = str(exc)
        records = upstream_logs[dataset]
        row = {"consumer_table": own_table, "upstream": dataset, "table": table}
        row["position"] = position
        if isinstance(records, str):
            rows.append({**row, "error": records})
            continue
        try:
            pending = unconsumed(records, table, position)
        except RevisionsError as exc:
            rows.append({**row, "error": str(exc)})
            continue
        oldest = min((r.committed_at for r in pending), default=None)
        rows.append(
            {
                **row,
                "head": records[-1].sequence,
                "revisions_behind": len(pending),
                "oldest_unconsumed": oldest,
                "age_seconds": (now - oldest).total_seconds() if oldest else 0.0,
                "error": None,
            }
        )
    out = Output(as_json)
    if as_json:
        out.rows(rows)
        return
    if not rows:
        out.note(f"{consumer.storage.uri} records no upstream positions: it consumes nothing")
        return
    for row in rows:
        row["age"] = human_age(row["age_seconds"]) if "age_seconds" in row else None
    columns = ["consumer_table", "upstream", "table", "position", "head", "revisions_behind"]
    columns += ["oldest_unconsumed", "age"]
    out.rows(
        rows,
        columns=columns + (["error"] if any(r["error"] for r in rows) else []),
        headers={"revisions_behind": "behind", "oldest_unconsumed": "oldest unconsumed"},
    )


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000:
            return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


def human_age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes = seconds / 60
    if minutes < 60:
        return f"{minutes:.0f}m"
    hours = minutes / 60
    return f"{hours:.1f}h" if hours < 48 else f"{hours / 24:.1f}d"


COMMANDS = (log_command, tables_command, lag_command)
