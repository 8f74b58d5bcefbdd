"""Importing a dataset of the original layout (UpdatableDataset) with its whole history.

The source layout::

    src/description.parquet                  the log: name, timestamp, is_major, version
    src/<revision name>/<featurizer>/*.parquet   written by pandas; the index is the entity

Each featurizer becomes a table and the pandas index (recorded in the files' ``pandas``
metadata) its id columns. The import is planned on the driver first — the description,
one listing per revision and the Parquet footers — and checked there (names, id columns,
times), so a source it cannot import is refused before the target is touched; revisions
without any data are left out there. Then every revision is committed through the engine
with its name (all digits allowed), timestamp, major flag and version, in timestamp order
and, among equal timestamps, in reverse description order: the original reader let the
revision listed first win a tie, the engine lets the later commit win. The data goes
through Spark. Minors that come before every major in that order (backfilled before the
first major) are left out with a warning: the original reader never read them after that
major and raised ``NoMajorRevisionError`` before it, as the engine does.

Majors of the original layout are dataset-wide: a major without a featurizer's folder voids
that featurizer's older rows. Such a major is imported with an empty table for it, so every
read gives what the original reader gave. The source is only read.
"""

from __future__ import annotations

import json
import struct
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from os import PathLike
from typing import Any, Protocol

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, LongType

from ..errors import (
    CorruptLogError,
    DatasetNotEmptyError,
    DatasetNotFoundError,
    DuplicateRevisionNameError,
    IdColumnsError,
    NaiveTimestampError,
    NoMajorRevisionError,
)
from ..log.records import Revision
from ..log.revision_log import DESCRIPTION, LOG_DIR, read_parquet_bytes, table_frame
from ..read.execute.spark_scan import empty_frame, parquet_files
from ..spark_columns import column as spark_column
from ..storage.backends import open_storage
from ..storage.base import FileInfo, Storage
from ..write.validation import check_name

DESCRIPTION_COLUMNS = ("name", "timestamp", "is_major", "version")
#: Parquet footers are read from the end of a file: its tail, then more if the footer is longer
_TAIL = 64 * 1024
_NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"


class NaiveTimestampWarning(UserWarning):
    """The source's description has naive timestamps: they are taken in the given zone."""


class EmptyRevisionWarning(UserWarning):
    """A revision of the source holds no data for any featurizer: it is not imported."""


class MinorBeforeMajorWarning(UserWarning):
    """Minors of the source precede every major (backfilled minors): the original reader
    ignored them in every read after the first major and raised before it, so they are
    not imported."""


@dataclass(frozen=True)
class LegacyTable:
    """One featurizer folder of one revision: its files and how its columns are read."""

    files: tuple[str, ...]  # relative to the source root
    id_columns: tuple[str, ...]
    renames: Mapping[str, str]  # stored pandas index column -> id column
    dropped: tuple[str, ...]  # stored unnamed index levels that are not id columns
    nanos: Mapping[str, bool]  # nanosecond timestamp columns -> adjusted to UTC (aware)


@dataclass(frozen=True)
class LegacyRevision:
    """One row of the source's description, with what its folder holds."""

    name: str
    timestamp: datetime
    is_major: bool
    version: str | None
    tables: Mapping[str, LegacyTable]


class CommitTarget(Protocol):
    """What the import needs of the target dataset (a RevisionedDataset)."""

    root: str

    @property
    def head_sequence(self) -> int: ...

    @property
    def maintenance(self) -> Any: ...

    def _import_commit(
        self, tables, timestamp, is_major, version, name, after
    ) -> Revision | None: ...


