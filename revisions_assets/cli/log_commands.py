"""Commands that read only logs, never data: ``log``, ``tables``, ``lag``. No Spark.

``describe`` adds the row counts, which it reads through ``DatasetReader`` (in this
process, the id columns only).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import click

from ..core.errors import RevisionsError
from ..core.log.consumers import follows, recorded_positions, unconsumed, upstream_roots
from ..core.log.records import Revision, stored_dataset, to_ranges
from ..core.log.view import LogView
from ..core.read.plan.requests import LogSnapshot, current_schema, plan_state
from ..core.read.scan import DatasetSnapshot
from ..core.timeutil import now_utc
from .common import (
    DURATION,
    EXIT_DATASET,
    EXIT_FINDINGS,
    InputError,
    common_options,
    json_option,
    limit_option,
    open_log,
    rows_limit,
    storage_options,
)
from .data_output import sql_type
from .output import Output, text

# -- log ----------------------------------------------------------------------------------------


@click.command("log")
@click.argument("root")
@click.option(
    "--table",
    help="Only the entries of this table (its revisions, compactions, purges, vacuums); "
    "the refs count its revisions.",
)
@limit_option(20)
@json_option
@common_options
def log_command(
    root: str, table: str | None, limit: int | None, as_json: bool, endpoint_url: str | None
) -> None:
    """The log of ROOT: one row per entry, the newest LIMIT, in commit order.

    Each entry says what it did: a major's reason, what a compaction replaces, what a
    purge removed and why, what a vacuum removed. Data revisions carry their ref: HEAD,
    HEAD~1, ... as `show --at` counts them (in the history of each table; maintenance
    entries are not counted).
    """
    revision_log = open_log(root, endpoint_url)
    root = revision_log.storage.uri
    view = revision_log.view()
    refs = table_refs(view)
    entries = list(view.records)
    if table is not None:
        view.table_revisions(table)  # UnknownTableError naming the known tables
        entries = [r for r in entries if table in touched_tables(r, view)]
    limit = rows_limit(limit, as_json, 20)
    shown = entries[-limit:] if limit else entries
    rows = [entry_row(r, view, refs, table) for r in shown]
    out = Output(as_json)
    if as_json:
        out.rows(rows)
        return
    for row in rows:
        row["bytes"] = human_bytes(row["bytes"])
        row["committed_at"] = row["committed_at"].replace(microsecond=0)  # for people
        row["vacuumed"] = f"by {row['vacuumed_by']}" if row["vacuumed"] else ""
        row["ref"] = ", ".join(  # refs count per table: name it when there are several
            ref if len(view.tables()) == 1 or table is not None else f"{ref} ({t})"
            for t, ref in row["refs"].items()
        )
        row["version"] = (
            ", ".join(f"{t}: {v}" for t, v in row["version"].items())
            if isinstance(row["version"], dict)
            else row["version"]
        )
        row["upstream"] = ", ".join(
            f"{stored_dataset(root, p['dataset'])}#{p['table']}@{p['sequence']}"
            for p in row["upstream"]
        )
    columns = ["sequence", "ref", "kind", "what", "name", "timestamp", "tables", "rows"]
    columns += ["tombstones", "files", "bytes", "version", "committed_at"]
    if any(row["vacuumed"] for row in rows):
        columns.append("vacuumed")
    if any(row["upstream"] for row in rows):  # a consumer: the positions it recorded
        columns.append("upstream")
    out.rows(rows, columns=columns, wrap=("what",))
    if len(shown) < len(entries):
        out.note(f"the last {len(shown)} of {len(entries)} entries (--limit 0 shows all)")


def table_refs(view: LogView) -> dict[int, dict[str, str]]:
    """Per data revision, its ref in each table it wrote: ``HEAD``, ``HEAD~1``, ..."""
    refs: dict[int, dict[str, str]] = {}
    for table in view.tables():
        for back, record in enumerate(reversed(view.table_revisions(table))):
            refs.setdefault(record.sequence, {})[table] = "HEAD" if back == 0 else f"HEAD~{back}"
    return refs


def touched_tables(record: Revision, view: LogView) -> list[str]:
    """The tables an entry wrote, compacted, purged or (a vacuum) removed files of."""
    if record.purge is not None:
        return sorted(record.purge.swaps)
    if record.vacuum is not None:
        removed = (view.records[s - 1] for s in record.vacuum.removed)
        return sorted({t for r in removed for t in r.tables})
    return sorted(record.tables)


def entry_row(
    record: Revision,
    view: LogView,
    refs: dict[int, dict[str, str]],
    table: str | None,
) -> dict[str, Any]:
    """One entry as JSON sees it: its fields, what it did (``what`` for people, and the
    details as objects: ``compaction``, ``purge``, ``vacuum``, ``carries``)."""
    vacuum = view.removed_by(record.sequence)
    own_refs = refs.get(record.sequence, {})
    tables = record.tables
    versions = {t: w.version for t, w in tables.items()}
    row: dict[str, Any] = {
        "sequence": record.sequence,
        "refs": {t: r for t, r in own_refs.items() if table is None or t == table},
        "name": record.name,
        "kind": record.kind,
        "is_major": record.is_major,
        "what": what_it_did(record, view),
        "reason": record.purge.reason if record.purge else record.properties.get("reason"),
        "timestamp": record.timestamp,
        "committed_at": record.committed_at,
        "tables": touched_tables(record, view),
        "version": (  # one version, or per table when its tables differ
            record.version
            if record.version is not None or not versions
            else versions
            if len(set(versions.values())) > 1
            else next(iter(versions.values()))
        ),
        "rows": record.rows,
        "tombstones": record.tombstones,
        "files": record.file_count,
        "bytes": record.bytes,
        "data_change": record.data_change,
        "asset_key": record.producer.get("asset_key"),
        "run_id": record.producer.get("run_id"),
        "partition_key": record.producer.get("partition_key"),
        "upstream": [
            {"dataset": p.dataset, "table": p.table, "sequence": p.sequence}
            for p in record.upstream
        ],
        "properties": dict(record.properties),
        "vacuumed": vacuum is not None,
        "vacuumed_by": vacuum.sequence if vacuum is not None else None,
    }
    carries = {t: list(w.carries) for t, w in tables.items() if w.carries}
    if carries:
        row["carries"] = carries
    if record.replaces:
        row["compaction"] = {
            t: {"major": c.major, "through": c.through, "revisions": c.revisions}
            for t, c in record.replaces.items()
        }
    if record.purge is not None:
        row["purge"] = {
            "reason": record.purge.reason,
            "entities": record.purge.entities,
            "rows_removed": record.purge.rows_removed,
            "entries_rewritten": {
                t: [s.sequence for s in swaps] for t, swaps in record.purge.swaps.items()
            },
        }
    if record.vacuum is not None:
        mark = record.vacuum
        deleted = mark.deleted
        removed = [view.records[s - 1] for s in mark.removed]
        row["vacuum"] = {
            "removed": list(mark.removed),
            # what it deleted; entries of earlier releases: the data files the log referenced
            "files": deleted.files if deleted else sum(r.file_count for r in removed),
            "bytes": deleted.bytes if deleted else sum(r.bytes for r in removed),
            "folders": list(deleted.folders) if deleted else None,
            "loose": list(deleted.loose) if deleted else None,
            "purged_files": (
                {str(s): list(paths) for s, paths in deleted.purged.items()} if deleted else None
            ),
            "horizon_sequence": mark.horizon_sequence,
            "horizon_timestamp": mark.horizon_timestamp,
            "retain_seconds": mark.retain_seconds,
        }
    return row


def what_it_did(record: Revision, view: LogView) -> str:
    """An entry's effect in words: the audit trail the ``log`` table shows."""
    if record.purge is not None:
        mark = record.purge
        entries = sum(len(s) for s in mark.swaps.values())
        tables = ", ".join(sorted(mark.swaps)) or "no table"
        return (
            f"purged {mark.entities} entities from {tables}: {mark.rows_removed} rows removed "
            f"from {entries} entries; reason: {mark.reason}"
        )
    if record.vacuum is not None:
        mark = record.vacuum
        removed = [view.records[s - 1] for s in mark.removed]
        ranges = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in to_ranges(mark.removed))
        horizon = (
            f"retain {duration(timedelta(seconds=mark.retain_seconds))}, horizon sequence "
            f"{mark.horizon_sequence}"
        )
        deleted = mark.deleted
        if deleted is None:  # an entry of an earlier release: the data files it marked
            return (
                f"removed the files of {len(removed)} entries ({ranges}): "
                f"{sum(r.file_count for r in removed)} data files, "
                f"{human_bytes(sum(r.bytes for r in removed))}; {horizon}"
            )
        parts = [f"the files of {len(removed)} entries ({ranges})"] if removed else []
        parts += [
            f"{len(paths)} files purge {s} swapped out" for s, paths in deleted.purged.items()
        ]
        owners = {r.name: r for r in view.records}  # each folder -> the entry it holds
        owners |= {f.split("/", 1)[0]: r for r in view.records for f in view.files_of(r)}
        earlier = {
            owners[f].sequence
            for f in deleted.folders
            if f in owners and owners[f].sequence not in mark.removed
        }
        if earlier:  # finishing what an interrupted vacuum marked
            parts.append(f"the files left of {len(earlier)} entries an earlier vacuum marked")
        leftovers = [f for f in deleted.folders if f not in owners]
        parts += [f"{len(leftovers)} folders of no entry"] if leftovers else []
        parts += [] if parts else ["leftover files"]
        where = [f"{len(deleted.folders)} folders whole"]
        where += [f"{len(deleted.loose)} other files"] if deleted.loose else []
        return (
            f"removed {deleted.files} files, {human_bytes(deleted.bytes)} ({', '.join(where)}): "
            f"{', '.join(parts)}; {horizon}"
        )
    if record.replaces:
        return "; ".join(
            f"holds {t} as of sequence {c.through}: {c.revisions} revisions from major {c.major}"
            for t, c in record.replaces.items()
        )
    parts = []
    if record.is_major and record.properties.get("reason"):
        parts.append(record.properties["reason"])
    elif not record.is_major and record.producer.get("partition_key"):
        parts.append(f"partition {record.producer['partition_key']}")
    for t, write in record.tables.items():
        if write.carries:
            parts.append(f"carries {len(write.carries)} revisions of {t}")
        offered = offered_now(record, t, view)
        if offered is not None:
            # a skip_unchanged major writes tombstones for the entities it was not offered
            written = write.rows - write.tombstones if record.is_major else write.rows
            if offered != written:
                parts.append(f"{offered - written} of {offered} rows unchanged")
    return "; ".join(parts)


