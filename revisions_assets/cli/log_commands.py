"""Commands that read only logs, never data: ``log``, ``tables``, ``lag``. No Spark."""

from __future__ import annotations

import click
import pandas as pd

from ..core.errors import RevisionsError
from ..core.log.consumers import recorded_positions, unconsumed
from ..core.log.records import Revision
from ..core.log.view import LogView
from ..core.read.plan.scans import plan_merge
from ..core.read.plan.selection import state_selection
from ..core.timeutil import now_utc
from .common import common_options, json_option, limit_option, open_dataset
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
    ds = open_dataset(root, endpoint_url)
    frame = ds.log()  # every entry, with its kind and vacuum marks
    if table is not None:
        frame = frame[frame["sequence"].isin([r.sequence for r in ds.revisions(table)])]
    shown = frame.tail(limit) if limit else frame
    rows = [
        {**row, "vacuumed_by": None if pd.isna(row["vacuumed_by"]) else int(row["vacuumed_by"])}
        for row in shown.to_dict("records")
    ]
    out = Output(as_json)
    if as_json:
        out.rows(rows)
        return
    for row in rows:
        row["bytes"] = human_bytes(row["bytes"])
        row["committed_at"] = row["committed_at"].floor("s")  # to the second, for people
        row["vacuumed"] = f"by {row['vacuumed_by']}" if row["vacuumed"] else ""
    columns = ["sequence", "name", "timestamp", "kind", "version", "tables", "rows"]
    columns += ["tombstones", "files", "bytes", "committed_at"]
    if any(row["vacuumed"] for row in rows):
        columns.append("vacuumed")
    if any(row["upstream"] for row in rows):  # a consumer: the positions it recorded
        columns.append("upstream")
    out.rows(rows, columns=columns)
    if len(shown) < len(frame):
        out.note(f"the last {len(shown)} of {len(frame)} revisions (--limit 0 shows all)")


@click.command("tables")
@click.argument("root")
@json_option
@common_options
def tables_command(root: str, as_json: bool, endpoint_url: str | None) -> None:
    """The tables of ROOT: id columns, schema, head revision, revisions since the base."""
    ds = open_dataset(root, endpoint_url)
    view = LogView(ds.revisions())
    rows = []
    for name, info in ds.tables().items():
        history = view.history(name)
        plan = plan_merge(view, state_selection(history, name), f"{ds.root}: table {name!r}")
        base = plan.compaction.record if plan.compaction is not None else plan.merge[0]
        head = history[-1]
        rows.append(
            {
                "table": name,
                "id_columns": list(info.id_columns),
                "schema": [
                    {"name": f.name, "type": f.dataType.simpleString(), "nullable": f.nullable}
                    for f in info.schema.fields
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
    consumer = open_dataset(consumer_root, endpoint_url)
    positions = recorded_positions(consumer.revisions())
    now = now_utc()
    upstream_logs: dict[str, tuple[Revision, ...] | str] = {}
    rows = []
    for (own_table, dataset, table), position in sorted(positions.items()):
        if dataset not in upstream_logs:
            try:
                upstream_logs[dataset] = open_dataset(dataset, endpoint_url).revisions()
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
        out.note(f"{consumer.root} records no upstream positions: it consumes nothing")
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
