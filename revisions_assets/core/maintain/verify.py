"""What is wrong with a dataset's storage, for an operator: ``verify`` only reads.

Each ``Finding`` names its kind, how serious it is, the path (relative to the root), what
is wrong and how to fix it. ``error``: reads or commits fail or are refused until it is
repaired; ``warning``: harmless to reads and commits (leftovers that vacuum reclaims, a
stale derived file that the next commit rewrites).

Unlike opening a dataset, which stops at the first damage, ``verify`` reads every log
entry and lists every file, so it is meant for operators (``revisions verify``), not
for each run. It works on a dataset that cannot be opened.

``deep_findings`` (``verify --deep``) also reads the data, with Spark: per table, one
job over all its live data revisions (one scan: ``execute/spark_scan.revision_rows``)
counts per revision the rows, tombstones, null ids and duplicated ids, and compares the
counts with the log.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import (
    CorruptLogError,
    DatasetNotFoundError,
    NoMajorRevisionError,
    PathEscapeError,
    RetentionError,
    StorageError,
)
from ..log.health import lost_log_evidence, parse_entry
from ..log.layout import (
    DESCRIPTION,
    LAST_CHECKPOINT,
    LOG_DIR,
    checkpoint_path,
    entry_path,
    entry_sequence,
    holds_log,
    is_temp_name,
)
from ..log.records import Revision
from ..log.view import LogView
from ..read.execute.files import PARQUET_MAGIC, not_parquet
from ..read.plan.scans import ScanTask, head_plan, plan_merge, scan_task
from ..read.plan.schema import Schema, table_schema
from ..read.plan.selection import carried_by, head_state
from ..storage.backends import open_storage
from ..storage.base import Storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Severity = Literal["error", "warning"]

#: every kind of finding, its severity and how an operator fixes it (the docs' recovery
#: guide repeats these)
KINDS: dict[str, tuple[Severity, str]] = {
    "log_gap": (
        "error",
        "restore the missing entry from a backup (entries are immutable files); if it is lost "
        "for good, move the entries after the gap out of _log/ (their revisions are dropped "
        "and their folders become orphans), so that the log ends before the gap",
    ),
    "log_entry_corrupt": (
        "error",
        "restore the entry from a backup; a stray file that is not an entry can be deleted; "
        "if the last entry is damaged beyond repair, move it out of _log/ (its revision is "
        "dropped)",
    ),
    "log_missing": (
        "error",
        "restore _log/ from a backup; if no revision was ever committed here, delete the "
        "revision folders and description.parquet",
    ),
    "missing_file": (
        "error",
        "restore the file from a backup; otherwise reads that include its revision raise "
        "MissingFileError: commit a new major of the table so that default reads no longer "
        "need it",
    ),
    "corrupt_file": (
        "error",
        "the file was replaced or truncated outside revisions-assets: restore it from a "
        "backup; otherwise reads that include its revision raise CorruptFileError: commit a "
        "new major of the table so that default reads no longer need it",
    ),
    "path_escape": (
        "error",
        "replace the symbolic link by the real folder or file inside the root, or remove it: "
        "revisions-assets never follows links out of a dataset",
    ),
    "description_stale": (
        "warning",
        "harmless (the engine never reads description.parquet): the next commit, or the next "
        "open with write access, rewrites it",
    ),
    "checkpoint_unreadable": (
        "warning",
        "harmless but opens read more entries: delete the damaged checkpoint and "
        "_log/_last_checkpoint; a later commit writes a new checkpoint",
    ),
    "orphan_folder": (
        "warning",
        "a writer failed or was killed before its commit (or is committing right now): nothing "
        "reads it; vacuum reclaims it after its grace period, or delete it once no writer runs",
    ),
    "null_id": (
        "error",
        "the revision holds rows with a null id, which no read can merge: commit a new major "
        "of the table without them (or purge the entity) and vacuum the old revisions",
    ),
    "duplicate_id": (
        "error",
        "the revision holds an id twice, so reads return an arbitrary one of its rows: "
        "commit a new major of the table with one row per id and vacuum the old revisions",
    ),
    "row_count_mismatch": (
        "error",
        "the revision's files hold another number of rows (or tombstones) than its log entry "
        "records: a file was replaced or truncated outside revisions-assets; restore it from "
        "a backup, or commit a new major of the table and vacuum the old revisions",
    ),
    "temp_file": (
        "warning",
        "a writer failed or died between writing a temporary file and renaming it: nothing "
        "reads it; vacuum reclaims it, or delete it",
    ),
    "nested_dataset": (
        "warning",
        "a dataset of its own (it has a _log/) lies inside this dataset's root: nothing of "
        "this dataset reads or removes it; move it out of the root",
    ),
    "state_removed": (
        "error",
        "the rows of those revisions are gone: recompute the table and commit it as a "
        "complete major (a skip_unchanged major is written complete here; carry=True is "
        "refused), so that default reads no longer need them",
    ),
    "carried_state_incomplete": (
        "error",
        "the entities only the missing revisions hold are absent from every read of the "
        "major's state: recompute the table and commit it as a complete major (not "
        "carry=True), then check what consumers read from it",
    ),
    "compaction_partial": (
        "warning",
        "harmless: reads use it for what it holds and read the carried revisions from their "
        "own files; compact the table to write a complete compaction, and a vacuum past "
        "the retention horizon removes this one",
    ),
    "purge_lost_rows": (
        "error",
        "reads after the purge lack rows of entities it was not asked to remove, or differ "
        "from the rows before it: do not vacuum (the files the purge swapped out still hold "
        "the state before it); report it, then commit the state before the purge, without "
        "the purged entities, as a complete major",
    ),
}


@dataclass(frozen=True)
class Finding:
    """One problem of a dataset's storage."""

    kind: str  # a key of KINDS
    severity: Severity
    path: str  # relative to the dataset root; "" for the root itself
    message: str
    fix: str

    @classmethod
    def of(cls, kind: str, path: str, message: str, severity: Severity | None = None) -> Finding:
        default, fix = KINDS[kind]
        return cls(kind, severity or default, path, message, fix)


