"""What is wrong with a dataset's storage, for an operator: ``verify`` only reads.

Each ``Finding`` names its kind, how serious it is, the path (relative to the root), what
is wrong and how to fix it (every kind is in ``findings.KINDS``). ``error``: reads or
commits fail or are refused until it is repaired; ``warning``: harmless to reads and
commits (leftovers that vacuum reclaims, a stale derived file that the next commit
rewrites).

Unlike opening a dataset, which stops at the first damage, ``verify`` reads every log
entry (checking the chain of digests over all of them, and each against its checkpoint's
copy), lists every file and reads the footer of every referenced file (``integrity``),
so it is meant for operators (``revisions verify``), not for each run. A file whose entry
recorded its stats must be the file its commit recorded (its size, its footer's rows and
digest: the file gate's comparison), so a file rewritten with the same rows but other
values is a finding of its own. It works on a
dataset that cannot be opened. Its advice never contradicts itself: while an entry is
missing or damaged, a folder it may reference is that entry's, never an orphan to delete;
``description.parquet`` listing entries past the log's end is a lost head, not staleness.

``deep_findings`` (``verify --deep``) also reads the data, with Spark:
per table, one job over all its live data revisions (one scan:
``execute/spark_scan.revision_rows``) counts per revision the rows, tombstones, null ids
and duplicated ids, and compares the counts with the log; one more recomputes every row
hash of its live revisions and compactions (``hash_findings``). It runs only when the
other checks found no error (``deep_skipped`` says so otherwise).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import (
    CorruptLogError,
    NoMajorRevisionError,
    PathEscapeError,
    RetentionError,
    RevisionsError,
    StorageError,
)
from ..log.consumers import follows, recorded_positions, upstream_roots
from ..log.health import MAX_ENTRY_BYTES, lost_log_evidence, parse_entry
from ..log.layout import (
    DESCRIPTION,
    LAST_CHECKPOINT,
    LOG_DIR,
    entry_path,
    entry_sequence,
    holds_log,
    is_temp_name,
    not_a_dataset,
)
from ..log.records import COMPACTION, MAJOR, MINOR, Revision, load_json, stored_dataset
from ..log.revision_log import (
    LOST_HEAD_LIMIT,
    CheckpointError,
    RevisionLog,
    description_overlong,
    entry_digest,
    read_checkpoint,
    read_description,
)
from ..log.view import Compaction, LogView
from ..read.plan.requests import LogSnapshot, plan_state
from ..read.plan.scans import ScanTask, scan_task
from ..read.plan.schema import Schema, table_schema
from ..read.plan.selection import carried_by, head_state
from ..read.scan import DatasetSnapshot
from ..storage.backends import open_storage
from ..storage.base import Storage, check_data_file, pattern_characters
from ..storage.footer import StoredFile
from .findings import KINDS, Finding
from .integrity import as_replaced, rebuilt, write_findings
from .misplaced import find_misplaced

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..read.execute.spark import SparkExecutor


def verify(root: str | os.PathLike[str] | Storage, **storage_options: object) -> list[Finding]:
    """The findings for the dataset at ``root`` (errors first), without opening it: works
    on a dataset whose log is too damaged to open. Only reads. ``storage_options`` also
    open the upstreams whose positions the dataset records (``upstream_head_lost``)."""
    return verify_storage(open_storage(root, **storage_options), storage_options)


def verify_storage(
    storage: Storage,
    upstream_options: Mapping[str, object] | None = None,
    *,
    upstreams: bool = True,
    checked: MutableMapping[str, StoredFile] | None = None,
) -> list[Finding]:
    """The findings of ``verify``; DatasetNotFoundError for a root that holds no dataset
    (no ``_log/`` and no sign of a lost one): its folders are no leftovers. ``upstreams``:
    also open the upstreams (``upstream_head_lost``); ``checked``: footers already read."""
    top = [n.rstrip("/") for n in storage.list_names("")]
    if LOG_DIR not in top and not lost_log_evidence(storage):
        raise not_a_dataset(storage)
    findings: list[Finding] = []
    scan = _check_log(storage, findings)
    prefix = [r for r in scan.records if r.sequence <= scan.head]
    later = [r for r in scan.records if r.sequence > scan.head]  # past a gap or a bad entry
    records = list(prefix)
    removed = {s for r in later if r.vacuum is not None for s in r.vacuum.removed}
    try:  # what entries reference now (purges swapped some files), and what vacuum removed
        view = LogView(prefix)
        records, removed = list(view.records), removed | set(view.removed)
        _check_states(DatasetSnapshot(storage.uri, view), findings)
    except CorruptLogError as exc:
        findings.append(Finding.of("log_entry_corrupt", LOG_DIR, str(exc)))
    records += later
    files = storage.list_files("")
    checked = {} if checked is None else checked
    findings += file_findings(storage, records, removed, checked)
    recorded = {f for r in scan.records for w in r.tables.values() for f in w.files}
    misplaced = find_misplaced(storage, records, removed, files, checked, known=recorded)
    listed = {f.path for f in files}
    findings += [m.finding(storage, listed) for m in misplaced]
    held = {m.folder for m in misplaced}  # never an orphan to delete
    described = _check_description(storage, scan, findings)
    _check_leftovers(storage, records, [f.path for f in files], scan, described, findings, held)
    if upstreams:
        _check_upstreams(storage.uri, records, upstream_options or {}, findings)
    order = {"error": 0, "warning": 1}
    return sorted(findings, key=lambda f: (order[f.severity], f.path, f.kind))


@dataclass(frozen=True)
class _LogScan:
    """What ``_check_log`` read: every readable entry (those a checkpoint holds included),
    the head an open reaches, and the sequences whose entry is missing or unreadable
    (``damaged``, ``last``: the newest entry file listed)."""

    records: list[Revision]
    head: int
    damaged: frozenset[int]
    last: int
    #: the folders of the files with a pattern character that damaged entries name: theirs,
    #: never orphans to delete
    named: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _Checkpoint:
    """The newest usable checkpoint: its records by sequence and its last entry's digest."""

    records: dict[int, Revision]
    last_digest: str | None = None


