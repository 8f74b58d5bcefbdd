"""How many rows a data file holds: files sized by rows, toward the size compactions aim at.

Engine-free (the CLI shows the default without Spark)."""

from __future__ import annotations

from collections.abc import Sequence

from ..log.records import Revision

#: the size a compaction aims its files at, and a large revision's files too
DEFAULT_TARGET_FILE_BYTES = 128 * 2**20
#: the rows of a file of a table's first revision (later ones: ``rows_per_file``)
FIRST_FILE_ROWS = 1_000_000


def rows_per_file(
    revisions: Sequence[Revision], table: str, target_bytes: int = DEFAULT_TARGET_FILE_BYTES
) -> int:
    """How many rows of ``table`` make a file of about ``target_bytes`` (the size compactions
    aim at), at the bytes per row of the revision that wrote the most rows (small files are
    mostly footer); ``FIRST_FILE_ROWS`` before any row was written."""
    writes = [r.tables[table] for r in revisions if table in r.tables]
    largest = max(writes, key=lambda w: w.rows, default=None)
    if largest is None or not largest.rows or not largest.bytes:
        return FIRST_FILE_ROWS
    return max(1, target_bytes * largest.rows // largest.bytes)