def verify(root: str | os.PathLike[str] | Storage, **storage_options: object) -> list[Finding]:
    """The findings for the dataset at ``root`` (errors first), without opening it: works
    on a dataset whose log is too damaged to open. Only reads."""
    return verify_storage(open_storage(root, **storage_options))


def verify_storage(storage: Storage) -> list[Finding]:
    """The findings of ``verify``; DatasetNotFoundError for a root that holds no dataset
    (no ``_log/`` and no sign of a lost one): its folders are no leftovers."""
    top = [n.rstrip("/") for n in storage.list_names("")]
    if LOG_DIR not in top and not lost_log_evidence(storage):
        raise DatasetNotFoundError(f"{storage.uri} is not a revisioned dataset (no {LOG_DIR}/)")
    findings: list[Finding] = []
    records, head = _check_log(storage, findings)
    removed: set[int] = set()
    try:  # what entries reference now (purges swapped some files), and what vacuum removed
        view = LogView(records)
        records, removed = list(view.records), set(view.removed)
        _check_states(view, findings)
    except CorruptLogError as exc:
        findings.append(Finding.of("log_entry_corrupt", LOG_DIR, str(exc)))
    files = storage.list_files("")
    findings += file_findings(storage, records, removed, {f.path for f in files})
    _check_description(storage, head, findings)
    _check_leftovers(storage, records, [f.path for f in files], findings)
    order = {"error": 0, "warning": 1}
    return sorted(findings, key=lambda f: (order[f.severity], f.path, f.kind))


def _checkpoint_sequence(storage: Storage, findings: list[Finding]) -> int:
    """The sequence covered by the newest checkpoint, 0 when none is usable."""
    try:
        hint = storage.read(LAST_CHECKPOINT)
        if hint is None:
            return 0
        sequence = int(json.loads(hint)["sequence"])
        raw = storage.read(checkpoint_path(sequence))
        if raw is None:
            raise ValueError(f"{checkpoint_path(sequence)} is missing")
        rows = pq.read_metadata(io.BytesIO(raw)).num_rows
        if rows != sequence:
            raise ValueError(f"{checkpoint_path(sequence)} holds {rows} entries, not {sequence}")
        return sequence
    except (ValueError, KeyError, TypeError, pa.ArrowException, StorageError) as exc:
        findings.append(
            Finding.of(
                "checkpoint_unreadable",
                LAST_CHECKPOINT,
                f"the newest checkpoint cannot be used: {exc}; opens probe every entry instead",
            )
        )
        return 0


