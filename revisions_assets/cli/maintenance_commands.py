"""Commands that check or act on a dataset: ``verify``, ``compact``, ``vacuum``, ``purge``.

``verify`` without ``--deep`` and ``vacuum`` stay in the driver (no JVM); ``verify
--deep``, ``compact`` and ``purge`` read data and start Spark. Long work shows a rich
spinner on stderr and the engine's progress lines (its INFO log) under it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from ..core.log.records import COMPACTION, Revision
from ..core.log.view import LogView
from ..core.maintain.defaults import DEFAULT_GRACE, DEFAULT_TARGET_FILE_BYTES, MIN_RETAIN
from ..core.read.plan.refs import find_revision
from ..core.read.plan.requests import plan_state
from ..core.read.scan import DatasetSnapshot
from ..core.timeutil import now_utc
from ..core.write.file_size import compaction_needed
from .common import (
    DURATION,
    EXIT_FINDINGS,
    InputError,
    common_options,
    engine_command,
    json_option,
    open_dataset,
    open_log,
    start_spark,
    storage_options,
)
from .data_output import parse_entities, shown_entities
from .log_commands import duration, human_bytes
from .output import Output, jsonable

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from ..core.dataset import RevisionedDataset
    from ..core.maintain.findings import Finding
    from ..core.maintain.vacuum import VacuumReport
    from ..core.read.results import TableInfo


def open_writable(root: str, endpoint_url: str | None) -> RevisionedDataset:
    """The dataset at ``root`` for writing; refused (nothing written) when there is none."""
    open_dataset(root, endpoint_url)  # the spark extra; DatasetNotFoundError before any write
    from ..core.dataset import RevisionedDataset

    return RevisionedDataset(root, storage_options=storage_options(endpoint_url))


@contextmanager
def working(message: str, quiet: bool) -> Iterator[None]:
    """A spinner on stderr and the engine's INFO lines while long work runs."""
    console = Console(stderr=True)
    handler = logging.StreamHandler(console.file)
    handler.setFormatter(logging.Formatter("revisions: %(message)s"))
    engine = logging.getLogger("revisions_assets.core")
    level = engine.level
    if not quiet:
        engine.addHandler(handler)
        engine.setLevel(logging.INFO)
    try:
        if quiet or not console.is_terminal:
            yield
        else:
            with console.status(message):
                yield
    finally:
        engine.removeHandler(handler)
        engine.setLevel(level)


# -- verify -------------------------------------------------------------------------------------


@click.command("verify")
@click.argument("root")
@click.option(
    "--deep",
    is_flag=True,
    help="Also read the data (Spark): ids non-null and unique per revision, row counts "
    "matching the log.",
)
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too, not only on errors.")
@json_option
@common_options
def verify_command(
    root: str, deep: bool, strict: bool, as_json: bool, endpoint_url: str | None
) -> None:
    """Check ROOT: every finding with its fix. Exit 1 when one is an error (--strict: any).

    The log is gap-free and parseable and its newest entry not lost, every referenced
    file is present with a readable footer and the rows the log records, the description
    is current, no leftovers, no recorded upstream position past its upstream's head;
    --deep adds the data checks (only when there is no error: a deep_checks_skipped
    finding says so).
    """
    from ..core.maintain.verify import deep_skipped, verify

    options = storage_options(endpoint_url) or {}
    findings = verify(root, **options)
    skipped = deep_skipped(findings) if deep else None
    if skipped is not None:
        findings.append(skipped)
    elif not findings or deep:
        open_log(root, endpoint_url)  # a root that is no dataset is bad input
        if deep:
            ds = open_dataset(root, endpoint_url)
            start_spark(ds, endpoint_url)
            with working("reading the data", as_json):
                findings = ds.maintenance.verify(deep=True)
    rows = [finding_row(f) for f in findings]
    errors = sum(f.severity == "error" for f in findings)
    out = Output(as_json)
    if as_json:
        ran = deep and skipped is None
        out.json(
            {"root": root, "deep": deep, "deep_ran": ran, "healthy": not findings, "findings": rows}
        )
    elif not rows:
        out.note(f"{root}: healthy" + (" (deep)" if deep else ""))
    else:
        finding_rows(out, findings)
        out.note(f"{errors} errors, {len(rows) - errors} warnings")
    if errors or (strict and findings):
        click.get_current_context().exit(EXIT_FINDINGS)