def offered_now(record: Revision, table: str, view: LogView) -> int | None:
    """The rows a skip_unchanged entry was offered for ``table`` (None when it recorded
    none), less those purges removed since (``PurgeMark.offered_removed``; purges of
    earlier releases recorded only the rows removed from its files)."""
    offered = record.tables[table].rows_offered
    if offered is None:
        return None
    for entry in view.records[record.sequence :]:
        mark = entry.purge
        if mark is None:
            continue
        counts = mark.offered_removed.get(table)
        if counts is not None:
            offered -= counts.get(record.sequence, 0)
        else:
            swaps = mark.swaps.get(table, ())
            offered -= sum(s.rows_removed for s in swaps if s.sequence == record.sequence)
    return offered


# -- tables -------------------------------------------------------------------------------------


def table_summary(snapshot: LogSnapshot, name: str) -> dict[str, Any]:
    """One table's head, base and what a default read merges on it, from the log alone."""
    view = snapshot.view
    history = view.table_revisions(name)
    plan = plan_state(snapshot, name).rows
    base = plan.compaction.record if plan.compaction is not None else plan.merge[0]
    head = history[-1]
    live = [
        *[r for r in history if not view.is_removed(r.sequence)],
        *[c.record for c in view.compactions(name) if not view.is_removed(c.sequence)],
    ]
    return {
        "table": name,
        "id_columns": list(head.tables[name].id_columns),
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
        "on_base": [t.entry for t in plan.newer],
        "read_files": sum(len(t.files) for t in plan.tasks),
        "read_bytes": sum(t.bytes for t in plan.tasks),
        "stored_files": sum(len(r.tables[name].files) for r in live),
        "stored_bytes": sum(r.tables[name].bytes for r in live),
    }


