"""Small helpers shared by the engine tests: building tiny frames and collecting tiny results."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote, urlparse

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from harness.frames import frame  # noqa: F401 (the engine tests import it from here)
from pyspark.sql import DataFrame
from pyspark.sql.types import LongType, StructField, StructType

from revisions_assets import Revision, TableWrite, UpstreamPosition
from revisions_assets.core.log.file_stats import read_file_stats
from revisions_assets.core.log.records import canonical_json
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.write.file_size import FIRST_FILE_ROWS, ROW_GROUP_ROWS


def by_id(df: DataFrame, *columns: str, id_column: str = "id") -> dict:
    """Collect a tiny result as {id: tuple(columns)} and insist ids are unique."""
    rows = df.select(id_column, *columns).collect()
    out = {row[0]: tuple(row[1:]) for row in rows}
    assert len(out) == len(rows), f"duplicate ids in result: {sorted(r[0] for r in rows)}"
    return out


def input_files(df: DataFrame, root: str) -> set[str]:
    """The files a DataFrame reads, relative to the dataset root ('/'-separated)."""
    base = Path(root).resolve()
    out = set()
    for uri in df.inputFiles():
        path = Path(unquote(urlparse(uri).path)).resolve()
        out.add(path.relative_to(base).as_posix())
    return out


def top_dirs(paths: Iterable[str]) -> set[str]:
    """The first path component of each path: the revision folder of a data file."""
    return {p.split("/", 1)[0] for p in paths}


def tree(root: str, sub: str = "") -> list[str]:
    """Every file below root/sub, relative to root, sorted (to prove nothing changed)."""
    base = Path(root)
    top = base / sub
    if not top.exists():
        return []
    return sorted(
        (Path(d) / f).relative_to(base).as_posix() for d, _, fs in os.walk(top) for f in fs
    )


def micros(value: datetime) -> int:
    """Microseconds since 1970 of an aware datetime (Spark's unix_micros, computed apart)."""
    return (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


#: the recorded schema of a staged table: what a commit of "id long, v long" records
STAGED_SCHEMA = canonical_json(
    StructType([StructField("id", LongType()), StructField("v", LongType())]).jsonValue()
)


def stage_revision(
    log: RevisionLog,
    root: str,
    name: str,
    timestamp: datetime,
    is_major: bool,
    rows: Mapping[tuple, Mapping[str, object] | None],
    table: str = "t",
    upstream: Sequence[UpstreamPosition] = (),
    committed_at: datetime | None = None,
) -> Revision:
    """Commit a revision through the log layer, without Spark: ``{(id,): {"v": v} or None}``.

    The data file (columns id, v, _deleted, written by pyarrow) and the log entry (with the
    file's stats) are laid out exactly as a commit lays them out; the entry is appended
    put-if-absent at ``log.head + 1``. Many revisions cost milliseconds instead of Spark
    jobs. ``committed_at``: a chosen commit time (default now), for tests of the commit axis.
    """
    path = f"{name}/{table}/part-00000.parquet"
    data = pa.table(
        {
            "id": pa.array([k[0] for k in rows], pa.int64()),
            "v": pa.array([None if r is None else r["v"] for r in rows.values()], pa.int64()),
            "_deleted": pa.array([r is None for r in rows.values()], pa.bool_()),
        }
    )
    target = Path(root) / path
    target.parent.mkdir(parents=True)
    pq.write_table(data, target)
    write = TableWrite(
        id_columns=("id",),
        schema_json=STAGED_SCHEMA,
        version="v1",
        rows=len(rows),
        tombstones=sum(r is None for r in rows.values()),
        files=(path,),
        bytes=target.stat().st_size,
        file_stats=read_file_stats(log.storage, (path,), ("id",), STAGED_SCHEMA),
    )
    record = Revision(
        name=name,
        timestamp=timestamp,
        is_major=is_major,
        sequence=log.head + 1,
        committed_at=committed_at or datetime.now(UTC),
        tables={table: write},
        version="v1",
        upstream=tuple(upstream),
    )
    assert log.try_append(record), f"entry {record.sequence} already taken"
    return record


def stage_frame(
    log: RevisionLog,
    root: str,
    name: str,
    timestamp: datetime,
    is_major: bool,
    rows: pl.DataFrame,
    schema: StructType,
    table: str = "t",
    stats: bool = True,
) -> Revision:
    """Commit ``rows`` (an ``id`` column, the columns of ``schema``, ``_deleted``) as a revision
    through the log layer, without Spark: millions of rows in a second or two, in the
    layout the engine writes (files of ``FIRST_FILE_ROWS`` rows sorted by ``id``, row groups
    of ``ROW_GROUP_ROWS`` rows, the entry appended at ``log.head + 1``); ``stats``: whether
    the entry records its files' statistics (an earlier release's did not)."""
    rows = rows.sort("id")
    files = []
    for n, offset in enumerate(range(0, rows.height, FIRST_FILE_ROWS)):
        path = f"{name}/{table}/part-{n:05d}.parquet"
        (Path(root) / path).parent.mkdir(parents=True, exist_ok=True)
        rows.slice(offset, FIRST_FILE_ROWS).write_parquet(
            Path(root) / path, compression="snappy", row_group_size=ROW_GROUP_ROWS
        )
        files.append(path)
    schema_json = canonical_json(schema.jsonValue())
    write = TableWrite(
        id_columns=("id",),
        schema_json=schema_json,
        version="v1",
        rows=rows.height,
        tombstones=int(rows["_deleted"].sum()),
        files=tuple(files),
        bytes=sum((Path(root) / f).stat().st_size for f in files),
        file_stats=read_file_stats(log.storage, files, ("id",), schema_json) if stats else None,
    )
    record = Revision(
        name=name,
        timestamp=timestamp,
        is_major=is_major,
        sequence=log.head + 1,
        committed_at=datetime.now(UTC),
        tables={table: write},
        version="v1",
    )
    assert log.try_append(record), f"entry {record.sequence} already taken"
    return record