def _checkpoint(storage: Storage, findings: list[Finding]) -> _Checkpoint:
    """The entries of the newest checkpoint, none when it is not usable (an error when its
    records fail the checks of entries, a warning when it is only damaged or too large)."""
    try:
        sequence, records, digest = read_checkpoint(storage, storage.uri)
    except CheckpointError as exc:
        kind = "checkpoint_invalid" if exc.invalid else "checkpoint_unreadable"
        message = f"the newest checkpoint cannot be used: {exc}; opens probe every entry instead"
        findings.append(Finding.of(kind, LAST_CHECKPOINT, message))
        return _Checkpoint({})
    except StorageError as exc:
        message = f"the newest checkpoint cannot be read: {exc}; opens probe every entry instead"
        findings.append(Finding.of("checkpoint_unreadable", LAST_CHECKPOINT, message))
        return _Checkpoint({})
    return _Checkpoint({r.sequence: r for r in records}, digest if sequence else None)


def _check_log(storage: Storage, findings: list[Finding]) -> _LogScan:
    """Every entry parsed; gaps, bad entries, breaks of the chain of digests and entries
    that differ from their checkpoint's copy reported."""
    checkpoint = _checkpoint(storage, findings)
    checkpointed = checkpoint.records
    covered = len(checkpointed)
    sequences = []
    for name in storage.list_names(LOG_DIR):
        sequence = entry_sequence(name.rstrip("/"))
        if sequence is None:
            continue
        sequences.append(sequence)
    named: set[str] = set()
    parsed: dict[int, Revision] = {}
    digests: dict[int, str] = {}
    bad: set[int] = set()
    for sequence in sorted(sequences):
        path = entry_path(sequence)
        raw = None
        try:
            raw = storage.read(path, MAX_ENTRY_BYTES)
            if raw is None:
                raise StorageError(f"{path} is listed but cannot be read as a file")
            digests[sequence] = entry_digest(raw)
            parsed[sequence] = parse_entry(raw, sequence, storage.uri)
        except PathEscapeError as exc:
            bad.add(sequence)
            findings.append(Finding.of("path_escape", path, str(exc)))
        except (CorruptLogError, StorageError) as exc:
            bad.add(sequence)
            patterns = _pattern_files(raw) if raw is not None else []
            named |= {f.split("/", 1)[0] for f in patterns}
            kind = "pattern_path" if patterns else "log_entry_corrupt"
            findings.append(Finding.of(kind, path, str(exc)))
    findings += _chain_findings(storage.uri, parsed, digests, bad, checkpoint)
    previous = 0
    missing: set[int] = set()
    for sequence in sorted(sequences):
        if sequence > previous + 1:
            first, last = previous + 1, sequence - 1
            in_checkpoint = last <= covered
            missing |= set(range(first, last + 1))
            gone = entry_path(first) if first == last else f"{entry_path(first)} … {last}"
            findings.append(
                Finding.of(
                    "log_gap",
                    entry_path(first),
                    f"log entries {gone} are missing while {entry_path(sequence)} exists"
                    + (
                        f" (covered by checkpoint {covered}: opens are not affected)"
                        if in_checkpoint
                        else ""
                    ),
                    severity="warning" if in_checkpoint else None,
                )
            )
        previous = sequence
    lost = None if sequences else lost_log_evidence(storage)
    if lost:
        findings.append(Finding.of("log_missing", LOG_DIR, lost))
    readable = {**checkpointed, **parsed}  # an entry a checkpoint holds opens from there
    head = 0
    while head + 1 in readable:
        head += 1
    damaged = frozenset(s for s in missing | bad if s not in checkpointed)
    return _LogScan(
        [readable[s] for s in sorted(readable)],
        head,
        damaged,
        max(sequences, default=0),
        frozenset(named),
    )