def finding_row(finding: Finding) -> dict[str, str]:
    return {
        "severity": finding.severity,
        "kind": finding.kind,
        "path": finding.path,
        "message": finding.message,
        "fix": finding.fix,
    }


def finding_rows(out: Output, findings: Sequence[Finding]) -> None:
    """Findings as a table, then each fix once: per kind, or per finding where a finding
    has its own (the exact commands that put a misplaced folder back)."""
    rows = [finding_row(f) for f in findings]
    out.rows(rows, columns=["severity", "kind", "path", "message"], wrap=("path", "message"))
    for kind, fix in dict.fromkeys((r["kind"], r["fix"]) for r in rows):
        fixes = {r["fix"] for r in rows if r["kind"] == kind}
        paths = [r["path"] for r in rows if (r["kind"], r["fix"]) == (kind, fix)]
        where = f" ({', '.join(paths)})" if len(fixes) > 1 else ""
        out.note(f"fix {kind}{where}: {fix}")


# -- compact ------------------------------------------------------------------------------------


@click.command("compact")
@click.argument("root")
@click.option("--table", help="Only this table (default: every table).")
@click.option(
    "--target-file-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_TARGET_FILE_BYTES,
    show_default=True,
    help="About this many bytes per written file.",
)
@click.option(
    "--rebuild",
    metavar="REF",
    help="Write the damaged compaction REF (its name, a unique prefix, or its sequence) "
    "again from the revisions it holds, instead of compacting.",
)
@json_option
@common_options
def compact_command(
    root: str,
    table: str | None,
    target_file_bytes: int,
    rebuild: str | None,
    as_json: bool,
    endpoint_url: str | None,
) -> None:
    """Write the state of each table past its base as one compaction entry (Spark); a table
    whose base an earlier release wrote (one row group per file) is rewritten in the
    current layout too.

    The root, --table and whether any table has revisions on its base (or an old base's
    footers) are checked first, on the log alone: a refused request or nothing to do ends
    before Spark starts and writes nothing. --rebuild REF
    writes the state a damaged compaction holds again, as a new compaction that reads use
    instead (verify reports such a compaction as compaction_damaged).
    """
    ds = open_dataset(root, endpoint_url)  # read-only: a refused request writes nothing
    view = LogView(ds.revisions())
    if rebuild is not None:
        if table is not None:
            raise InputError("--rebuild writes the tables of the compaction REF: drop --table")
        damaged = find_revision(view.records, rebuild)  # UnknownRevisionError before Spark
        due = list(damaged.replaces) if damaged.kind == COMPACTION else []
        if not due:
            raise InputError(
                f"--rebuild {rebuild}: {damaged.kind} {damaged.name!r} (sequence "
                f"{damaged.sequence}) is not a compaction"
            )
    else:
        tables = [table] if table is not None else view.tables()
        # UnknownTableError for --table; a base alone in an earlier release's layout is due
        snapshot = DatasetSnapshot(ds.root, view)
        due = [t for t in tables if compaction_needed(ds.storage, plan_state(snapshot, t).rows)]
    out = Output(as_json)
    record = None
    if due:
        ds = open_writable(root, endpoint_url)
        start_spark(ds, endpoint_url)
        with working("rebuilding" if rebuild else "compacting", as_json):
            record = ds.maintenance.compact(
                table, target_file_bytes=target_file_bytes, rebuild=rebuild
            )
    rows = [] if record is None else compaction_rows(record)
    if as_json:
        out.rows(rows)
    elif record is None:
        out.note(
            f"{ds.root}: nothing to compact (every table reads from its base, in the current "
            "file layout)"
        )
    else:
        rebuilt = record.properties.get("rebuilds")
        out.note(
            f"compaction {record.name} committed as sequence {record.sequence}"
            + (f": it rebuilds {rebuilt}, which reads no longer use" if rebuilt else "")
        )
        out.rows(rows, columns=["table", "revisions", "major", "through", "rows", "files", "bytes"])


