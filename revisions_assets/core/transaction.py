"""The commit transaction (SPEC §4): claim a folder, write with Spark, check, append the log.

A ``CommitTransaction`` gets everything it needs explicitly (storage, log, Spark
session, the prepared ``CommitRequest`` and the DataFrames) and runs one commit:

1. claim the revision folder exclusively (two writers of one name never share it);
2. write each table with Spark into ``<revision>/<table>/``;
3. check the written files (row and tombstone counts, null and duplicate ids);
4. append the log entry ``head + 1`` put-if-absent, re-validating against the log and
   retrying with jittered backoff when another writer took the sequence;
5. upkeep (checkpoint, ``description.parquet``), which never fails the commit.

A failure before step 4 deletes the claimed folder; nothing is committed.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructField, StructType

from .errors import (
    CommitConflictError,
    DuplicateIdError,
    DuplicateRevisionNameError,
    IdColumnsError,
    NoMajorRevisionError,
    NullIdError,
    SchemaMismatchError,
    UnknownTableError,
)
from .layout import CLAIM_FILE
from .log import RevisionLog
from .loghealth import mark_dataset
from .merge import DELETED, table_schema
from .records import Revision, TableWrite, UpstreamPosition, canonical_json
from .selection import check_positions, moves_positions, state_selection
from .spark_errors import spark_storage_errors
from .storage import Storage
from .timeutil import now_utc
from .validation import check_compatible

log = logging.getLogger(__name__)

MAX_COMMIT_ATTEMPTS = 64


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
    prefix: str = ""
    #: columns of the current schema absent from the data: allowed on tombstone rows only
    filled: tuple[str, ...] = ()

    def to_write(self) -> TableWrite:
        return TableWrite(
            id_columns=self.id_columns,
            schema_json=canonical_json(self.schema.jsonValue()),
            version=self.version,
            rows=self.rows,
            tombstones=self.tombstones,
            files=self.files,
            bytes=self.bytes,
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


def complete_for_tombstones(records: Sequence[Revision], staged: StagedTable) -> None:
    """Tombstone rows need only ids: fill the current columns the data lacks with nulls."""
    history = [r for r in records if staged.table in r.tables]
    if not any(r.is_major for r in history):
        return  # reported by check_against_log
    current = table_schema(state_selection(history, staged.table).merge, staged.table)
    given = set(staged.schema.fieldNames())
    staged.filled = tuple(f.name for f in current.fields if f.name not in given)
    if staged.filled:
        extra = [f for f in staged.schema.fields if f.name not in current.fieldNames()]
        mine = {f.name: f for f in staged.schema.fields}
        staged.schema = StructType([mine.get(f.name, f) for f in current.fields] + extra)


def check_against_log(records: Sequence[Revision], request: CommitRequest, root: str) -> None:
    """The rules that depend on the log; re-checked on every commit attempt."""
    if request.custom_name and any(r.name == request.name for r in records):
        raise DuplicateRevisionNameError(
            f"revision name {request.name!r} is already taken in {root}"
        )
    if not request.is_major:
        for staged in request.staged:
            history = [r for r in records if staged.table in r.tables]
            if not any(r.is_major for r in history):
                raise NoMajorRevisionError(
                    f"table {staged.table!r} has no major revision: commit a major first "
                    "(is_major=True)"
                )
            current = state_selection(history, staged.table)
            check_compatible(
                staged.table,
                major=table_schema((current.major,), staged.table),
                current=table_schema(current.merge, staged.table),
                new=staged.schema,
            )
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
        self.claim_folder()  # from here on the folder is ours to clean up
        try:
            for staged in request.staged:
                with spark_storage_errors("write", f"{self.root}/{request.name}/{staged.table}"):
                    self.write_table(staged, frames[staged.table])
            if not any(s.rows for s in request.staged):
                records = self.log.refresh()
                tables = [s.table for s in request.staged]
                if not moves_positions(records, request.upstream, tables):
                    log.info("%s: no rows in %s; nothing committed", self.root, sorted(frames))
                    self.storage.delete_tree(request.name)
                    return None
                # a consumer whose new input produced no output still records how far it read
            else:
                request.staged = [s for s in request.staged if s.rows or request.is_major]
            record = self.append()
        except BaseException:
            self.storage.delete_tree(request.name)
            raise
        try:
            self.log.after_commit()
        except Exception as exc:  # the revision is committed; upkeep is retried on the next commit
            log.warning(
                "%s: revision %s committed, but log upkeep failed: %s", self.root, record.name, exc
            )
        return record

    def claim_folder(self) -> None:
        """Take the revision folder atomically: two writers of one custom name never share it."""
        name = self.request.name
        if self.log.head == 0:
            mark_dataset(self.storage)  # before any folder: see layout.LOG_MARKER
        token = uuid.uuid4().hex.encode()  # unique: a retried PUT recognizes only its own claim
        if not self.storage.create_exclusive(f"{name}/{CLAIM_FILE}", token):
            raise DuplicateRevisionNameError(
                f"revision folder {name!r} already exists under {self.root} (another writer "
                "uses this name, or an uncommitted attempt left it): pick another name"
            )

    def write_table(self, staged: StagedTable, df: DataFrame) -> None:
        """Write one table's files with Spark, then validate and count them from the files."""
        staged.prefix = f"{self.request.name}/{staged.table}"
        deleted = (
            F.coalesce(F.col(DELETED), F.lit(False)) if DELETED in df.columns else F.lit(False)
        )
        columns = [
            F.lit(None).cast(f.dataType).alias(f.name) if f.name in staged.filled else F.col(f.name)
            for f in staged.schema.fields
        ]
        out = df.select(*columns, deleted.alias(DELETED))
        # "error" (= errorifexists): a fresh folder; the Spark Connect client knows only "error"
        out.write.mode("error").parquet(self.storage.spark_uri(staged.prefix))
        files = [
            f
            for f in self.storage.list_files(staged.prefix)
            if f.path.endswith(".parquet") and not f.path.rsplit("/", 1)[-1].startswith(("_", "."))
        ]
        staged.files = tuple(f.path for f in files)
        staged.bytes = sum(f.size for f in files)
        self.validate_written(staged)

    def validate_written(self, staged: StagedTable) -> None:
        """One Spark job over the written files: counts, null ids, duplicate ids."""
        if not staged.files:
            return
        ids = list(staged.id_columns)
        file_schema = StructType([*staged.schema.fields, StructField(DELETED, BooleanType())])
        written = self.spark.read.schema(file_schema).parquet(
            *[self.storage.spark_uri(f) for f in staged.files]
        )
        per_entity = written.groupBy(*ids).agg(
            F.count(F.lit(1)).alias("n"), F.sum(F.col(DELETED).cast("long")).alias("t")
        )
        null_of = {c: F.sum(F.when(F.col(c).isNull(), F.col("n")).otherwise(0)) for c in ids}
        stats = per_entity.agg(
            F.coalesce(F.sum("n"), F.lit(0)).alias("rows"),
            F.coalesce(F.sum("t"), F.lit(0)).alias("tombstones"),
            F.coalesce(F.max("n"), F.lit(0)).alias("max_n"),
            *[expr.alias(f"null_{i}") for i, expr in enumerate(null_of.values())],
        ).collect()[0]
        nulls = {c: stats[f"null_{i}"] or 0 for i, c in enumerate(ids)}
        if any(nulls.values()):
            bad = {c: n for c, n in nulls.items() if n}
            raise NullIdError(
                f"table {staged.table!r}: null values in id column(s) "
                + ", ".join(f"{c!r} ({n} rows)" for c, n in bad.items())
            )
        if stats["max_n"] > 1:
            example = per_entity.where(F.col("n") > 1).limit(1).collect()[0]
            key = {c: example[c] for c in ids}
            raise DuplicateIdError(
                f"table {staged.table!r}: id {key} appears {example['n']} times in one revision; "
                "each entity may appear once per revision"
            )
        staged.rows, staged.tombstones = int(stats["rows"]), int(stats["tombstones"])
        if staged.filled and staged.rows != staged.tombstones:
            raise SchemaMismatchError(
                f"table {staged.table!r}: the minor drops column(s) {list(staged.filled)} of the "
                f"current major on {staged.rows - staged.tombstones} non-deleted rows; only "
                "tombstone rows (_deleted = true) may omit columns"
            )

    def append(self) -> Revision:
        """Append the log entry, guarded by "the head is still what I read"; retry on conflict."""
        request = self.request
        delay = 0.005
        for _attempt in range(MAX_COMMIT_ATTEMPTS):
            records = self.log.refresh()
            check_against_log(records, request, self.root)
            record = Revision(
                name=request.name,
                timestamp=request.timestamp,
                is_major=request.is_major,
                version=request.common_version,
                sequence=self.log.head + 1,
                committed_at=now_utc(),
                tables={s.table: s.to_write() for s in request.staged},
                producer=request.producer,
                upstream=request.upstream,
                properties=request.properties,
            )
            if self.log.try_append(record):
                return record
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 0.5)
        raise CommitConflictError(
            f"{self.root}: could not commit revision {request.name!r} after "
            f"{MAX_COMMIT_ATTEMPTS} attempts: the log kept moving; nothing was committed"
        )
