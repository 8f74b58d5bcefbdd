"""What a Parquet file's footer says, read from its last bytes: its row count and the rows of
its largest row group (or the whole footer, with its row groups' statistics), or why it
cannot be read (missing, not Parquet, a footer that does
not parse). No data is read.

One ranged read per file fetches its last 64 KiB, enough for the footer of every file
revisions-assets writes (a larger footer costs a second read).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from .base import Storage

#: the last (and first) four bytes of every Parquet file
PARQUET_MAGIC = b"PAR1"
#: how many last bytes one read fetches: the footer of the files written here fits
FOOTER_READ = 64 * 1024


@dataclass(frozen=True)
class StoredFile:
    """What a data file's footer says: its rows, or why it cannot be read."""

    path: str
    rows: int | None = None
    #: the rows of its largest row group (the unit a reader streams or skips)
    largest_row_group: int | None = None
    #: None: readable; "missing"; else what is wrong with its bytes
    problem: str | None = None


def stored_file(storage: Storage, path: str) -> StoredFile:
    """The rows (and those of its largest row group) a Parquet file's footer records, or its
    problem (missing, not Parquet, a footer that does not parse)."""
    meta = footer(storage, path)
    if isinstance(meta, str):
        return StoredFile(path, problem=meta)
    groups = (meta.row_group(g).num_rows for g in range(meta.num_row_groups))
    return StoredFile(path, rows=meta.num_rows, largest_row_group=max(groups, default=0))


def footer(storage: Storage, path: str) -> pq.FileMetaData | str:
    """A Parquet file's footer (its row groups, their statistics), or its problem: "missing",
    or what is wrong with its bytes."""
    tail = storage.read_tail(path, FOOTER_READ)
    if tail is None:
        return "missing"
    if len(tail) < 12 or tail[-4:] != PARQUET_MAGIC:
        return "its last bytes are not PAR1"
    length = int.from_bytes(tail[-8:-4], "little")
    if length + 12 > len(tail) == FOOTER_READ:  # a larger footer: fetch all of it
        tail = storage.read_tail(path, length + 12) or b""
    if length + 12 > len(tail):  # the whole file is shorter than its footer claims
        return f"its footer claims {length} bytes, more than the file"
    try:  # the footer alone, behind a magic: a file Arrow parses without the data
        return pq.read_metadata(pa.BufferReader(PARQUET_MAGIC + tail[-(length + 8) :]))
    except (pa.ArrowException, OSError, ValueError) as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"its footer does not parse ({detail})"


__all__ = ["FOOTER_READ", "PARQUET_MAGIC", "StoredFile", "footer", "stored_file"]