def _chain_findings(
    root: str,
    parsed: Mapping[int, Revision],
    digests: Mapping[int, str],
    bad: Collection[int],
    checkpoint: _Checkpoint,
) -> list[Finding]:
    """Entries whose recorded digest of the entry before them is not that entry's (its
    file's, or the checkpoint's record of the last entry it covers), and entry files that
    differ from the checkpoint's copy of them."""
    findings = []
    last = max(checkpoint.records, default=0)
    for sequence, record in sorted(parsed.items()):
        before = sequence - 1
        known = digests.get(before) or (checkpoint.last_digest if before == last else None)
        if record.previous is None or before in bad or known is None or known == record.previous:
            continue
        message = (
            f"{entry_path(sequence)} records a digest of {entry_path(before)} other than "
            f"{'that file' if before in digests else 'the checkpoint records'}: "
            f"{entry_path(before)} was rewritten after its commit, or "
            f"{entry_path(sequence)} is not the entry committed after it"
        )
        findings.append(Finding.of("log_chain_broken", entry_path(sequence), message))
    for sequence, copy in sorted(checkpoint.records.items()):
        stored = parsed.get(sequence)
        if stored is None or stored.raw == copy.raw:
            continue
        if Revision.from_json(copy.raw or "", root) != stored:  # an older checkpoint's spelling
            message = (
                f"{entry_path(sequence)} differs from its copy in checkpoint {last} "
                f"({copy.kind} {copy.name!r} there, {stored.kind} {stored.name!r} in the file)"
            )
            findings.append(Finding.of("log_entry_rewritten", entry_path(sequence), message))
    return findings


def _pattern_files(raw: bytes) -> list[str]:
    """The data files an entry that failed to parse names with a pattern character (its
    tables' writes and its purge's), if its JSON is readable that far."""
    try:
        doc = load_json(raw)
        writes = [*doc.get("tables", {}).values()]
        for swaps in (doc.get("purge") or {}).get("swaps", {}).values():
            writes += [swap.get("write") or {} for swap in swaps]
        files = [f for write in writes for f in write.get("files", [])]
    except (ValueError, AttributeError, TypeError):
        return []
    return [f for f in files if isinstance(f, str) and pattern_characters(f)]


def file_findings(
    storage: Storage,
    records: Sequence[Revision],
    removed: Collection[int],
    checked: MutableMapping[str, StoredFile] | None = None,
) -> list[Finding]:
    """Every file a not-removed entry references is inside the root, present, a Parquet
    file whose footer parses and, where the entry recorded its stats, the file its commit
    recorded, and the files of each entry and table hold the rows the log records
    (``integrity.write_findings``; each distinct path read once)."""
    findings: list[Finding] = []
    checked = {} if checked is None else checked
    replaced = rebuilt(records, removed)  # damaged compactions no read uses any more
    for record in records:
        if record.sequence in removed:  # a vacuum removed their files on purpose
            continue
        for table, write in record.tables.items():
            escaped = []
            for path in write.files:
                try:
                    storage.check_inside(path)
                    check_data_file(path)
                except PathEscapeError as exc:
                    escaped.append(path)
                    kind = "pattern_path" if pattern_characters(path) else "path_escape"
                    findings.append(Finding.of(kind, path, str(exc)))
            if escaped:
                continue
            problems = write_findings(storage, record, table, checked)
            by = replaced.get(record.name)
            findings += problems if by is None else as_replaced(problems, by)
    return findings


