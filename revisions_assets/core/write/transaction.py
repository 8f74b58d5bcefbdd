"""The commit transaction (docs/guides/engine.md): claim a folder, write with Spark, check, append
the log.

A ``CommitTransaction`` gets everything it needs explicitly (storage, log, Spark
session, the prepared ``CommitRequest`` and the DataFrames) and runs one commit:

1. claim the revision folder exclusively (two writers of one name never share it);
2. write each table with Spark into ``<revision>/<table>/``: a major's files clustered by
   id (disjoint id ranges, ``clustered``), a minor's as they come;
3. check what was written: row and tombstone counts and null ids are observed by the
   write job itself (``DataFrame.observe``), and so are a major's duplicate ids (its rows
   sorted by id); a minor's take one job over the id columns of the written files;
4. append the log entry ``head + 1`` put-if-absent, re-validating against the log and
   retrying with jittered backoff when another writer took the sequence (``append_entry``,
   which every kind of entry goes through, after checking what the entry was derived from
   against what landed since: ``conflicts.py``);
5. upkeep (checkpoint, ``description.parquet``), which never fails the commit.

A failure before step 4 deletes the claimed folder; nothing is committed.
"""

from __future__ import annotations

import logging
import math
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ..columns import DELETED, ROW_HASH
from ..errors import (
    CommitConflictError,
    DuplicateIdError,
    DuplicateRevisionNameError,
    IdColumnsError,
    NoMajorRevisionError,
    NullIdError,
    SchemaMismatchError,
    UnknownTableError,
)
from ..hashing import row_hash
from ..log.consumers import check_positions, moves_positions
from ..log.file_stats import WRITTEN_TAIL_READ, read_file_stats
from ..log.health import mark_dataset
from ..log.layout import CLAIM_FILE
from ..log.records import FileStats, Revision, TableWrite, UpstreamPosition, canonical_json
from ..log.revision_log import RevisionLog
from ..log.view import LogView
from ..read.execute.frames import SMALL_ROWS, hinted, lazy, real_changes
from ..read.execute.spark import state_schemas
from ..read.execute.spark_scan import parquet_files
from ..read.plan.requests import LogSnapshot
from ..read.plan.schema import value_columns
from ..read.scan import DatasetSnapshot
from ..spark_errors import spark_storage_errors
from ..storage.base import Storage
from ..timeutil import now_utc
from .conflicts import ReadSet
from .file_size import DICTIONARY_PAGE_BYTES, FIRST_FILE_ROWS, ROW_GROUP_BYTES, ROW_GROUP_ROWS
from .rules import check_carried, check_major_after_vacuum
from .validation import check_compatible

log = logging.getLogger(__name__)

MAX_COMMIT_ATTEMPTS = 64
#: up to this many written rows, the duplicate-id check runs in one task (no shuffle)
ONE_TASK_CHECK_MAX_ROWS = 1_000_000
#: the rows of a clustered write that share each row's id (``write_observed``)
_REPEATS = "__rows_of_id"


@dataclass
class StagedTable:
    """One table of a commit: what is known before the write, then what the write produced."""

    table: str
    id_columns: tuple[str, ...]
    schema: StructType
    version: str | None
    rows: int = 0
    tombstones: int = 0
    files: tuple[str, ...] = ()
    bytes: int = 0
    file_stats: tuple[FileStats, ...] | None = None
    prefix: str = ""
    #: columns of the current schema absent from the data: allowed on tombstone rows only
    filled: tuple[str, ...] = ()
    #: a skip-unchanged minor: the (ids, ``_row_hash``) of the rows this one would replace;
    #: offered rows with an equal, non-null hash are not written
    replaced: DataFrame | None = None
    compared_with: int | None = None  # the head sequence of ``replaced``'s state
    rows_offered: int | None = None
    field_versions: dict[str, str] | None = None
    #: a carrying major: the revisions whose state (``replaced``'s) it keeps
    carries: tuple[int, ...] = ()
    #: the offered rows are the complete new state: entities of ``replaced`` they lack get
    #: tombstones (a major written with skip_unchanged); else rows not offered are kept
    complete_offer: bool = False
    #: how many rows make a file of about the target size (``rows_per_file``)
    rows_per_file: int = FIRST_FILE_ROWS

    @property
    def offered_nothing(self) -> bool:
        """Whether the caller gave no rows (the rule for empty input): a carrying major that
        wrote no rows still commits, unless its offer was complete and empty."""
        if self.complete_offer:
            return not self.rows_offered
        return not self.rows and not self.carries

    def to_write(self) -> TableWrite:
        return TableWrite(
            id_columns=self.id_columns,
            schema_json=canonical_json(self.schema.jsonValue()),
            version=self.version,
            rows=self.rows,
            tombstones=self.tombstones,
            files=self.files,
            bytes=self.bytes,
            rows_offered=self.rows_offered,
            compared_with=self.compared_with,
            field_versions=self.field_versions,
            carries=self.carries,
            file_stats=self.file_stats,
        )