def compaction_rows(record: Revision) -> list[dict[str, Any]]:
    return [
        {
            "sequence": record.sequence,
            "name": record.name,
            "table": table,
            "revisions": covers.revisions,
            "major": covers.major,
            "through": covers.through,
            "rows": record.tables[table].rows,
            "files": len(record.tables[table].files),
            "bytes": record.tables[table].bytes,
            "rebuilds": record.properties.get("rebuilds"),
        }
        for table, covers in record.replaces.items()
    ]


# -- vacuum -------------------------------------------------------------------------------------


@click.command("vacuum")
@click.argument("root")
@click.option("--dry-run", is_flag=True, help="Report what would go; delete and commit nothing.")
@click.option(
    "--retain", type=DURATION, default="7d", show_default=True, help="Keep reads this far back."
)
@click.option(
    "--grace",
    type=DURATION,
    default=f"{int(DEFAULT_GRACE.total_seconds() // 60)}m",
    show_default=True,
    help="Leave folders and temporary files of writers untouched this long.",
)
@click.option(
    "--keep-majors/--no-keep-majors",
    default=True,
    show_default=True,
    help="Keep every major revision (else only the newest base of each table).",
)
@click.option(
    "--consumer",
    "consumers",
    multiple=True,
    help="A consumer dataset whose next change read is kept (repeatable).",
)
@click.option(
    "--force",
    is_flag=True,
    help=f"Allow a --retain below {duration(MIN_RETAIN)} (reads and jobs "
    "running longer than it lose their files).",
)
@json_option
@common_options
def vacuum_command(
    root: str,
    dry_run: bool,
    retain: timedelta,
    grace: timedelta,
    keep_majors: bool,
    consumers: tuple[str, ...],
    force: bool,
    as_json: bool,
    endpoint_url: str | None,
) -> None:
    """Remove the files no read within --retain needs (no Spark). First commits a vacuum
    entry marking them and recording what goes, then deletes; --dry-run changes nothing
    and lists what would go.

    A --retain below 1d needs --force: a read or job that planned before the vacuum and
    runs longer than the retention would lose its files (a dry run needs no --force).
    Before deleting, it reads the footers of the files that stand for what goes (the
    compaction that holds it, the major, the files that replaced purged ones): a damaged
    one keeps what it stands for, and the command lists it with its fix and exits 1. It
    never deletes a file a live entry references nor a folder that holds files one misses
    (a renamed revision folder), and while verify reports an error it deletes no orphan
    folder: it lists the errors and exits 1.
    """
    if retain < MIN_RETAIN and not force and not dry_run:
        raise InputError(
            f"--retain {duration(retain)} is below the floor of "
            f"{duration(MIN_RETAIN)}: reads and jobs that run longer lose "
            "their files. Add --force once none runs (see it first with --dry-run)"
        )
    from ..core.maintain.vacuum import Vacuum, consumer_positions

    revision_log = open_log(root, endpoint_url)
    root = revision_log.storage.uri
    logs = [open_log(c, endpoint_url).records for c in consumers]
    positions = consumer_positions(revision_log.view().tables(), root, logs)
    with working("vacuuming", as_json), engine_command():  # a dry run needs no extra
        report = Vacuum(revision_log.storage, revision_log).run(
            retain=retain,
            grace=grace,
            keep_majors=keep_majors,
            dry_run=dry_run,
            consumer_positions=positions,
            now=now_utc(),
        )
    out = Output(as_json)
    if as_json:
        out.json(jsonable(vacuum_row(report)))
    else:
        vacuum_text(out, root, report, retain, force)
    if report.findings:
        click.get_current_context().exit(EXIT_FINDINGS)