def _check_states(snapshot: LogSnapshot, findings: list[Finding]) -> None:
    """What a purge of an earlier release left behind. It dropped what a carrying major
    carries from the log view until reads applied purges field by field
    (``TableWrite.with_purged_fields``); meanwhile a vacuum may have removed the carried
    revisions, a compaction may have been built without them and a later carrying major
    may have carried the state without them."""
    view = snapshot.view
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
            if compaction.missed_purge is not None and not view.is_removed(compaction.sequence):
                findings.append(_missed_purge(compaction))
        try:
            plan_state(snapshot, table)
        except NoMajorRevisionError:
            continue
        except RetentionError as exc:
            major = head_state(view, table).major
            findings.append(Finding.of("state_removed", major.name, str(exc)))


def _missed_purge(compaction: Compaction) -> Finding:
    """A compaction committed after a purge it did not see (``Compaction.missed_purge``)."""
    purge, covers = compaction.missed_purge, compaction.covers
    assert purge is not None
    read = covers.read_at if covers.read_at is not None else covers.through
    return Finding.of(
        "compaction_missed_purge",
        compaction.record.name,
        f"compaction {compaction.record.name!r} (sequence {compaction.sequence}) of table "
        f"{compaction.table!r} was planned on the log at sequence {read}"
        + (" or later" if covers.read_at is None else "")
        + f" and committed after purge {purge.name!r} (sequence {purge.sequence}) rewrote "
        "files it was built from: it may hold the rows that purge erased; reads do not "
        "use it",
    )


def _check_description(storage: Storage, scan: _LogScan, findings: list[Finding]) -> dict[int, str]:
    """description.parquet against the log: entries it lists after the log's last one
    were committed and lost (``log_head_lost``); a missing, damaged or lagging one is
    stale. Returns the names it gives the entries the log lacks or cannot read, when it
    agrees with every entry the log can read (else it names nothing)."""
    last = max(scan.head, scan.last)
    overlong = description_overlong(storage, last)
    stored = read_description(storage, last)
    rows = stored.to_pylist() if stored is not None else []
    names = {row["sequence"]: row["name"] for row in rows}
    agrees = [row["sequence"] for row in rows] == list(range(1, len(rows) + 1)) and all(
        names[r.sequence] == r.name for r in scan.records if r.sequence in names
    )
    lost = [row for row in rows if row["sequence"] > scan.last] if agrees else []
    for row in lost:
        path = entry_path(row["sequence"])
        message = (
            f"{DESCRIPTION} lists entry {row['sequence']} ({row['kind']} {row['name']!r}"
            + (f" of {', '.join(row['tables'])}" if row["tables"] else "")
            + f") after the log's last entry {scan.last}: it was committed (the description "
            f"is rewritten only after a commit) and {path} is lost" + _folder_evidence(storage, row)
        )
        findings.append(Finding.of("log_head_lost", path, message))
    if not lost:
        head = scan.head
        if overlong is not None:
            problem = (
                f"lists {overlong} revisions, the log has {head}: more than {LOST_HEAD_LIMIT} "
                "past its last entry are no lost head (it was not decoded)"
            )
        elif stored is None:
            raw = storage.read(DESCRIPTION)
            problem = (
                (f"is missing while the log has {head} revisions" if head else None)
                if raw is None
                else "is not readable Parquet of this version"
            )
        else:
            problem = (
                None if len(rows) == head else f"lists {len(rows)} revisions, the log has {head}"
            )
        if problem:
            message = f"{DESCRIPTION} {problem}"
            findings.append(Finding.of("description_stale", DESCRIPTION, message))
    named = scan.damaged | {row["sequence"] for row in lost}
    return {s: names[s] for s in named if s in names} if agrees else {}