def _check_log(storage: Storage, findings: list[Finding]) -> tuple[list[Revision], int]:
    """Every entry parsed; gaps and bad entries reported. Returns the readable records and
    the head an open reaches (the end of the gap-free, readable prefix)."""
    checkpoint = _checkpoint_sequence(storage, findings)
    sequences = []
    for name in storage.list_names(LOG_DIR):
        sequence = entry_sequence(name.rstrip("/"))
        if sequence is None:
            continue
        sequences.append(sequence)
    records: list[Revision] = []
    bad: set[int] = set()
    for sequence in sorted(sequences):
        path = entry_path(sequence)
        try:
            raw = storage.read(path)
            if raw is None:
                raise StorageError(f"{path} is listed but cannot be read as a file")
            records.append(parse_entry(raw, sequence, storage.uri))
        except PathEscapeError as exc:
            bad.add(sequence)
            findings.append(Finding.of("path_escape", path, str(exc)))
        except (CorruptLogError, StorageError) as exc:
            bad.add(sequence)
            findings.append(Finding.of("log_entry_corrupt", path, str(exc)))
    previous = 0
    for sequence in sorted(sequences):
        if sequence > previous + 1:
            first, last = previous + 1, sequence - 1
            covered = last <= checkpoint
            missing = entry_path(first) if first == last else f"{entry_path(first)} … {last}"
            findings.append(
                Finding.of(
                    "log_gap",
                    entry_path(first),
                    f"log entries {missing} are missing while {entry_path(sequence)} exists"
                    + (
                        f" (covered by checkpoint {checkpoint}: opens are not affected)"
                        if covered
                        else ""
                    ),
                    severity="warning" if covered else None,
                )
            )
        previous = sequence
    lost = None if sequences else lost_log_evidence(storage)
    if lost:
        findings.append(Finding.of("log_missing", LOG_DIR, lost))
    present = set(sequences) - bad
    head = checkpoint
    while head + 1 in present:
        head += 1
    return records, head


def file_findings(
    storage: Storage,
    records: Sequence[Revision],
    removed: Collection[int],
    listed: Collection[str],
) -> list[Finding]:
    """Every file a not-removed entry references is inside the root, present and ends as a
    Parquet file does (each distinct path checked once). ``listed``: the files a listing
    found (others are looked up one by one)."""
    findings: list[Finding] = []
    checked: set[str] = set()
    for record in records:
        if record.sequence in removed:  # a vacuum removed their files on purpose
            continue
        for table, write in record.tables.items():
            for path in write.files:
                if path in checked:
                    continue
                checked.add(path)
                try:
                    storage.check_inside(path)
                    if path in listed or storage.exists(path):
                        tail = storage.read_tail(path, len(PARQUET_MAGIC))
                        if tail is not None and tail != PARQUET_MAGIC:
                            message = not_parquet(record.name, table, path)
                            findings.append(Finding.of("corrupt_file", path, message))
                        continue
                except PathEscapeError as exc:
                    findings.append(Finding.of("path_escape", path, str(exc)))
                    continue
                findings.append(
                    Finding.of(
                        "missing_file",
                        path,
                        f"data file {path} of revision {record.name!r} (sequence "
                        f"{record.sequence}), table {table!r}, is missing",
                    )
                )
    return findings


def _check_states(view: LogView, findings: list[Finding]) -> None:
    """What a purge of an earlier release left behind. It dropped what a carrying major
    carries from the log view until reads applied purges field by field
    (``TableWrite.with_purged_fields``); meanwhile a vacuum may have removed the carried
    revisions, a compaction may have been built without them and a later carrying major
    may have carried the state without them."""
    for table in view.tables():
        history = view.table_revisions(table)
        for major in history:
            carried = carried_by(major, table)
            for sequence in sorted(carried):
                inner = view.records[sequence - 1]
                missing = sorted(carried_by(inner, table) - carried)
                if missing:
                    findings.append(
                        Finding.of(
                            "carried_state_incomplete",
                            major.name,
                            f"major {major.name!r} (sequence {major.sequence}) of table "
                            f"{table!r} carries major {inner.name!r} (sequence "
                            f"{inner.sequence}) but not the revisions that major carries "
                            f"(sequences {missing}): it was committed while a purge hid them",
                        )
                    )
        for compaction in view.compactions(table):
            if compaction.partial and not view.is_removed(compaction.sequence):
                major = view.records[compaction.covers.major - 1]
                findings.append(
                    Finding.of(
                        "compaction_partial",
                        compaction.record.name,
                        f"compaction {compaction.record.name!r} (sequence "
                        f"{compaction.sequence}) of table {table!r} was built while a purge "
                        f"hid the revisions major {major.name!r} carries: it holds the "
                        "state from that major on only",
                    )
                )
        try:
            state = head_state(view, table)
            plan_merge(view, state, f"the default read of table {table!r}")
        except NoMajorRevisionError:
            continue
        except RetentionError as exc:
            findings.append(Finding.of("state_removed", state.major.name, str(exc)))


