"""RevisionedDataset: commit revisions, read any state, read changes."""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from os import PathLike

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructField, StructType

from .errors import (
    CommitConflictError,
    ConsumerPositionConflictError,
    DuplicateIdError,
    DuplicateRevisionNameError,
    IdColumnsError,
    NoMajorRevisionError,
    NullIdError,
    RevisionsError,
    SchemaMismatchError,
    UnknownRevisionError,
    UnknownTableError,
)
from .log import RevisionLog, log_frame
from .merge import (
    DELETED,
    REVISION_COLUMNS,
    MergeStrategy,
    blank_deletions,
    merge_revisions,
    table_schema,
)
from .records import Revision, TableWrite, UpstreamPosition, canonical_json
from .selection import (
    HEAD_PATTERN,
    Position,
    Selection,
    changes_by_sequence,
    changes_by_time,
    resolve_position,
    state_selection,
    table_history,
)
from .storage import Storage, open_storage
from .timeutil import TimeLike, now_utc, to_utc
from .validation import (
    check_compatible,
    check_name,
    data_schema,
    normalize_id_columns,
)

log = logging.getLogger(__name__)

MAX_COMMIT_ATTEMPTS = 64
#: marker created exclusively in a revision folder before any data is written to it
CLAIM_FILE = "_claimed"


@dataclass(frozen=True)
class TableInfo:
    name: str
    id_columns: tuple[str, ...]
    schema: StructType


@dataclass(frozen=True)
class ChangeSet:
    """The result of a change read.

    ``df`` has the table's columns plus ``_deleted``; when ``is_reset`` it is the full state
    and consumers must replace, not merge. ``until_sequence`` is the head the read was
    pinned to: a consumer records it as its new position.
    """

    df: DataFrame
    is_reset: bool
    revisions: tuple[Revision, ...]
    table: str = ""
    since_sequence: int | None = None
    until_sequence: int = 0
    major: Revision | None = None


@dataclass
class _StagedTable:
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


@dataclass
class _CommitRequest:
    name: str
    custom_name: bool
    timestamp: datetime
    is_major: bool
    version: str | None
    producer: dict[str, str]
    upstream: tuple[UpstreamPosition, ...]
    expected_positions: dict[tuple[str, str], int]
    properties: dict[str, str]
    staged: list[_StagedTable] = field(default_factory=list)