def _folder_evidence(storage: Storage, row: Mapping[str, Any]) -> str:
    """What the folder of a lost entry holds against what description.parquet recorded."""
    if row["kind"] not in (MAJOR, MINOR, COMPACTION):
        return ""
    folder = row["name"]
    data = [f for f in storage.list_files(folder) if f.path.endswith(".parquet")]
    held = (
        f"{len(data)} data file{'s' if len(data) != 1 else ''} ({sum(f.size for f in data)} bytes)"
    )
    recorded = f"{row['files']} ({row['bytes']} bytes)"
    if not data:
        return f"; its folder {folder!r} holds no data file (it recorded {recorded})"
    if (len(data), sum(f.size for f in data)) == (row["files"], row["bytes"]):
        return f"; its folder {folder!r} holds its data: {held}, as it recorded"
    return f"; its folder {folder!r} holds {held}, it recorded {recorded}"


def _check_leftovers(
    storage: Storage,
    records: list[Revision],
    paths: Iterable[str],
    scan: _LogScan,
    described: Mapping[int, str],
    findings: list[Finding],
    held: Collection[str] = (),
) -> None:
    """Temporary files, nested datasets, and folders no readable entry references: those
    of a missing or damaged entry (named by description.parquet, or any while one is
    unnamed) are kept for the repair, and so are those that hold files a live entry misses
    (``held``: reported as misplaced); the others are orphans."""
    used = {r.name for r in records} | scan.named
    used |= {f.split("/", 1)[0] for r in records for w in r.tables.values() for f in w.files}
    unnamed = sorted(s for s in scan.damaged if s not in described)
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
        if not name.endswith("/") or folder[0] in "_." or folder in used or folder in held:
            continue
        if holds_log(folder, paths):
            message = f"folder {folder!r} holds a dataset of its own"
            findings.append(Finding.of("nested_dataset", folder, message))
            continue
        owner = next(
            (s for s, n in sorted(described.items()) if folder == n or folder.startswith(f"{n}-")),
            None,
        )
        if owner is not None:
            message = (
                f"folder {folder!r} holds the data of log entry {owner} ({described[owner]!r} "
                f"in {DESCRIPTION}), which is missing or damaged"
            )
        elif unnamed:
            message = (
                f"folder {folder!r} belongs to no readable entry and may hold the data of log "
                f"entries {unnamed}, which are missing or damaged ({DESCRIPTION} does not name "
                "them)"
            )
        else:
            message = f"folder {folder!r} belongs to no committed revision"
            findings.append(Finding.of("orphan_folder", folder, message))
            continue
        findings.append(Finding.of("folder_of_damaged_entry", folder, message))