def columns_of(snapshot: LogSnapshot, table: str) -> list[dict[str, Any]]:
    """A table's current columns (what a read at the head returns) as JSON sees them: name,
    SQL type, nullable."""
    return [
        {"name": f.name, "type": sql_type(f.type), "nullable": True}
        for f in current_schema(snapshot, table)
    ]


def shown_head_and_base(row: dict[str, Any]) -> None:
    """A summary's head and base for people: the name, its sequence and time or kind."""
    row["head"] = f"{row['head']} (seq {row['head_sequence']}, {text(row['head_timestamp'])})"
    row["base"] = f"{row['base']} ({row['base_kind']}, seq {row['base_sequence']})"


#: what ``tables`` shows of ``table_summary`` (``describe`` shows all of it)
TABLE_FIELDS = (
    "revisions",
    "majors",
    "head",
    "head_sequence",
    "head_timestamp",
    "version",
    "base",
    "base_kind",
    "base_sequence",
    "revisions_since_base",
)


@click.command("tables")
@click.argument("root")
@json_option
@common_options
def tables_command(root: str, as_json: bool, endpoint_url: str | None) -> None:
    """The tables of ROOT: id columns, schema, head revision, revisions since the base."""
    revision_log = open_log(root, endpoint_url)
    snapshot = DatasetSnapshot(revision_log.storage.uri, revision_log.view())
    rows = []
    for name in snapshot.view.tables():
        summary = table_summary(snapshot, name)
        rows.append(
            {
                "table": name,
                "id_columns": summary["id_columns"],
                "schema": columns_of(snapshot, name),
                **{k: summary[k] for k in TABLE_FIELDS},
            }
        )
    out = Output(as_json)
    if as_json:
        out.rows(rows)
        return
    for row in rows:
        shown_head_and_base(row)
    out.rows(
        rows,
        columns=["table", "id_columns", "revisions", "majors", "revisions_since_base", "version"]
        + ["head", "base"],
        headers={"id_columns": "ids", "revisions_since_base": "since base"},
    )
    for row in rows:
        columns = ", ".join(f"{c['name']} {c['type']}" for c in row["schema"])
        out.note(f"{row['table']}: {columns}")