@dataclass
class CommitRequest:
    """A validated commit, before anything is written."""

    name: str
    custom_name: bool
    timestamp: datetime
    is_major: bool
    version: str | None
    producer: dict[str, str]
    upstream: tuple[UpstreamPosition, ...]
    expected_positions: dict[tuple[str, str], int]
    properties: dict[str, str]
    staged: list[StagedTable] = field(default_factory=list)
    #: an imported revision: the sequence of the import's previous entry, after which the
    #: log must hold nothing but this one (``maintain/legacy.py``)
    imported_after: int | None = None
    #: the log's head when the revision folder was claimed (``CommitTransaction``)
    claimed_at: int | None = None

    def read_set(self) -> ReadSet:
        """What this commit read of the dataset and must find unchanged when it appends
        (``conflicts.py``): the states its skip-unchanged tables compared their rows with (a
        purge of them since would leave rows written, or skipped, against rows that are
        gone; a major ordered before it would replace that state), the states its carrying
        tables keep (a revision ordered before the major since would be voided, not
        carried), and for an imported revision the whole log; and the folder it wrote, which
        no vacuum committed since its claim may have deleted."""
        wrote = {"folders": frozenset({self.name}), "claimed_at": self.claimed_at}
        if self.imported_after is not None:
            return ReadSet(
                f"the import of revision {self.name!r}",
                "the dataset holds part of the import and another writer's entries: import "
                "into a new root, which no other writer uses",
                self.imported_after,
                exclusive=True,
                **wrote,
            )
        compared = [s for s in self.staged if s.replaced is not None or s.carries]
        return ReadSet(
            f"revision {self.name!r}",
            "commit it again (it then compares with, or carries, the state that includes it)"
            if compared
            else "commit it again",
            min((s.compared_with or 0 for s in compared), default=self.claimed_at or 0),
            compared={s.table: self.timestamp for s in compared if s.replaced is not None},
            carried={s.table: self.timestamp for s in compared if s.carries},
            **wrote,
        )

    @property
    def common_version(self) -> str | None:
        """The revision's version: the one given, or the tables' shared one."""
        if self.version is not None:
            return self.version
        versions = {s.version for s in self.staged}
        return versions.pop() if len(versions) == 1 else None


def table_id_columns(
    records: Sequence[Revision],
    table: str,
    declared: Mapping[str, tuple[str, ...]] | None,
    default: tuple[str, ...] | None,
    root: str,
) -> tuple[str, ...]:
    """The id columns of ``table``: declared or default, and equal to those already recorded."""
    if declared is not None and table not in declared:
        raise UnknownTableError(
            f"table {table!r} is not declared for {root}; declared: {sorted(declared)}"
        )
    given = declared[table] if declared is not None else default
    existing = next(
        (r.tables[table].id_columns for r in reversed(records) if table in r.tables), None
    )
    if existing is not None and given is not None and tuple(given) != existing:
        raise IdColumnsError(f"table {table!r} has id columns {list(existing)}, not {list(given)}")
    ids = given or existing
    if not ids:
        raise IdColumnsError(
            f"table {table!r} is new: give its id columns, "
            "e.g. RevisionedDataset(root, id_columns=['id'])"
        )
    return tuple(ids)


def complete_for_tombstones(snapshot: LogSnapshot, staged: StagedTable) -> None:
    """Tombstone rows need only ids: fill the current columns the data lacks with nulls."""
    view = snapshot.view
    if staged.table not in view.tables():
        return
    if not any(r.is_major for r in view.table_revisions(staged.table)):
        return  # reported by check_against_log
    _major, current = state_schemas(snapshot, staged.table)
    given = set(staged.schema.fieldNames())
    staged.filled = tuple(f.name for f in current.fields if f.name not in given)
    if staged.filled:
        extra = [f for f in staged.schema.fields if f.name not in current.fieldNames()]
        mine = {f.name: f for f in staged.schema.fields}
        staged.schema = StructType([mine.get(f.name, f) for f in current.fields] + extra)