def _check_description(storage: Storage, head: int, findings: list[Finding]) -> None:
    raw = storage.read(DESCRIPTION)
    if raw is None:
        problem = f"is missing while the log has {head} revisions" if head else None
    else:
        try:
            rows = pq.read_metadata(io.BytesIO(raw)).num_rows
            problem = None if rows == head else f"lists {rows} revisions, the log has {head}"
        except (pa.ArrowException, ValueError, OSError) as exc:
            problem = f"is not readable Parquet ({exc})"
    if problem:
        findings.append(Finding.of("description_stale", DESCRIPTION, f"{DESCRIPTION} {problem}"))


def _check_leftovers(
    storage: Storage, records: list[Revision], paths: Iterable[str], findings: list[Finding]
) -> None:
    used = {r.name for r in records}
    used |= {f.split("/", 1)[0] for r in records for w in r.tables.values() for f in w.files}
    paths = list(paths)
    for path in paths:
        if is_temp_name(path.rsplit("/", 1)[-1]):
            findings.append(
                Finding.of("temp_file", path, f"{path} is a temporary file left by a writer")
            )
    for name in storage.list_names(""):
        folder = name.rstrip("/")
        try:
            storage.check_inside(folder)
        except PathEscapeError as exc:
            findings.append(Finding.of("path_escape", folder, str(exc)))
            continue
        if name.endswith("/") and folder[0] not in "_." and folder not in used:
            if holds_log(folder, paths):
                message = f"folder {folder!r} holds a dataset of its own"
                findings.append(Finding.of("nested_dataset", folder, message))
                continue
            findings.append(
                Finding.of(
                    "orphan_folder",
                    folder,
                    f"folder {folder!r} belongs to no committed revision",
                )
            )


@dataclass(frozen=True)
class RevisionCounts:
    """What the files one revision wrote to a table hold (``revision_counts``)."""

    task: ScanTask
    rows: int
    tombstones: int
    null_ids: int
    duplicates: int  #: ids that occur more than once


def revision_counts(
    spark: SparkSession,
    storage: Storage,
    schema: Schema,
    ids: Sequence[str],
    tasks: Sequence[ScanTask],
) -> list[RevisionCounts]:
    """Rows, tombstones, null ids and repeated ids per task (``order`` = its index): one
    Spark job over the files of every task; only the counts reach the driver."""
    from pyspark.sql import functions as F

    from ..columns import DELETED
    from ..read.execute.spark_scan import ORDER, revision_rows

    rows = revision_rows(spark, storage, schema, tasks)
    per_id = rows.groupBy(ORDER, *ids).agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.col(DELETED).cast("long")).alias("tombstones"),
    )
    null_id = (
        F.greatest(*[F.col(c).isNull() for c in ids]) if len(ids) > 1 else F.col(ids[0]).isNull()
    )
    counts = {
        row[ORDER]: row
        for row in per_id.groupBy(ORDER)
        .agg(
            F.sum("n").alias("rows"),
            F.sum("tombstones").alias("tombstones"),
            F.sum(F.when(null_id, F.col("n")).otherwise(0)).alias("null_ids"),
            F.sum(F.when(~null_id & (F.col("n") > 1), 1).otherwise(0)).alias("duplicates"),
        )
        .collect()  # one row per revision
    }
    found = []
    for task in tasks:
        row = counts.get(task.order)
        values = (
            (row["rows"], row["tombstones"], row["null_ids"], row["duplicates"])
            if row
            else (0, 0, 0, 0)
        )
        found.append(RevisionCounts(task, *values))
    return found


def deep_findings(spark: SparkSession, storage: Storage, view: LogView) -> list[Finding]:
    """Null and duplicated ids, and row counts against the log, per live data revision:
    one Spark job per table over all its revisions not removed by a vacuum
    (``table_counts``); then what each purge removed from reads (``purge_findings``)."""
    findings = purge_findings(spark, storage, view)
    for table in view.tables():
        revisions = [r for r in view.table_revisions(table) if not view.is_removed(r.sequence)]
        if revisions:
            findings += count_findings(table, table_counts(spark, storage, table, revisions))
    return findings


def table_counts(
    spark: SparkSession, storage: Storage, table: str, revisions: Sequence[Revision]
) -> list[tuple[Revision, RevisionCounts]]:
    """What the files ``revisions`` wrote to ``table`` hold (``revision_counts``), each with
    its revision: one Spark job. Also what the Dagster layer's id checks count."""
    ids = list(revisions[-1].tables[table].id_columns)
    tasks = [scan_task(r, table, n) for n, r in enumerate(revisions)]
    counts = revision_counts(spark, storage, table_schema(revisions, table), ids, tasks)
    return list(zip(revisions, counts, strict=True))