class RevisionedDataset:
    """A revisioned dataset at ``root``: opens it, or creates it on the first commit.

    ``id_columns``: one list for every table, or a dict ``{table: [ids]}`` that also
    declares the tables this handle may write. Reads never modify the handle; each read
    and commit first catches up with revisions committed by others.
    """

    def __init__(
        self,
        root: str | PathLike[str] | Storage,
        spark: SparkSession | None = None,
        id_columns: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
        *,
        merge_strategy: MergeStrategy = "auto",
        storage_options: Mapping[str, object] | None = None,
    ):
        self.storage = open_storage(root, **dict(storage_options or {}))
        self.root = self.storage.uri
        self._spark = spark
        self._default_ids, self._declared = normalize_id_columns(id_columns)
        self.merge_strategy = merge_strategy
        self._log = RevisionLog(self.storage)
        self._log.refresh()
        self._heal_description()

    def __repr__(self) -> str:
        return f"RevisionedDataset({self.root!r}, head={self._log.head})"

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from ..spark import build_spark_session

            self._spark = SparkSession.getActiveSession() or build_spark_session()
        return self._spark

    def _heal_description(self) -> None:
        """A writer that died right after its commit left description.parquet stale: fix it."""
        try:
            if not self._log.description_is_current():
                self._log.publish_description()
        except (RevisionsError, OSError) as exc:  # read-only access: reads do not need it
            log.warning(
                "%s: description.parquet is stale and cannot be rewritten: %s", self.root, exc
            )

    # -- the log --------------------------------------------------------------------------

    def refresh(self) -> tuple[Revision, ...]:
        return self._log.refresh()

    @property
    def head_sequence(self) -> int:
        self.refresh()
        return self._log.head

    def log(self) -> pd.DataFrame:
        """One row per committed revision, in sequence order (the SPEC §2 columns)."""
        return log_frame(self.refresh())

    def revisions(self, table: str | None = None) -> list[Revision]:
        records = self.refresh()
        if table is None:
            return list(records)
        return table_history(records, table)

    def revision(self, ref: Position) -> Revision:
        """A revision by name, sequence, ``HEAD`` or ``HEAD~n`` (n back in the whole log)."""
        records = self.refresh()
        match = HEAD_PATTERN.match(ref) if isinstance(ref, str) else None
        if match:
            index = len(records) - 1 - int(match.group(1) or 0)
        else:
            index = resolve_position(records, "", ref) - 1
        if not 0 <= index < len(records):
            raise UnknownRevisionError(f"{ref!r}: no such revision (the log has {len(records)})")
        return records[index]

    def tables(self) -> dict[str, TableInfo]:
        """Every table with its id columns and its current schema (latest major + additions)."""
        records = self.refresh()
        out = {}
        for name in sorted({t for r in records for t in r.tables}):
            history = table_history(records, name)
            try:
                current = state_selection(history, name).merge
            except NoMajorRevisionError:
                current = tuple(history)
            out[name] = TableInfo(
                name, history[-1].tables[name].id_columns, table_schema(current, name)
            )
        return out

    def upstream_position(self, dataset: str, table: str, consumer_table: str | None = None) -> int:
        """The last upstream sequence this dataset recorded as consumed (0 if none)."""
        return _position(self.refresh(), dataset, table, consumer_table)

    # -- reads ----------------------------------------------------------------------------

    def read(
        self,
        table: str,
        as_of: TimeLike | None = None,
        at: Position = None,
        with_revision: bool = False,
    ) -> DataFrame:
        """The state of ``table`` as of a time and/or pinned at a position (SPEC §3)."""
        records = self.refresh()
        history = table_history(records, table)
        selection = state_selection(
            history,
            table,
            to_utc(as_of, "as_of") if as_of is not None else None,
            resolve_position(records, table, at),
        )
        return self._merge(selection, keep_deleted=False, with_revision=with_revision)

    def changes(
        self,
        table: str,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        *,
        since_sequence: int | None = None,
        until_sequence: int | None = None,
        at: Position = None,
        with_revision: bool = False,
    ) -> ChangeSet:
        """Changes in (since, until], or since a sequence up to a pinned head (SPEC §3)."""
        records = self.refresh()
        history = table_history(records, table)
        by_sequence = since_sequence is not None or until_sequence is not None
        if by_sequence and (since is not None or until is not None or at is not None):
            raise ValueError("changes(): give either since/until (times) or *_sequence, not both")
        if by_sequence:
            head = until_sequence if until_sequence is not None else self._log.head
            head = resolve_position(records, table, head)
            selection = changes_by_sequence(history, table, since_sequence, head)
        else:
            selection = changes_by_time(
                history,
                table,
                to_utc(since, "since") if since is not None else None,
                to_utc(until, "until") if until is not None else None,
                resolve_position(records, table, at),
            )
        ids = list(history[-1].tables[table].id_columns)
        if not selection.window:
            df = self._empty_changes(table_schema(selection.merge, table), with_revision)
        elif selection.is_reset:
            df = self._merge(selection, keep_deleted=False, with_revision=with_revision)
            df = df.withColumn(DELETED, F.lit(False))
        else:
            df = self._merge(selection, keep_deleted=True, with_revision=with_revision)
            df = blank_deletions(df, ids)
        system = [c for c in (DELETED, *REVISION_COLUMNS) if c in df.columns]
        df = df.select(*[c for c in df.columns if c not in system], *system)
        return ChangeSet(
            df=df,
            is_reset=selection.is_reset,
            revisions=selection.window,
            table=table,
            since_sequence=since_sequence,
            until_sequence=selection.head_sequence,
            major=selection.major,
        )

    def _merge(self, selection: Selection, *, keep_deleted: bool, with_revision: bool):
        return merge_revisions(
            self.spark,
            self.storage,
            selection.table,
            selection.merge,
            keep_deleted=keep_deleted,
            with_revision=with_revision,
            only_ids_of=selection.window if selection.restrict else None,
            strategy=self.merge_strategy,
        )

    def _empty_changes(self, schema: StructType, with_revision: bool) -> DataFrame:
        df = self.spark.createDataFrame([], schema).withColumn(DELETED, F.lit(False))
        if with_revision:
            df = df.withColumns(
                {
                    "_revision": F.lit(None).cast("string"),
                    "_revision_timestamp": F.lit(None).cast("timestamp"),
                    "_revision_sequence": F.lit(None).cast("long"),
                }
            )
        return df

    # -- commit ---------------------------------------------------------------------------

    def commit(
        self,
        tables: Mapping[str, DataFrame],
        timestamp: TimeLike,
        is_major: bool,
        version: str | Mapping[str, str] | None = None,
        name: str | None = None,
        *,
        producer: Mapping[str, str] | None = None,
        upstream: Sequence[UpstreamPosition] = (),
        expected_positions: Mapping[tuple[str, str], int] | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> Revision | None:
        """Write ``tables`` as one revision and commit it to the log (SPEC §4).

        Returns the committed revision, or None when every table is empty (nothing is
        committed) — unless ``upstream`` moves a consumer position: then an empty revision
        records the position, so a consumer whose new input yields no output is not left
        lagging. Raises a RevisionsError subclass on bad input; a failed commit leaves
        the dataset exactly as it was.
        """
        request = self._prepare(
            tables,
            timestamp,
            is_major,
            version,
            name,
            producer,
            upstream,
            expected_positions,
            properties,
        )
        self._claim_folder(request.name)  # from here on the folder is ours to clean up
        try:
            for staged in request.staged:
                self._write_table(request.name, staged, tables[staged.table])
            if not any(s.rows for s in request.staged):
                if not self._moves_positions(request):
                    log.info("%s: no rows in %s; nothing committed", self.root, sorted(tables))
                    self.storage.delete_tree(request.name)
                    return None
                # a consumer whose new input produced no output still records how far it read
            else:
                request.staged = [s for s in request.staged if s.rows or request.is_major]
            record = self._commit_record(request)
        except BaseException:
            self.storage.delete_tree(request.name)
            raise
        try:
            self._log.after_commit()
        except Exception as exc:  # the revision is committed; upkeep is retried on the next commit
            log.warning(
                "%s: revision %s committed, but log upkeep failed: %s", self.root, record.name, exc
            )
        return record

    def _moves_positions(self, request: _CommitRequest) -> bool:
        records = self.refresh()
        return any(
            p.sequence > _position(records, p.dataset, p.table, s.table)
            for p in request.upstream
            for s in request.staged
        )

    def _prepare(
        self,
        tables,
        timestamp,
        is_major,
        version,
        name,
        producer,
        upstream,
        expected_positions,
        properties,
    ) -> _CommitRequest:
        if not tables:
            raise RevisionsError("commit() needs at least one table")
        custom = name is not None
        request = _CommitRequest(
            name=check_name(name, "revision") if custom else uuid.uuid4().hex,
            custom_name=custom,
            timestamp=to_utc(timestamp, "timestamp"),
            is_major=bool(is_major),
            version=version if isinstance(version, str) or version is None else None,
            producer={k: str(v) for k, v in (producer or {}).items() if v is not None},
            upstream=tuple(upstream),
            expected_positions=dict(expected_positions or {}),
            properties={k: str(v) for k, v in (properties or {}).items()},
        )
        records = self.refresh()
        for table, df in tables.items():
            check_name(table, "table")
            ids = self._id_columns_for(records, table)
            schema = data_schema(table, df.schema, ids)
            table_version = version.get(table) if isinstance(version, Mapping) else version
            staged = _StagedTable(table, ids, schema, table_version)
            if not request.is_major and DELETED in df.columns:
                self._complete_for_tombstones(records, staged)
            request.staged.append(staged)
        self._check_against_log(records, request)
        return request

    def _claim_folder(self, name: str) -> None:
        """Take the revision folder atomically: two writers of one custom name never share it."""
        token = uuid.uuid4().hex.encode()  # unique: a retried PUT recognizes only its own claim
        if not self.storage.create_exclusive(f"{name}/{CLAIM_FILE}", token):
            raise DuplicateRevisionNameError(
                f"revision folder {name!r} already exists under {self.root} (another writer "
                "uses this name, or an uncommitted attempt left it): pick another name"
            )

    @staticmethod
    def _complete_for_tombstones(records: Sequence[Revision], staged: _StagedTable) -> None:
        """Tombstone rows need only ids: fill the current columns the data lacks with nulls."""
        history = [r for r in records if staged.table in r.tables]
        if not any(r.is_major for r in history):
            return  # reported by _check_against_log
        current = table_schema(state_selection(history, staged.table).merge, staged.table)
        given = set(staged.schema.fieldNames())
        staged.filled = tuple(f.name for f in current.fields if f.name not in given)
        if staged.filled:
            extra = [f for f in staged.schema.fields if f.name not in current.fieldNames()]
            mine = {f.name: f for f in staged.schema.fields}
            staged.schema = StructType([mine.get(f.name, f) for f in current.fields] + extra)

    def _id_columns_for(self, records: Sequence[Revision], table: str) -> tuple[str, ...]:
        if self._declared is not None and table not in self._declared:
            raise UnknownTableError(
                f"table {table!r} is not declared for {self.root}; "
                f"declared: {sorted(self._declared)}"
            )
        given = self._declared[table] if self._declared is not None else self._default_ids
        existing = next(
            (r.tables[table].id_columns for r in reversed(records) if table in r.tables), None
        )
        if existing is not None and given is not None and tuple(given) != existing:
            raise IdColumnsError(
                f"table {table!r} has id columns {list(existing)}, not {list(given)}"
            )
        ids = given or existing
        if not ids:
            raise IdColumnsError(
                f"table {table!r} is new: give its id columns, "
                "e.g. RevisionedDataset(root, id_columns=['id'])"
            )
        return tuple(ids)

    def _check_against_log(self, records: Sequence[Revision], request: _CommitRequest) -> None:
        """The rules that depend on the log; re-checked on every commit attempt."""
        if request.custom_name and any(r.name == request.name for r in records):
            raise DuplicateRevisionNameError(
                f"revision name {request.name!r} is already taken in {self.root}"
            )
        for staged in request.staged:
            history = [r for r in records if staged.table in r.tables]
            if request.is_major:
                continue
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
        consumer_tables = [s.table for s in request.staged]
        for position in request.upstream:
            current = max(
                (_position(records, position.dataset, position.table, t) for t in consumer_tables),
                default=0,
            )
            if position.sequence < current:
                raise ConsumerPositionConflictError(
                    f"{self.root}: position in {position.key} would go back from {current} to "
                    f"{position.sequence}; positions never decrease"
                )
        for (dataset, table), expected in request.expected_positions.items():
            current = max(
                (_position(records, dataset, table, t) for t in consumer_tables), default=0
            )
            if current != expected:
                raise ConsumerPositionConflictError(
                    f"{self.root}: expected to consume {dataset}#{table} from sequence "
                    f"{expected}, but {current} is already recorded (another run committed it)"
                )

    def _write_table(self, revision_name: str, staged: _StagedTable, df: DataFrame) -> None:
        """Write one table's files with Spark, then validate and count them from the files."""
        staged.prefix = f"{revision_name}/{staged.table}"
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
        self._validate_written(staged)

    def _validate_written(self, staged: _StagedTable) -> None:
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

    def _commit_record(self, request: _CommitRequest) -> Revision:
        """Append the log entry, guarded by "the head is still what I read"; retry on conflict."""
        delay = 0.005
        for _attempt in range(MAX_COMMIT_ATTEMPTS):
            records = self._log.refresh()
            self._check_against_log(records, request)
            record = Revision(
                name=request.name,
                timestamp=request.timestamp,
                is_major=request.is_major,
                version=request.version
                if request.version is not None
                else _common_version(request.staged),
                sequence=self._log.head + 1,
                committed_at=now_utc(),
                tables={
                    s.table: TableWrite(
                        id_columns=s.id_columns,
                        schema_json=canonical_json(s.schema.jsonValue()),
                        version=s.version,
                        rows=s.rows,
                        tombstones=s.tombstones,
                        files=s.files,
                        bytes=s.bytes,
                    )
                    for s in request.staged
                },
                producer=request.producer,
                upstream=request.upstream,
                properties=request.properties,
            )
            if self._log.try_append(record):
                return record
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 0.5)
        raise CommitConflictError(
            f"{self.root}: could not commit revision {request.name!r} after "
            f"{MAX_COMMIT_ATTEMPTS} attempts: the log kept moving; nothing was committed"
        )


def _common_version(staged: Sequence[_StagedTable]) -> str | None:
    versions = {s.version for s in staged}
    return versions.pop() if len(versions) == 1 else None


def _position(
    records: Sequence[Revision], dataset: str, table: str, consumer_table: str | None
) -> int:
    best = 0
    for r in records:
        if consumer_table is not None and consumer_table not in r.tables:
            continue
        seq = r.position_in(dataset, table)
        if seq is not None and seq > best:
            best = seq
    return best


__all__ = ["ChangeSet", "RevisionedDataset", "TableInfo"]