def check_against_log(view: LogView, request: CommitRequest, root: str) -> None:
    """The rules that depend on the log; re-checked on every commit attempt."""
    records = view.records
    if request.custom_name and any(r.name == request.name for r in records):
        raise DuplicateRevisionNameError(
            f"revision name {request.name!r} is already taken in {root}"
        )
    for staged in request.staged:
        if request.is_major:
            check_major_after_vacuum(view, staged.table, request.timestamp)
            check_carried(view, staged.table, request.timestamp, staged.carries)
            if not staged.carries:
                continue
        known = staged.table in view.tables()
        if not known or not any(r.is_major for r in view.table_revisions(staged.table)):
            raise NoMajorRevisionError(
                f"table {staged.table!r} has no major revision: commit a major first "
                "(is_major=True)"
            )
        major, current = state_schemas(DatasetSnapshot(root, view), staged.table)
        check_compatible(staged.table, major=major, current=current, new=staged.schema)
    check_positions(
        records,
        root,
        [s.table for s in request.staged],
        request.upstream,
        request.expected_positions,
    )


class CommitTransaction:
    """One commit of one revision, from claimed folder to log entry."""

    def __init__(
        self,
        storage: Storage,
        revision_log: RevisionLog,
        spark: SparkSession,
        request: CommitRequest,
    ):
        self.storage = storage
        self.log = revision_log
        self.spark = spark
        self.request = request

    @property
    def root(self) -> str:
        return self.storage.uri

    def run(self, frames: Mapping[str, DataFrame]) -> Revision | None:
        """Write ``frames`` and commit them; None when there was nothing to commit."""
        request = self.request
        token = self.claim_folder()  # from here on the folder is ours to clean up
        try:
            for staged in request.staged:
                with spark_storage_errors("write", f"{self.root}/{request.name}/{staged.table}"):
                    self.write_table(staged, frames[staged.table])
            if all(s.offered_nothing for s in request.staged):
                records = self.log.refresh()
                tables = [s.table for s in request.staged]
                if not moves_positions(records, request.upstream, tables):
                    log.info("%s: no rows in %s; nothing committed", self.root, sorted(frames))
                    release_folder(self.storage, request.name, token)
                    return None
                # a consumer whose new input produced no output still records how far it read
            else:
                request.staged = [s for s in request.staged if s.rows or request.is_major]
            record = self.append()
        except BaseException:
            release_folder(self.storage, request.name, token)
            raise
        upkeep(self.log, record)
        return record

    def claim_folder(self) -> bytes:
        if self.log.head == 0:
            mark_dataset(self.storage)  # before any folder: see layout.LOG_MARKER
        self.request.claimed_at = self.log.head
        return claim_folder(self.storage, self.request.name)

    def write_table(self, staged: StagedTable, df: DataFrame) -> None:
        """Write one table's files with Spark, with each row's ``_row_hash``, counting rows,
        tombstones and null ids in the same job (and the offered rows, when unchanged ones
        are skipped); then check the ids are unique."""
        staged.prefix = f"{self.request.name}/{staged.table}"
        deleted = (
            F.coalesce(F.col(DELETED), F.lit(False)) if DELETED in df.columns else F.lit(False)
        )
        columns = [
            F.lit(None).cast(f.dataType).alias(f.name) if f.name in staged.filled else F.col(f.name)
            for f in staged.schema.fields
        ]
        values = value_columns(staged.schema, staged.id_columns)
        out = df.select(*columns, deleted.alias(DELETED)).withColumn(
            ROW_HASH, F.when(~F.col(DELETED), row_hash(staged.schema, values))
        )
        offered, given, cached = None, out, None
        if staged.replaced is not None and staged.complete_offer:
            out, offered = diff_complete(out, staged.replaced, staged.id_columns)
        elif staged.replaced is not None:
            # computed once (the caller's plan may be costly), counted, then compared
            cached = out.persist(StorageLevel.MEMORY_AND_DISK)
            staged.rows_offered = cached.count()
            out = skip_unchanged(
                cached,
                staged.replaced,
                staged.id_columns,
                staged.rows_offered,
                staged.rows_per_file,
            )
        nulls = {c: F.sum(F.col(c).isNull().cast("long")) for c in staged.id_columns}
        try:
            stats = write_observed(
                out,
                self.storage.spark_uri(staged.prefix),
                {f"null_{i}": e for i, e in enumerate(nulls.values())},
                # a large revision: files of about the target size
                max_records_per_file=staged.rows_per_file,
                sort_by=staged.id_columns,
                cluster=self.request.is_major,  # minors stay as they come: they are small
                repeats=self.request.is_major,
            )
        finally:
            if cached is not None:
                cached.unpersist()
        if offered is not None:
            staged.rows_offered = observed_offers(offered, given)
        schema_json = canonical_json(staged.schema.jsonValue())
        written = written_files(self.storage, staged.prefix, staged.id_columns, schema_json)
        staged.files, staged.bytes, staged.file_stats = written.files, written.bytes, written.stats
        bad = {c: stats[f"null_{i}"] for i, c in enumerate(nulls) if stats[f"null_{i}"]}
        if bad:
            raise NullIdError(
                f"table {staged.table!r}: null values in id column(s) "
                + ", ".join(f"{c!r} ({n} rows)" for c, n in bad.items())
            )
        staged.rows, staged.tombstones = stats["rows"], stats["tombstones"]
        # a clustered write counted the rows of each id itself: a job of its own only
        # names a repeated id it found
        if staged.rows > 1 and stats.get("repeats", 2) > 1:
            self.check_unique_ids(staged)
        if staged.filled and staged.rows != staged.tombstones:
            raise SchemaMismatchError(
                f"table {staged.table!r}: the minor drops column(s) {list(staged.filled)} of the "
                f"current major on {staged.rows - staged.tombstones} non-deleted rows; only "
                "tombstone rows (_deleted = true) may omit columns"
            )

    def check_unique_ids(self, staged: StagedTable) -> None:
        """One Spark job over the id columns of the written files: each entity at most once."""
        ids = list(staged.id_columns)
        id_schema = StructType([staged.schema[c] for c in ids])
        written = parquet_files(
            self.spark, [self.storage.spark_uri(f) for f in staged.files], id_schema
        )
        if staged.rows <= ONE_TASK_CHECK_MAX_ROWS:
            # one task counts every id: no shuffle, a job of one stage instead of two
            # (docs/benchmarks/index.md, "Measured while choosing")
            written = written.coalesce(1)
        repeated = written.groupBy(*ids).count().where(F.col("count") > 1).limit(1).collect()
        if repeated:
            key = {c: repeated[0][c] for c in ids}
            raise DuplicateIdError(
                f"table {staged.table!r}: id {key} appears {repeated[0]['count']} times in one "
                "revision; each entity may appear once per revision"
            )

    def append(self) -> Revision:
        """Append the log entry, guarded by "the head is still what I read"; retry on conflict."""
        request = self.request

        def build(view: LogView) -> Revision:
            check_against_log(view, request, self.root)
            return Revision(
                name=request.name,
                timestamp=request.timestamp,
                is_major=request.is_major,
                version=request.common_version,
                sequence=view.head + 1,
                committed_at=now_utc(),
                tables={s.table: s.to_write() for s in request.staged},
                producer=request.producer,
                upstream=request.upstream,
                properties=request.properties,
            )

        record = append_entry(self.log, build, f"revision {request.name!r}", request.read_set())
        assert record is not None
        return record


