"""How data files are laid out: files sized by rows, toward the size compactions aim at, each
sorted by the id columns and cut into row groups sized for streaming.

A row group is the smallest unit a Parquet reader decodes, streams or skips by its min/max
statistics: a streamed read holds about one per file in flight, and an id lookup reads only
the row groups whose id range holds an id (files sorted by the ids keep those ranges
narrow). Engine-free (the CLI shows the default without Spark)."""

from __future__ import annotations

from collections.abc import Sequence

from ..log.records import Revision

#: the size a compaction aims its files at, and a large revision's files too
DEFAULT_TARGET_FILE_BYTES = 128 * 2**20
#: the rows of a file of a table's first revision (later ones: ``rows_per_file``)
FIRST_FILE_ROWS = 1_000_000
#: the rows of a row group: chosen by measuring Polars' streaming peak memory and Spark's
#: read speed side by side (docs/benchmarks/index.md, "Row groups")
ROW_GROUP_ROWS = 16_384
#: and at most about this many bytes (as the writer buffers them, before compression), so
#: that wide rows stream in bounded memory too
ROW_GROUP_BYTES = 8 * 2**20


#: the newest writes of a table whose bytes per row size a file, beside its latest major's
RECENT_WRITES = 16


def rows_per_file(
    revisions: Sequence[Revision], table: str, target_bytes: int = DEFAULT_TARGET_FILE_BYTES
) -> int:
    """How many rows of ``table`` make a file of about ``target_bytes`` (the size compactions
    aim at), at the bytes per row of the write with the most rows among the table's latest
    major and its newest writes (small files are mostly footer); ``FIRST_FILE_ROWS`` before
    any row was written. Only those writes are parsed: a fresh handle on a long log reads
    the rest lazily, and a commit must not pay for the whole history."""
    writing = [r for r in revisions if table in r.tables]
    major = next((r for r in reversed(writing) if r.is_major), None)
    candidates = [*([major] if major is not None else []), *writing[-RECENT_WRITES:]]
    largest = max((r.tables[table] for r in candidates), key=lambda w: w.rows, default=None)
    if largest is None or not largest.rows or not largest.bytes:
        return FIRST_FILE_ROWS
    return max(1, target_bytes * largest.rows // largest.bytes)