def vacuum_text(
    out: Output, root: str, report: VacuumReport, retain: timedelta, force: bool
) -> None:
    """What a vacuum removed (or would), and what it kept because of damage, for people."""
    dry_run = report.dry_run
    verb = "would remove" if dry_run else "removed"
    out.note(
        f"{root}: {verb} {report.files} files ({human_bytes(report.bytes)}): "
        f"{len(report.revisions)} revisions, {len(report.purged_files)} purged files, "
        f"{len(report.orphans)} orphan folders, {len(report.temporary_files)} temporary files"
    )
    out.note(f"retention horizon: {report.horizon.describe()}")
    if report.entry is not None:
        out.note(f"vacuum entry {report.entry.name} committed as sequence {report.entry.sequence}")
    for label, names in (
        ("revisions", report.revisions),
        ("purged files", report.purged_files),
        ("orphan folders", report.orphans),
        ("temporary files", report.temporary_files),
    ):
        if names:
            out.note(f"{label}: {', '.join(names)}")
    if report.paths:
        out.note(f"files {verb} (a folder: all its files):")
        for path, files in removed_paths(report):
            out.note(f"  {path}" + (f" ({files} files)" if path.endswith("/") else ""))
    if dry_run and retain < MIN_RETAIN and not force:
        out.note(f"a vacuum with this --retain needs --force (the floor is {duration(MIN_RETAIN)})")
    would = "would keep" if dry_run else "kept"
    if report.kept:
        out.note(
            f"{would} the files of {len(report.kept)} entries a damaged file stands for: "
            f"{', '.join(report.kept)}"
        )
    if report.kept_files:
        out.note(
            f"{would} {len(report.kept_files)} files purges swapped out, whose replacements "
            f"are damaged: {', '.join(report.kept_files)}"
        )
    if report.orphans_kept:
        errors = sorted({f.kind for f in report.findings if f.severity == "error"})
        out.note(
            f"{would} {len(report.orphans_kept)} orphan folders ({', '.join(report.orphans_kept)})"
            f": vacuum deletes none while verify reports errors ({', '.join(errors)}), as one "
            "may hold what they miss; repair them first"
        )
    if report.findings:
        finding_rows(out, report.findings)


def removed_paths(report: VacuumReport) -> list[tuple[str, int]]:
    """What a vacuum removes, compactly: each folder removed whole (``name/``) with its
    file count, then every other file."""
    folders = set(report.folders)
    counts: dict[str, int] = {}
    loose = []
    for path in report.paths:
        folder = path.split("/", 1)[0]
        if folder in folders:
            counts[folder] = counts.get(folder, 0) + 1
        else:
            loose.append(path)
    return [(f"{f}/", n) for f, n in sorted(counts.items())] + [(p, 1) for p in loose]


def vacuum_row(report: VacuumReport) -> dict[str, Any]:
    return {
        "dry_run": report.dry_run,
        "horizon_sequence": report.horizon.sequence,
        "horizon_timestamp": report.horizon.timestamp,
        "revisions": list(report.revisions),
        "purged_files": list(report.purged_files),
        "orphans": list(report.orphans),
        "temporary_files": list(report.temporary_files),
        "folders": list(report.folders),
        "files": report.files,
        "bytes": report.bytes,
        "paths": list(report.paths),
        "entry": None if report.entry is None else report.entry.name,
        "entry_sequence": None if report.entry is None else report.entry.sequence,
        "kept": list(report.kept),
        "kept_files": list(report.kept_files),
        "orphans_kept": list(report.orphans_kept),
        "findings": [finding_row(f) for f in report.findings],
    }


# -- purge --------------------------------------------------------------------------------------