@dataclass(frozen=True)
class WrittenFiles:
    """The data files one Spark write produced: their paths (relative to the root), their
    bytes in all, and each one's stats (``FileStats``, aligned with ``files``)."""

    files: tuple[str, ...]
    bytes: int
    stats: tuple[FileStats, ...]


def written_files(
    storage: Storage, prefix: str, id_columns: Sequence[str], schema_json: str
) -> WrittenFiles:
    """What a write into the fresh folder ``prefix`` produced, as its log entry records it:
    its data files (Spark's markers and temporary files left out) and their stats, read
    from each file's footer (one ranged read of its last MiB, in threads on an object
    store; the data is not read again). Commits, compactions and purges record their
    writes with it."""
    infos = [
        f
        for f in storage.list_files(prefix)
        if f.path.endswith(".parquet") and not f.path.rsplit("/", 1)[-1].startswith(("_", "."))
    ]
    files = tuple(f.path for f in infos)
    stats = read_file_stats(storage, files, id_columns, schema_json, WRITTEN_TAIL_READ)
    return WrittenFiles(files, sum(f.size for f in infos), stats)


def upkeep(revision_log: RevisionLog, record: Revision) -> None:
    """Post-commit upkeep (checkpoint, description.parquet); never fails the commit: the
    entry is committed, and the next commit or open redoes what failed."""
    try:
        revision_log.after_commit()
    except Exception as exc:
        log.warning(
            "%s: %s %s committed, but log upkeep failed: %s",
            revision_log.storage.uri,
            record.kind,
            record.name,
            exc,
        )


