"""What a Parquet file's footer says, read from its last bytes: its row count, its row groups,
the min and max of chosen columns, where the footer lies and a digest of its bytes, or why
it cannot be read (missing, not Parquet, a footer that does not parse, row groups that do
not add up to the rows it claims). No data is read.

One ranged read per file fetches its last 64 KiB, enough for the footer of every file
revisions-assets writes (a larger footer costs a second read); a caller that knows the
footer's length (the log records it) fetches exactly the footer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .base import Storage

#: the last (and first) four bytes of every Parquet file
PARQUET_MAGIC = b"PAR1"
#: how many last bytes one read fetches: the footer of the files written here fits
FOOTER_READ = 64 * 1024
#: what follows the footer: its length (4 bytes, little-endian) and the magic
FOOTER_TRAILER = 8


@dataclass(frozen=True)
class StoredFile:
    """What a data file's footer says: its rows, or why it cannot be read."""

    path: str
    rows: int | None = None
    #: the rows of its largest row group (the unit a reader streams or skips)
    largest_row_group: int | None = None
    #: None: readable; "missing"; else what is wrong with its bytes
    problem: str | None = None
    #: the file's size in bytes (None: missing)
    size: int | None = None
    #: where the footer (Parquet's Thrift ``FileMetaData``) starts, and its length: bytes
    #: ``[footer_offset, size)`` are the footer, its length and the closing magic
    footer_offset: int | None = None
    footer_length: int | None = None
    #: the sha256 (hex) of the footer's bytes (``footer_length`` bytes at ``footer_offset``)
    footer_sha256: str | None = None
    #: the parsed footer (None unless readable)
    metadata: pq.FileMetaData | None = field(default=None, compare=False, repr=False)


def stored_file(
    storage: Storage,
    path: str,
    footer_length: int | None = None,
    tail_read: int = FOOTER_READ,
) -> StoredFile:
    """The rows (and those of its largest row group) a Parquet file's footer records, where
    its footer lies and its digest, or its problem (missing, not Parquet, a footer that
    does not parse). ``footer_length``: the footer's expected length, so that one read
    fetches it exactly; else the first read fetches the last ``tail_read`` bytes (a file
    whose footer is longer costs a second read)."""
    want = tail_read if footer_length is None else footer_length + FOOTER_TRAILER
    got = storage.read_tail_sized(path, want)
    if got is None:
        return StoredFile(path, problem="missing")
    tail, size = got
    if len(tail) < 12 or tail[-4:] != PARQUET_MAGIC:
        return StoredFile(path, problem="its last bytes are not PAR1", size=size)
    length = int.from_bytes(tail[-8:-4], "little")
    if length + FOOTER_TRAILER > len(tail) and len(tail) < size:  # a larger footer: fetch it
        again = storage.read_tail_sized(path, length + FOOTER_TRAILER)
        tail, size = again if again is not None else (b"", size)
    if length + FOOTER_TRAILER + 4 > size or length + FOOTER_TRAILER > len(tail):
        # the whole file is shorter than its footer (and the opening magic) claims
        problem = f"its footer claims {length} bytes, more than the file"
        return StoredFile(path, problem=problem, size=size)
    footer = tail[len(tail) - FOOTER_TRAILER - length : len(tail) - FOOTER_TRAILER]
    try:  # the footer alone, behind a magic: a file Arrow parses without the data
        meta = pq.read_metadata(pa.BufferReader(PARQUET_MAGIC + footer + tail[-8:]))
    except (pa.ArrowException, OSError, ValueError) as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StoredFile(path, problem=f"its footer does not parse ({detail})", size=size)
    groups = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    if sum(groups) != meta.num_rows:  # what a reader decodes is the row groups' count
        problem = f"its footer claims {meta.num_rows} rows, its row groups hold {sum(groups)}"
        return StoredFile(path, problem=problem, size=size)
    return StoredFile(
        path,
        rows=meta.num_rows,
        largest_row_group=max(groups, default=0),
        size=size,
        footer_offset=size - FOOTER_TRAILER - length,
        footer_length=length,
        footer_sha256=hashlib.sha256(footer).hexdigest(),
        metadata=meta,
    )


def chunk_bounds(meta: pq.FileMetaData, group: int, leaf: int) -> tuple[Any, Any] | None:
    """The min and max of one column chunk (leaf column ``leaf`` of row group ``group``)
    from the footer's statistics, as pyarrow gives them; None where they are not kept (Spark
    writes none for INT96 timestamps) or are of a type pyarrow cannot give."""
    stats = meta.row_group(group).column(leaf).statistics
    try:
        return (stats.min, stats.max) if stats is not None and stats.has_min_max else None
    except (TypeError, ValueError, pa.ArrowException):
        return None


def column_bounds(
    meta: pq.FileMetaData, columns: Sequence[str]
) -> dict[str, tuple[Any, Any] | None]:
    """The min and max of each top-level column over every row group, from the footer's
    statistics (``chunk_bounds``); None for a column whose statistics some row group lacks,
    or of a file without rows."""
    index = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    bounds: dict[str, tuple[Any, Any] | None] = {}
    for column in columns:
        at = index.get(column)
        low = high = None
        known = at is not None and meta.num_row_groups > 0
        for group in range(meta.num_row_groups if known else 0):
            if meta.row_group(group).num_rows == 0:
                continue
            found = chunk_bounds(meta, group, at)  # type: ignore[arg-type]
            if found is None:
                known = False
                break
            lo, hi = found
            low = lo if low is None or lo < low else low
            high = hi if high is None or hi > high else high
        bounds[column] = (low, high) if known and low is not None else None
    return bounds


def footer(storage: Storage, path: str) -> pq.FileMetaData | str:
    """A Parquet file's footer (its row groups, their statistics), or its problem: "missing",
    or what is wrong with its bytes."""
    found = stored_file(storage, path)
    return found.problem if found.problem is not None else found.metadata


__all__ = [
    "FOOTER_READ",
    "FOOTER_TRAILER",
    "PARQUET_MAGIC",
    "StoredFile",
    "chunk_bounds",
    "column_bounds",
    "footer",
    "stored_file",
]