@click.command("purge")
@click.argument("roots_and_table", nargs=-1, required=True, metavar="ROOT [ROOT ...] TABLE")
@click.option(
    "--id",
    "id_pairs",
    multiple=True,
    required=True,
    help="An id column and value: --id col=value (repeat per column, then per entity).",
)
@click.option("--reason", required=True, help="Why (kept in the log's audit record).")
@click.option("--dry-run", is_flag=True, help="Count what would go; write and commit nothing.")
@json_option
@common_options
def purge_command(
    roots_and_table: tuple[str, ...],
    id_pairs: tuple[str, ...],
    reason: str,
    dry_run: bool,
    as_json: bool,
    endpoint_url: str | None,
) -> None:
    """Erase entities of TABLE from every revision of each ROOT (one purge entry per root).

    ROOT#T purges table T of that root instead (derived datasets name their tables
    differently). The files holding them are rewritten without their rows; afterwards no
    read returns them. The old files go with the next vacuum whose retention includes the
    purge (at the latest `revisions vacuum ROOT --retain 0`). Every root is checked before
    any is purged.
    """
    if len(roots_and_table) < 2:
        raise click.UsageError("expected ROOT [ROOT ...] TABLE")
    *targets, default_table = roots_and_table
    if not reason.strip():
        raise InputError("--reason must not be empty")
    opened = []
    for target in targets:  # every root, table and id checked before anything is written
        root, table = split_target(target, default_table)
        ds = open_dataset(root, endpoint_url)
        tables = ds.tables()
        if table not in tables:
            ds.revisions(table)  # UnknownTableError naming the table and the known ones
        opened.append((root, table, entities(id_pairs, tables[table])))
    out = Output(as_json)
    rows = []
    for root, table, (schema, values) in opened:
        ds = open_dataset(root, endpoint_url) if dry_run else open_writable(root, endpoint_url)
        spark = start_spark(ds, endpoint_url)
        with working(f"purging {root}", as_json):
            record = ds.maintenance.purge(
                table, spark.createDataFrame(values, schema), reason=reason, dry_run=dry_run
            )
        swaps = record.purge.swaps.get(table, ()) if record and record.purge else ()
        rows.append(
            {
                "root": ds.root,
                "table": table,
                "dry_run": dry_run,
                "committed": record is not None and not dry_run,
                "sequence": None if dry_run or record is None else record.sequence,
                "name": None if dry_run or record is None else record.name,
                "entities": len(set(values)),
                "rows_removed": sum(s.rows_removed for s in swaps),
                "entries_rewritten": len(swaps),
                "rows_removed_by_sequence": {s.sequence: s.rows_removed for s in swaps},
            }
        )
    if as_json:
        out.rows(rows)
        return
    for row, (root, *_) in zip(rows, opened, strict=True):
        row["given"] = root  # the root as typed (the JSON has it resolved)
    out.rows(
        rows,
        columns=["given", "table", "sequence", "entities", "rows_removed", "entries_rewritten"],
        headers={
            "given": "root",
            "rows_removed": "rows removed",
            "entries_rewritten": "entries rewritten",
        },
    )
    untouched = [r["given"] for r in rows if not r["rows_removed"]]
    if untouched:
        verb = "would be committed" if dry_run else "committed"
        out.note(
            f"nothing to purge in {', '.join(untouched)}: no revision holds these ids; "
            f"nothing {verb} there"
        )
    if dry_run:
        out.note("dry run: nothing was written or committed")
    elif len(untouched) < len(rows):
        out.note("the old files are deleted by the next vacuum whose retention includes the purge")


def split_target(target: str, default_table: str) -> tuple[str, str]:
    """``ROOT`` or ``ROOT#TABLE`` (the form of upstream positions) -> (root, table)."""
    root, sep, table = target.rpartition("#")
    if sep and root and table and "/" not in table:
        return root, table
    return target, default_table


def entities(pairs: Sequence[str], info: TableInfo) -> tuple[StructType, list[tuple]]:
    """``--id`` pairs as entities (``parse_entities``): each must give every id column, so
    with one id column every --id is an entity, with (a, b) pairs go a=…, b=…, a=…, b=…"""
    from pyspark.sql.types import StructType

    schema = StructType([info.schema[c] for c in info.id_columns])
    types = {c: info.schema[c].dataType.jsonValue() for c in info.id_columns}
    values: list[tuple] = []
    for entity in parse_entities(pairs, info.name, info.id_columns, types):
        missing = [c for c in info.id_columns if c not in entity]
        if missing:
            raise InputError(
                f"--id: the entity {shown_entities([entity])} lacks the id column(s) "
                f"{', '.join(missing)}: give every id column of each entity"
            )
        values.append(tuple(entity[c] for c in info.id_columns))
    return schema, values


COMMANDS = (verify_command, compact_command, vacuum_command, purge_command)