def claim_folder(storage: Storage, name: str) -> bytes:
    """Take a revision folder atomically and return the claim's token: two writers of one
    name never share a folder, and a folder that already holds anything is never taken,
    so everything below a claimed folder was written by the claim's holder."""
    token = uuid.uuid4().hex.encode()  # unique: a retried PUT recognizes only its own claim
    claim = f"{name}/{CLAIM_FILE}"
    if not storage.create_exclusive(claim, token):
        raise DuplicateRevisionNameError(
            f"revision folder {name!r} already exists under {storage.uri} (another writer "
            "uses this name, or an uncommitted attempt left it): pick another name"
        )
    found = [n for n in storage.list_names(f"{name}/") if n != CLAIM_FILE]
    if found:
        storage.delete_files([claim])  # only what this claim created
        shown = ", ".join(repr(n) for n in found[:3]) + (" …" if len(found) > 3 else "")
        raise DuplicateRevisionNameError(
            f"revision folder {name!r} already exists under {storage.uri} and holds {shown}, "
            "which no commit of this name wrote: pick another name (the folder is left as it "
            "is; 'revisions verify' reports folders no log entry references)"
        )
    return token


def release_folder(storage: Storage, name: str, token: bytes) -> None:
    """Remove the folder of a commit that failed or had nothing to commit, if its claim is
    still ``token``'s: a commit removes only what it created itself."""
    if storage.read(f"{name}/{CLAIM_FILE}") == token:
        storage.delete_tree(name)


def append_entry(
    revision_log: RevisionLog,
    build: Callable[[LogView], Revision | None],
    what: str,
    read: ReadSet | None = None,
) -> Revision | None:
    """Commit the entry ``build`` makes from the current log as ``head + 1``, put-if-absent.

    ``build`` validates against the log it is given (raising, or returning None when there
    is nothing left to commit); then ``read``, what the entry is derived from
    (``conflicts.py``), is checked against the entries committed since it was read (after
    ``build``, so that its more specific refusals, such as a consumer position another run
    moved, come first). Both run again after every lost race, with jittered, growing
    backoff: so every kind of entry is committed under the same precondition.
    """
    delay = 0.005
    for _attempt in range(MAX_COMMIT_ATTEMPTS):
        revision_log.refresh()
        view = revision_log.view()
        record = build(view)
        if record is None:
            return None
        if read is not None:
            read.check(view, revision_log.storage.uri)
        if revision_log.try_append(record):
            return revision_log.records[-1]  # as stored: chained to the entry before it
        # one record per lost race: how operators (and the race tests) see contention
        log.info(
            "%s: lost the race for sequence %d with %s; re-validating and retrying",
            revision_log.storage.uri,
            record.sequence,
            what,
        )
        time.sleep(delay * (1 + random.random()))
        delay = min(delay * 2, 0.5)
    raise CommitConflictError(
        f"{revision_log.storage.uri}: could not commit {what} after {MAX_COMMIT_ATTEMPTS} "
        "attempts: the log kept moving; nothing was committed"
    )


def skip_unchanged(
    rows: DataFrame,
    replaced: DataFrame,
    id_columns: Sequence[str],
    offered: int,
    rows_per_file: int = FIRST_FILE_ROWS,
) -> DataFrame:
    """``rows`` (``offered`` of them) without those whose hash equals the row they replace
    (the real-change diff of ``read/execute/frames.py``; null hashes never match). A minor
    offers few rows against a large state: up to ``SMALL_ROWS`` offered rows, the
    state is first narrowed to their ids by a broadcast semi-join, so its hashes are probed
    where they lie instead of being shuffled whole (docs/benchmarks/index.md, "Measured
    while choosing"). The last stage then reads the offered rows alone (the state is
    broadcast), in as many tasks, hence files, as ``offered / rows_per_file`` needs: one for
    a small minor, where the cached rows would keep a file per shuffle partition."""
    if offered > SMALL_ROWS:
        return real_changes(lazy(rows), lazy(replaced), id_columns, gone=False).to_native()
    narrow = hinted(F.broadcast)
    changed = real_changes(lazy(rows), lazy(replaced), id_columns, gone=False, narrow=narrow)
    return changed.to_native().coalesce(max(1, math.ceil(offered / rows_per_file)))