def _check_upstreams(
    root: str,
    records: Sequence[Revision],
    options: Mapping[str, object],
    findings: list[Finding],
) -> None:
    """A position this dataset recorded past its upstream's head proves the upstream lost
    entries (``upstream_head_lost``). Only upstreams in the folder holding this dataset are
    read (a log is data: ``consumers.follows``); those elsewhere or that cannot be read are
    `lag`'s to report."""
    roots = upstream_roots(root)
    positions: dict[tuple[str, str], int] = {}
    for (_own, dataset, table), position in recorded_positions(records).items():
        if follows(roots, dataset):
            positions[dataset, table] = max(positions.get((dataset, table), 0), position)
    heads: dict[str, int | None] = {}
    for (dataset, table), position in sorted(positions.items()):
        if dataset not in heads:
            try:
                s3 = "://" in dataset and not dataset.startswith("file://")
                log = RevisionLog(open_storage(dataset, **(options if s3 else {}))).refresh()
                heads[dataset] = log[-1].sequence if log else None
            except RevisionsError:
                heads[dataset] = None
        head = heads[dataset]
        if head is not None and position > head:
            shown = stored_dataset(root, dataset)
            findings.append(
                Finding.of(
                    "upstream_head_lost",
                    "",
                    f"this dataset recorded position {position} in {shown}#{table}, whose log "
                    f"ends at sequence {head}: the upstream lost the entries after {head} "
                    "that this dataset consumed",
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


#: the checks ``verify --deep`` adds, as its ``deep_checks_skipped`` finding names them
DEEP_CHECKS = (
    "rows, tombstones, null and duplicated ids of every live revision against its log entry",
    "the row hashes of every live revision and compaction against their values",
    "what each purge removed (purge_lost_rows)",
)


def deep_skipped(findings: Sequence[Finding]) -> Finding | None:
    """The finding that says the deep checks did not run, when ``findings`` (those of
    ``verify_storage``) hold an error: data a damaged log or file stands for cannot be
    read whole. None when they may run."""
    errors = sorted({f.kind for f in findings if f.severity == "error"})
    if not errors:
        return None
    count = sum(f.severity == "error" for f in findings)
    return Finding.of(
        "deep_checks_skipped",
        "",
        f"the deep checks did not run ({'; '.join(DEEP_CHECKS)}): the other checks found "
        f"{count} error{'s' if count != 1 else ''} ({', '.join(errors)})",
    )


def deep_findings(spark: SparkSession, storage: Storage, view: LogView) -> list[Finding]:
    """Null and duplicated ids, and row counts against the log, per live data revision:
    one Spark job per table over all its revisions not removed by a vacuum
    (``table_counts``); the stored row hashes against the values, per live file of the
    table's revisions and compactions: one more job per table (``hash_mismatches``); then
    what each purge removed from reads (``purge_findings``), but for purges whose reads
    take a file found damaged (its answer would be the damage's). A data file a job cannot
    read (its bytes fail their ``.crc`` checksum, Spark cannot decode it) is a
    ``corrupt_file`` finding, and ends the checks of its table."""
    from ..read.execute.spark import SparkExecutor

    executor = SparkExecutor(storage, lambda: spark, "auto")
    findings: list[Finding] = []
    damaged: set[str] = set()
    replaced = rebuilt(view.records, set(view.removed))
    for table in view.tables():
        revisions = [r for r in view.table_revisions(table) if not view.is_removed(r.sequence)]
        compactions = [c.record for c in view.compactions(table) if not view.is_removed(c.sequence)]
        files = [(r.name, f) for r in (*revisions, *compactions) for f in r.tables[table].files]
        with _damage_found(executor, table, files, findings):
            if revisions:
                findings += count_findings(table, table_counts(spark, storage, table, revisions))
            records = [*revisions, *compactions]
            bad = hash_mismatches(spark, storage, table, records)
            damaged |= set(bad)
            findings += hash_findings(table, records, bad, replaced)
    damaged |= {f.path for f in findings if f.kind == "corrupt_file"}
    live = [r for r in view.records if not view.is_removed(r.sequence)]
    every = [(r.name, f) for r in live for w in r.tables.values() for f in w.files]
    with _damage_found(executor, "", every, findings):
        findings += purge_findings(spark, storage, view, damaged)
    return findings


@contextmanager
def _damage_found(
    executor: SparkExecutor,
    table: str,
    files: Sequence[tuple[str, str]],
    findings: list[Finding],
) -> Iterator[None]:
    """Around deep checks over ``files`` (entry, path): a data file Spark cannot read
    becomes a ``corrupt_file`` finding (the checks of the block stop there); a storage
    failure names the missing files or its cause (``SparkExecutor.read_failure``)."""
    from ..read.execute.spark_scan import file_key, spark_file_key
    from ..spark_errors import damaged_file, storage_cause

    try:
        yield
    except RevisionsError:
        raise
    except Exception as exc:
        damage = None if storage_cause(exc) is not None else damaged_file(exc)
        if damage is None:
            where = f"verify --deep of {executor.storage.uri}"
            failure = executor.read_failure(table, files, exc, where)
            if failure is None:
                raise
            raise failure from exc
        key = spark_file_key(damage[0])
        path = next((f for _, f in files if file_key(f) == key), damage[0])
        checks = f"the deep checks of table {table!r}" if table else "the deep checks of purges"
        message = f"data file {path}: {damage[1]}; {checks} stopped there"
        if not any(f.kind == "corrupt_file" and f.path == path for f in findings):
            findings.append(Finding.of("corrupt_file", path, message))


def hash_findings(
    table: str,
    records: Sequence[Revision],
    bad: Mapping[str, tuple[int, int]],
    replaced: Mapping[str, Revision],
) -> list[Finding]:
    """The files of ``records`` (live revisions and compactions of ``table``) holding rows
    whose stored ``_row_hash`` is not the hash of their values (``bad``, as
    ``hash_mismatches`` counts them): the values were changed outside revisions-assets
    since they were written. A damaged compaction that a rebuild replaced is a warning
    (``compaction_replaced``)."""
    findings = []
    for record in records:
        for path in record.tables[table].files:
            if path not in bad:
                continue
            wrong, rows = bad[path]
            message = (
                f"data file {path} of {record.kind} {record.name!r} (sequence "
                f"{record.sequence}), table {table!r}: {wrong} of its {rows} rows hold other "
                "values than were committed (their stored row hashes disagree with them)"
            )
            if record.kind != COMPACTION:
                findings.append(Finding.of("row_hash_mismatch", path, message))
                continue
            damaged = [Finding.of("compaction_damaged", record.name, message)]
            by = replaced.get(record.name)
            findings += damaged if by is None else as_replaced(damaged, by)
    return findings


def hash_mismatches(
    spark: SparkSession, storage: Storage, table: str, records: Sequence[Revision]
) -> dict[str, tuple[int, int]]:
    """Data file -> (its rows whose stored hash disagrees with their values, its rows), for
    the files of ``records`` that hold any: one Spark job over every file, each read in the
    schema its entry recorded (the hash by ``core/hashing.py``, as commits compute it);
    only the files with such rows reach the driver. Rows with a null stored hash are not
    checked: tombstones carry none, nor do files written before hashes (or imported from
    the original layout)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from ..columns import ROW_HASH
    from ..hashing import hash_disagrees
    from ..read.execute.spark_scan import (
        file_key,
        parquet_files,
        recorded_schema,
        spark_file_key,
    )
    from ..read.plan.schema import value_columns

    by_schema: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for record in records:
        write = record.tables[table]
        key = (write.schema_json, tuple(write.id_columns))
        by_schema.setdefault(key, []).extend(write.files)
    parts = []
    for (schema_json, ids), files in by_schema.items():
        if not files:
            continue
        own = recorded_schema(schema_json)
        read = StructType([*own.fields]).add(ROW_HASH, "long")
        rows = parquet_files(spark, [storage.spark_uri(f) for f in files], read)
        wrong = hash_disagrees(own, value_columns(own, ids)).cast("int")
        parts.append(
            rows.select(F.col("_metadata.file_path").alias("__file"), wrong.alias("__wrong"))
        )
    if not parts:
        return {}
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    per_file = (
        union.groupBy("__file")
        .agg(F.sum("__wrong").alias("wrong"), F.count(F.lit(1)).alias("rows"))
        .where(F.col("wrong") > 0)
        .collect()  # one row per file holding such rows
    )
    keyed = {file_key(f): f for r in records for f in r.tables[table].files}
    return {
        keyed.get(spark_file_key(row["__file"]), row["__file"]): (
            int(row["wrong"]),
            int(row["rows"]),
        )
        for row in per_file
    }


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


def merged_revisions(snapshot: LogSnapshot, table: str) -> tuple[list[Revision], Revision | None]:
    """The revisions a default read of ``table`` reads from their own files, and the
    compaction it reads the rest from (None: it reads its major's files); a compaction's ids
    are unique by construction. NoMajorRevisionError before the first major."""
    plan = plan_state(snapshot, table).rows
    by_sequence = {r.sequence: r for r in snapshot.view.records}
    direct = [by_sequence[t.sequence] for t in plan.tasks if not t.is_compaction]
    return direct, plan.compaction.record if plan.compaction is not None else None


def purge_findings(
    spark: SparkSession, storage: Storage, view: LogView, damaged: Collection[str] = ()
) -> list[Finding]:
    """Per purge entry and table, while the files it swapped out are still there: the
    table's state at the entry must be its state just before it, without at most as many
    entities as the purge was asked for and with every other row unchanged (same values,
    written by the same revision). The log holds no purged id (an audit without values),
    so the check counts, in one Spark job per entry: the rows of each state, and the rows
    at the entry that are no row before it. Not for a purge whose states read a file of
    ``damaged`` (found holding changed values: reported on its own)."""
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
            try:
                plans = [
                    plan_state(DatasetSnapshot(storage.uri, v), table).rows
                    for v in (view.before(record.sequence), view.before(record.sequence + 1))
                ]
            except (NoMajorRevisionError, RetentionError):
                continue  # no state to compare, or a vacuum removed part of one
            read = {f for plan in plans for _, f in plan.files}
            if read - present or read & set(damaged):
                continue  # a vacuum deleted the files the purge swapped out, or damage
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


__all__ = [
    "DEEP_CHECKS",
    "KINDS",
    "Finding",
    "RevisionCounts",
    "count_findings",
    "deep_findings",
    "deep_skipped",
    "file_findings",
    "hash_findings",
    "hash_mismatches",
    "merged_revisions",
    "purge_findings",
    "revision_counts",
    "table_counts",
    "verify",
    "verify_storage",
]