# -- describe ---------------------------------------------------------------------------------


#: the newest revisions on the base that ``describe`` names (a table whose compaction is off
#: may have thousands)
ON_BASE_SHOWN = 20


@click.command("describe")
@click.argument("root")
@click.argument("table", required=False)
@json_option
@common_options
def describe_command(root: str, table: str | None, as_json: bool, endpoint_url: str | None) -> None:
    """Per table of ROOT (or TABLE): current rows, files and bytes, columns, head, base and
    the revisions a read merges on the base.

    The row count reads the id columns of the files a default read opens (in this process,
    no Spark); everything else comes from the log. "read" files are those a default read
    opens; "stored" files are every file still referenced (what vacuum keeps).
    """
    from ..core.reader import DatasetReader

    reader = DatasetReader(root, storage_options=storage_options(endpoint_url))
    snapshot = reader.snapshot(refresh=False)  # the log as the reader read it on opening
    view = snapshot.view
    if table is not None:
        view.table_revisions(table)  # UnknownTableError naming the known tables
    refs = table_refs(view)
    by_name = {r.name: r for r in view.records}
    rows = []
    for name in [table] if table is not None else view.tables():
        summary = table_summary(snapshot, name)
        on_base = [by_name[n] for n in summary.pop("on_base")]
        rows.append(
            {
                "table": name,
                "rows": snapshot.scan(name).count(),
                **summary,
                "columns": columns_of(snapshot, name),
                "on_base": [
                    {"name": r.name, "sequence": r.sequence, "ref": refs[r.sequence][name]}
                    for r in on_base
                ],
            }
        )
    out = Output(as_json)
    if as_json:
        out.rows(rows)
        return
    for row in rows:
        row["read"] = f"{row['read_files']} files, {human_bytes(row['read_bytes'])}"
        row["stored"] = f"{row['stored_files']} files, {human_bytes(row['stored_bytes'])}"
        shown_head_and_base(row)
        row["column_count"] = len(row["columns"])
    if table is None:
        out.rows(
            rows,
            columns=["table", "rows", "column_count", "read", "stored", "revisions_since_base"]
            + ["version", "head", "base"],
            headers={"column_count": "columns", "revisions_since_base": "since base"},
        )
        return
    (row,) = rows
    for label, key in (
        ("table", "table"),
        ("rows", "rows"),
        ("id columns", "id_columns"),
        ("read", "read"),
        ("stored", "stored"),
        ("revisions", "revisions"),
        ("majors", "majors"),
        ("version", "version"),
        ("head", "head"),
        ("base", "base"),
    ):
        out.note(f"{label + ':':<12} {text(row[key])}")
    shown = row["on_base"][-ON_BASE_SHOWN:]
    earlier = len(row["on_base"]) - len(shown)
    merged = f"\n  … {earlier} earlier (--json lists them all)" if earlier else ""
    merged += "".join(f"\n  {r['ref']} {r['name']} (seq {r['sequence']})" for r in shown)
    out.note(f"{'on base:':<12} {row['revisions_since_base']} revision(s){merged}")
    out.rows(row["columns"], columns=["name", "type", "nullable"])