@dataclass
class LegacyImport:
    """A checked plan: the source's revisions and the id columns of each table."""

    source: Storage
    revisions: list[LegacyRevision]
    id_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: minors that precede every major: not imported (their tables' schemas still count)
    skipped: list[LegacyRevision] = field(default_factory=list)

    @property
    def tables(self) -> list[str]:
        return sorted(self.id_columns)

    def run(
        self,
        target: CommitTarget,
        spark: SparkSession,
        progress: Callable[[LegacyRevision, Revision | None], None] | None = None,
    ) -> list[Revision]:
        """Commit every revision of the source to ``target`` (which must have none).

        Each commit requires that the log holds nothing but the import's own entries (its
        revisions and the compactions its ``compact_after`` policy wrote right after them):
        a commit of another writer meanwhile raises CommitConflictError."""
        if target.root == self.source.uri:
            raise DatasetNotEmptyError(f"{target.root}: the import target is the source itself")
        if target.head_sequence:
            raise DatasetNotEmptyError(
                f"{target.root} already has {target.head_sequence} revisions; import into a "
                "new root"
            )
        previous = spark.conf.get(_NANOS_AS_LONG, "false")
        spark.conf.set(_NANOS_AS_LONG, "true")  # pandas writes nanosecond timestamps
        committed = []
        last = 0  # the import's last entry: nothing else may be committed after it
        try:
            for revision in self.revisions:
                frames = {t: self._frame(spark, revision, t) for t in self._written(revision)}
                record = target._import_commit(
                    frames,
                    revision.timestamp,
                    revision.is_major,
                    revision.version,
                    revision.name,
                    after=last,
                )
                if record is not None:
                    last = record.sequence
                    for compaction in target.maintenance.last_compactions:
                        if compaction.sequence == last + 1:  # the policy's, right after it
                            last = compaction.sequence
                if record is None:
                    warnings.warn(
                        f"{self.source.uri}: revision {revision.name!r} holds no rows; the "
                        "engine records no empty revision, so it is not imported",
                        stacklevel=2,
                    )
                else:
                    committed.append(record)
                if progress is not None:
                    progress(revision, record)
        finally:
            spark.conf.set(_NANOS_AS_LONG, previous)
        return committed

    def _written(self, revision: LegacyRevision) -> list[str]:
        """A major writes every table (empty when it has no folder for it); a minor its own."""
        return self.tables if revision.is_major else sorted(revision.tables)

    def _frame(self, spark: SparkSession, revision: LegacyRevision, table: str) -> DataFrame:
        part = revision.tables.get(table)
        if part is None:  # a major without this featurizer: it empties the table
            donor = next(r for r in [*self.revisions, *self.skipped] if table in r.tables)
            return empty_frame(spark, self._frame(spark, donor, table).schema)
        df = parquet_files(spark, [self.source.spark_uri(f) for f in part.files])
        df = df.drop(*part.dropped).withColumnsRenamed(dict(part.renames))
        converted = {
            column: _from_nanos(column, aware)
            for column, aware in part.nanos.items()
            if column in df.columns
        }
        return df.withColumns(converted) if converted else df


def plan_import(
    src: str | PathLike[str],
    *,
    id_columns: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
    tz: str = "UTC",
    storage_options: Mapping[str, object] | None = None,
) -> LegacyImport:
    """Read and check the source (driver only: description, listings, footers)."""
    storage = open_storage(src, **dict(storage_options or {}))
    raw = storage.read(DESCRIPTION)
    if raw is None:
        raise DatasetNotFoundError(
            f"{storage.uri}: no {DESCRIPTION}; not a dataset of the original layout"
        )
    if storage.exists(f"{LOG_DIR}/{1:020d}.json"):
        raise DatasetNotFoundError(
            f"{storage.uri} is already a revisioned dataset (it has a {LOG_DIR}/): nothing to "
            "import"
        )
    plan = LegacyImport(storage, [])
    described = _description(storage.uri, raw, tz)
    for name, stamp, is_major, version in described:
        check_name(name, "revision", digits=True)
        if any(r.name == name for r in plan.revisions):
            raise DuplicateRevisionNameError(f"{storage.uri}: revision {name!r} appears twice")
        tables = _revision_tables(storage, name, id_columns)
        if not tables:  # the original reads a revision without data as no rows
            warnings.warn(
                f"{storage.uri}: revision {name!r} holds no data for any featurizer; the "
                "engine records no empty revision, so it is not imported",
                EmptyRevisionWarning,
                stacklevel=2,
            )
            continue
        plan.revisions.append(LegacyRevision(name, stamp, is_major, version, tables))
        for table, part in tables.items():
            known = plan.id_columns.setdefault(table, part.id_columns)
            if known != part.id_columns:
                raise IdColumnsError(
                    f"{storage.uri}: featurizer {table!r} has id columns {list(known)} in "
                    f"earlier revisions but {list(part.id_columns)} in {name!r}"
                )
    # the original reader ranks revisions by timestamp, and among equal timestamps the one
    # listed first in the description wins; the engine ranks by (timestamp, commit order):
    # committing in timestamp order, ties in reverse description order, gives every read
    # what the original reader gave
    order = {r.name: n for n, r in enumerate(plan.revisions)}
    plan.revisions.sort(key=lambda r: (r.timestamp, -order[r.name]))
    first_major = next((n for n, r in enumerate(plan.revisions) if r.is_major), None)
    if plan.revisions and first_major is None:
        raise NoMajorRevisionError(
            f"{storage.uri}: no revision is a major (the earliest is {plan.revisions[0].name!r}); "
            "the original reader could read none of it, and the engine needs a major first"
        )
    if first_major:
        # the original reader cut every read at the newest major it saw: reads after the
        # first major never reached these minors, and reads before it raised
        plan.skipped, plan.revisions = plan.revisions[:first_major], plan.revisions[first_major:]
        warnings.warn(
            f"{storage.uri}: minor revision(s) "
            f"{', '.join(repr(r.name) for r in plan.skipped)} precede every major; the "
            f"original reader ignored them in every read after the first major "
            f"({plan.revisions[0].name!r}) and raised NoMajorRevisionError before it, so they "
            "are not imported",
            MinorBeforeMajorWarning,
            stacklevel=2,
        )
    return plan


def _description(uri: str, raw: bytes, tz: str) -> list[tuple[str, datetime, bool, str | None]]:
    try:
        frame = table_frame(read_parquet_bytes(raw))
    except (pa.ArrowException, ValueError) as exc:
        raise CorruptLogError(f"{uri}: {DESCRIPTION} is unreadable: {exc}") from exc
    missing = [c for c in DESCRIPTION_COLUMNS if c not in frame.columns]
    if missing:
        raise CorruptLogError(
            f"{uri}: {DESCRIPTION} lacks the column(s) {missing} of the original layout "
            f"({', '.join(DESCRIPTION_COLUMNS)})"
        )
    stamps = pd.to_datetime(frame["timestamp"])
    if stamps.dt.tz is None:
        try:
            stamps = stamps.dt.tz_localize(tz)
        except Exception as exc:  # unknown zone, or a time that does not exist there
            raise NaiveTimestampError(
                f"{uri}: cannot take the naive timestamps of {DESCRIPTION} in {tz!r}: {exc}"
            ) from exc
        warnings.warn(
            f"{uri}: {DESCRIPTION} has naive timestamps; they are taken in {tz}",
            NaiveTimestampWarning,
            stacklevel=3,
        )
    stamps = stamps.dt.tz_convert("UTC")
    return [
        (
            str(name),
            stamp.to_pydatetime(),
            bool(major),
            None if version is None or pd.isna(version) else str(version),
        )
        for name, stamp, major, version in zip(
            frame["name"], stamps, frame["is_major"], frame["version"], strict=True
        )
    ]


def _revision_tables(
    storage: Storage, name: str, id_columns: Sequence[str] | Mapping[str, Sequence[str]] | None
) -> dict[str, LegacyTable]:
    by_table: dict[str, list[FileInfo]] = {}
    for info in storage.list_files(name):
        parts = info.path.split("/")
        if len(parts) < 3 or not parts[-1].endswith(".parquet") or parts[-1][0] in "._":
            continue
        by_table.setdefault(parts[1], []).append(info)
    out = {}
    for table, files in sorted(by_table.items()):
        check_name(table, "table")
        given = id_columns.get(table) if isinstance(id_columns, Mapping) else id_columns
        given = (given,) if isinstance(given, str) else given
        smallest = min(files, key=lambda f: f.size)
        schema = _parquet_schema(storage, smallest.path)
        out[table] = _read_plan(
            f"{storage.uri}: featurizer {table!r} of revision {name!r}",
            [f.path for f in files],
            schema,
            tuple(given) if given else None,
        )
    return out


def _read_plan(
    where: str, files: list[str], schema: pa.Schema, given: tuple[str, ...] | None
) -> LegacyTable:
    """How to read one featurizer's files: id columns from the pandas index, or ``given``."""
    meta = json.loads((schema.metadata or {}).get(b"pandas", b"{}"))
    stored = [c for c in meta.get("index_columns", []) if isinstance(c, str)]  # not RangeIndex
    names = {c.get("field_name"): c.get("name") for c in meta.get("columns", [])}
    unnamed = [c for c in stored if names.get(c) is None]
    renames: dict[str, str] = {}
    if given is None:
        if not stored or unnamed:
            kind = "an unnamed index" if stored else "no stored index (a RangeIndex)"
            raise IdColumnsError(
                f"{where}: the pandas data has {kind}; give the id columns "
                "(id_columns=[...], --id-columns)"
            )
        ids = tuple(stored)
    elif all(c in schema.names for c in given):
        ids = given
    elif len(unnamed) == len(given) and not set(given) & set(schema.names):
        ids, renames = given, dict(zip(unnamed, given, strict=True))
    else:
        raise IdColumnsError(
            f"{where}: id columns {list(given)} are neither columns of the data "
            f"({[n for n in schema.names if n not in unnamed]}) nor names for its "
            f"{len(unnamed)} unnamed index level(s)"
        )
    nanos = {
        renames.get(f.name, f.name): f.type.tz is not None
        for f in schema
        if pa.types.is_timestamp(f.type) and f.type.unit == "ns"
    }
    dropped = tuple(c for c in unnamed if c not in renames)
    return LegacyTable(tuple(files), ids, renames, dropped, nanos)


def _parquet_schema(storage: Storage, rel: str) -> pa.Schema:
    """The Arrow schema (with the pandas metadata) from a file's footer, not its data."""
    tail = storage.read_tail(rel, _TAIL) or b""
    if len(tail) < 12 or tail[-4:] != b"PAR1":
        raise CorruptLogError(f"{storage.uri}: {rel} is not a Parquet file")
    length = struct.unpack("<I", tail[-8:-4])[0]
    if length + 8 > len(tail):
        tail = storage.read_tail(rel, length + 8) or b""
    footer = tail[-(length + 8) :]
    return pq.read_schema(pa.BufferReader(b"PAR1" + footer))


def _from_nanos(column: str, aware: bool):
    """A nanosecond timestamp read as a long (pandas' default) as a Spark timestamp."""
    # an exact integral division: a long divided by a long is a double in Spark, which
    # holds today's nanoseconds since 1970 to 256 ns only; a decimal truncates as ``div``
    micros = (spark_column(column).cast(DecimalType(20, 0)) / 1000).cast(LongType())
    if aware:
        return F.timestamp_micros(micros)
    epoch = F.lit("1970-01-01 00:00:00").cast("timestamp_ntz")
    return F.timestamp_add("MICROSECOND", micros, epoch)