def count_findings(table: str, counts: Sequence[tuple[Revision, RevisionCounts]]) -> list[Finding]:
    """The findings of ``table_counts``: row counts other than the log's, null ids, ids
    repeated within one revision."""
    findings = []
    for revision, found in counts:
        write = revision.tables[table]
        where = f"revision {revision.name!r} (sequence {revision.sequence}), table {table!r}"
        path = revision.name
        if (found.rows, found.tombstones) != (write.rows, write.tombstones):
            findings.append(
                Finding.of(
                    "row_count_mismatch",
                    path,
                    f"{where}: its files hold {found.rows} rows ({found.tombstones} "
                    f"tombstones), the log records {write.rows} ({write.tombstones})",
                )
            )
        if found.null_ids:
            findings.append(
                Finding.of("null_id", path, f"{where}: {found.null_ids} rows with a null id")
            )
        if found.duplicates:
            findings.append(
                Finding.of(
                    "duplicate_id", path, f"{where}: {found.duplicates} ids occur more than once"
                )
            )
    return findings


def merged_revisions(view: LogView, table: str) -> tuple[list[Revision], Revision | None]:
    """The revisions a default read of ``table`` reads from their own files, and the
    compaction it reads the rest from (None: it reads its major's files); a compaction's ids
    are unique by construction. NoMajorRevisionError before the first major."""
    plan = head_plan(view, table)
    by_sequence = {r.sequence: r for r in view.records}
    direct = [by_sequence[t.sequence] for t in plan.tasks if not t.is_compaction]
    return direct, plan.compaction.record if plan.compaction is not None else None


def purge_findings(spark: SparkSession, storage: Storage, view: LogView) -> list[Finding]:
    """Per purge entry and table, while the files it swapped out are still there: the
    table's state at the entry must be its state just before it, without at most as many
    entities as the purge was asked for and with every other row unchanged (same values,
    written by the same revision). The log holds no purged id (an audit without values),
    so the check counts, in one Spark job per entry: the rows of each state, and the rows
    at the entry that are no row before it."""
    from pyspark.sql import functions as F

    from ..columns import SOURCE_SEQUENCE
    from ..hashing import row_hash
    from ..read.execute.frames import Rows
    from ..read.execute.spark import SparkExecutor
    from ..read.execute.spark_scan import spark_schema
    from ..read.plan.schema import value_columns

    present = {f.path for f in storage.list_files("")}
    executor = SparkExecutor(storage, lambda: spark, "auto")
    findings = []
    for record in view.records:
        if record.purge is None:
            continue
        for table in record.purge.swaps:
            what = f"the read of table {table!r} around purge {record.name!r}"
            try:
                plans = [
                    plan_merge(v, head_state(v, table), what)
                    for v in (view.before(record.sequence), view.before(record.sequence + 1))
                ]
            except (NoMajorRevisionError, RetentionError):
                continue  # no state to compare, or a vacuum removed part of one
            if any(f not in present for plan in plans for _, f in plan.files):
                continue  # a vacuum deleted the files the purge swapped out
            keyed = []
            for side, plan in enumerate(plans):
                schema = spark_schema(plan.schema)
                ids = list(plan.id_columns)
                rows = executor.merge(plan, Rows(with_sequence=True))
                keyed.append(
                    rows.select(
                        *ids,
                        row_hash(schema, value_columns(schema, ids)).alias("__hash"),
                        SOURCE_SEQUENCE,
                        F.lit(side).alias("__side"),
                    )
                )
            per_row = (
                keyed[0]
                .unionByName(keyed[1])
                .groupBy(*[c for c in keyed[0].columns if c != "__side"])
                .agg(F.min("__side").alias("__first"), F.max("__side").alias("__last"))
            )
            counts = per_row.agg(
                F.sum((F.col("__first") == 0).cast("long")).alias("before"),
                F.sum((F.col("__last") == 1).cast("long")).alias("after"),
                F.sum((F.col("__first") == 1).cast("long")).alias("new"),
            ).first()  # one row of three counts
            before, after, new = (int(counts[c] or 0) for c in ("before", "after", "new"))
            lost = before - (after - new)
            if new or lost > record.purge.entities:
                findings.append(
                    Finding.of(
                        "purge_lost_rows",
                        record.name,
                        f"purge {record.name!r} (sequence {record.sequence}) of table "
                        f"{table!r} was asked for {record.purge.entities} entities, but "
                        f"{lost} rows of the state before it are missing after it and "
                        f"{new} rows after it differ from every row before it",
                    )
                )
    return findings