def diff_complete(
    rows: DataFrame, replaced: DataFrame, id_columns: Sequence[str]
) -> tuple[DataFrame, Observation]:
    """A complete new state against the state it replaces (a carrying major): the rows
    that are new or whose hash differs, and a tombstone for every entity of ``replaced``
    that ``rows`` lack (the real-change diff of ``read/execute/frames.py``, one full outer
    join on the ids); the offered rows are counted by the write job itself."""
    observation = Observation(f"offered-{uuid.uuid4().hex}")
    counted = rows.observe(observation, F.count(F.lit(1)).alias("offered"))
    changed = real_changes(lazy(counted), lazy(replaced), id_columns, gone=True)
    return changed.to_native(), observation


def observed_offers(observation: Observation, rows: DataFrame) -> int:
    """The offered rows the write job counted; counted again in a job of its own when Spark
    left the observed side out of the run (adaptive execution drops a side it finds empty
    at run time, and the observation then holds no row: seen with an empty offer)."""
    try:
        return int(observation.get.get("offered") or 0)
    except Exception:  # Py4JJavaError in classic Spark; Connect raises its own errors
        log.info("offered rows not observed by the write job; counting them")
        return rows.count()


def write_observed(
    df: DataFrame,
    uri: str,
    extra: Mapping[str, Column] | None = None,
    max_records_per_file: int | None = None,
    sort_by: Sequence[str] = (),
    cluster: bool = False,
    repeats: bool = False,
) -> dict[str, int]:
    """Write ``df`` (with its ``_deleted`` column) as Parquet into the fresh folder ``uri``;
    its rows, tombstones and ``extra`` sums are counted by the write job itself.

    The layout of every data file (``file_size.py``): sorted by ``sort_by`` (the id
    columns) within each file, in row groups of ``ROW_GROUP_ROWS`` rows at most.
    ``cluster`` (majors, compactions): in the order of ``sort_by`` across the files, so
    their id ranges do not overlap (``clustered``); then ``repeats`` also counts the most
    rows that share one id (``repeats`` in the result: more than 1, a duplicate id), in the
    same job: the rows of an id are adjacent, so no shuffle but the sort's."""
    columns = df.columns
    if sort_by and cluster:
        df = clustered(df, sort_by)
    elif sort_by:
        df = df.sortWithinPartitions(*sort_by)
    observation = Observation(f"write-{uuid.uuid4().hex}")
    metrics = {
        "rows": F.count(F.lit(1)),
        "tombstones": F.sum(F.col(DELETED).cast("long")),
        **(extra or {}),
    }
    if repeats and sort_by and cluster:
        # a window partitioned by the ids, over rows already range-partitioned and sorted
        # by them: Spark adds no exchange and no sort
        df = df.withColumn(_REPEATS, F.count(F.lit(1)).over(Window.partitionBy(*sort_by)))
        metrics["repeats"] = F.max(F.col(_REPEATS))
    observed = df.observe(observation, *[e.alias(k) for k, e in metrics.items()])
    observed = observed.select(*columns) if _REPEATS in df.columns else observed
    writer = (
        observed.write.mode("error")  # a fresh folder; Spark Connect knows only "error"
        .option("parquet.block.row.count.limit", ROW_GROUP_ROWS)
        .option("parquet.block.size", ROW_GROUP_BYTES)
        .option("parquet.dictionary.page.size", DICTIONARY_PAGE_BYTES)
    )
    if max_records_per_file:
        writer = writer.option("maxRecordsPerFile", max_records_per_file)
    writer.parquet(uri)
    return {k: int(v or 0) for k, v in observation.get.items()}


def clustered(df: DataFrame, id_columns: Sequence[str]) -> DataFrame:
    """``df`` in the order of ``id_columns`` across its partitions: each task then writes a
    run of consecutive ids, cut into files by ``maxRecordsPerFile`` in that order, so no two
    files of the write overlap in id range and an id lies in one file (a plan prunes the
    others by the ranges the log records). A global sort: Spark range-partitions the rows
    (equal ids in one partition) into ``spark.sql.shuffle.partitions`` runs, adaptive
    execution merging small neighbours, and sorts each; where the input is already in that
    order (a range of ids, a clustered read) Spark adds neither the shuffle nor the sort
    (docs/benchmarks/index.md, "Files clustered by id")."""
    return df.orderBy(*id_columns)