# -- lag ----------------------------------------------------------------------------------------


@click.command("lag")
@click.argument("consumer_root")
@click.option(
    "--max-behind",
    type=click.IntRange(min=0),
    help="Exit 1 when an upstream table has more unconsumed revisions than this.",
)
@click.option(
    "--max-age",
    type=DURATION,
    help="Exit 1 when an unconsumed revision is older than this (by commit time): 12h, 2d.",
)
@click.option(
    "--map-root",
    "root_maps",
    multiple=True,
    metavar="OLD=NEW",
    help="Read an upstream recorded under OLD at NEW instead (repeatable): for datasets "
    "copied elsewhere whose positions name absolute roots. NEW is followed.",
)
@click.option(
    "--upstream-root",
    "upstream_root_options",
    multiple=True,
    metavar="ROOT",
    help="Also follow upstreams under ROOT (a folder or s3://bucket/prefix; repeatable). "
    "By default only those in the folder holding CONSUMER_ROOT are read.",
)
@json_option
@common_options
def lag_command(
    consumer_root: str,
    max_behind: int | None,
    max_age: timedelta | None,
    root_maps: tuple[str, ...],
    upstream_root_options: tuple[str, ...],
    as_json: bool,
    endpoint_url: str | None,
) -> None:
    """How far the consumer at CONSUMER_ROOT is behind each upstream table it reads.

    Per consumer table and upstream table (the upstream roots are those recorded in the
    consumer's positions, resolved against CONSUMER_ROOT where they are relative): the
    consumed position against the upstream head, the unconsumed revisions and the age of
    the oldest of them (by commit time). An upstream is read only when it lies in the
    folder holding CONSUMER_ROOT, under an --upstream-root or a --map-root NEW: the log
    names it, and a log is data; others are reported as not followed. Exit 1 past
    --max-behind or --max-age; exit 3 when an upstream is not followed or cannot be read,
    or its head is behind the recorded position (it lost entries the consumer consumed);
    every row is printed first.
    """
    maps = parse_root_maps(root_maps)
    consumer = open_log(consumer_root, endpoint_url)
    consumer_uri = consumer.storage.uri
    roots = upstream_roots(consumer_uri, [*upstream_root_options, *(new for _, new in maps)])
    positions = recorded_positions(consumer.records)
    now = now_utc()
    upstream_logs: dict[str, tuple[Revision, ...] | str] = {}
    rows = []
    for (own_table, dataset, table), position in sorted(positions.items()):
        read_at = mapped_root(dataset, maps)
        row: dict[str, Any] = {"consumer_table": own_table, "upstream": read_at, "table": table}
        row["position"] = position
        if not follows(roots, read_at):
            not_followed = (
                f"not followed: {read_at} lies outside the roots lag reads upstreams under "
                f"({', '.join(roots)}); pass --upstream-root to follow it"
            )
            rows.append({**row, "followed": False, "error": not_followed, "over_limit": None})
            continue
        row["followed"] = True
        if read_at not in upstream_logs:
            try:
                upstream_logs[read_at] = open_log(read_at, endpoint_url).records
            except RevisionsError as exc:  # reported in its row; other upstreams still shown
                upstream_logs[read_at] = str(exc)
        records = upstream_logs[read_at]
        if isinstance(records, str):
            rows.append({**row, "error": records, "over_limit": None})
            continue
        try:
            pending = unconsumed(records, table, position)
        except RevisionsError as exc:
            rows.append({**row, "error": str(exc), "over_limit": None})
            continue
        if position > records[-1].sequence:  # it consumed entries the upstream no longer has
            rows.append(
                {
                    **row,
                    "head": records[-1].sequence,
                    "error": f"position {position} is past the upstream's head "
                    f"{records[-1].sequence}: the upstream lost the entries after it that "
                    "this consumer consumed (run `revisions verify` on the upstream)",
                    "over_limit": None,
                }
            )
            continue
        oldest = min((r.committed_at for r in pending), default=None)
        age = (now - oldest).total_seconds() if oldest else 0.0
        over = (max_behind is not None and len(pending) > max_behind) or (
            max_age is not None and age > max_age.total_seconds()
        )
        rows.append(
            {
                **row,
                "head": records[-1].sequence,
                "revisions_behind": len(pending),
                "oldest_unconsumed": oldest,
                "age_seconds": age,
                "error": None,
                "over_limit": over,
            }
        )
    out = Output(as_json)
    failed = sum(bool(r["error"]) for r in rows)
    late = sum(bool(r["over_limit"]) for r in rows)
    if as_json:
        out.rows(rows)
    elif not rows:
        out.note(f"{consumer_uri} records no upstream positions: it consumes nothing")
    else:
        for row in rows:
            row["age"] = human_age(row["age_seconds"]) if "age_seconds" in row else None
            row["shown_upstream"] = stored_dataset(consumer_uri, row["upstream"])
            row["limit"] = "OVER" if row["over_limit"] else ""
        columns = ["consumer_table", "shown_upstream", "table", "position", "head"]
        columns += ["revisions_behind", "age", "oldest_unconsumed"]
        if max_behind is not None or max_age is not None:
            columns.insert(0, "limit")
        out.rows(
            rows,
            columns=columns + (["error"] if failed else []),
            headers={
                "revisions_behind": "behind",
                "oldest_unconsumed": "oldest unconsumed",
                "shown_upstream": "upstream",
            },
            wrap=("error",),
        )
    if failed:
        if not as_json:
            out.note(
                f"{failed} upstream table(s) were not followed, could not be read or lost "
                f"entries: exit {EXIT_DATASET}"
            )
        click.get_current_context().exit(EXIT_DATASET)
    if late:
        limits = [f"--max-behind {max_behind}"] if max_behind is not None else []
        limits += [f"--max-age {duration(max_age)}"] if max_age is not None else []
        out.note(f"{late} upstream table(s) past {' / '.join(limits)}: exit {EXIT_FINDINGS}")
        click.get_current_context().exit(EXIT_FINDINGS)


def parse_root_maps(values: Sequence[str]) -> list[tuple[str, str]]:
    """``--map-root OLD=NEW`` pairs, longest OLD first."""
    maps = []
    for value in values:
        old, sep, new = value.partition("=")
        if not sep or not old or not new:
            raise InputError(f"--map-root {value!r}: expected OLD=NEW, e.g. /data/old=/data/new")
        maps.append((old.rstrip("/"), new.rstrip("/")))
    return sorted(maps, key=lambda m: -len(m[0]))


def mapped_root(root: str, maps: Sequence[tuple[str, str]]) -> str:
    """``root`` with the first matching OLD prefix (a whole path segment) replaced by NEW."""
    for old, new in maps:
        if root == old or root.startswith(old + "/"):
            return new + root[len(old) :]
    return root


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000:
            return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


def duration(value: timedelta) -> str:
    """A duration as the options spell it: ``7d``, ``12h``, ``30m``, ``45s``."""
    seconds = value.total_seconds()
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def human_age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes = seconds / 60
    if minutes < 60:
        return f"{minutes:.0f}m"
    hours = minutes / 60
    return f"{hours:.1f}h" if hours < 48 else f"{hours / 24:.1f}d"


COMMANDS = (log_command, tables_command, describe_command, lag_command)
