"""How data files are laid out: files sized by rows, toward the size compactions aim at, each
sorted by the id columns and cut into row groups sized for streaming.

A row group is the smallest unit a Parquet reader decodes, streams or skips by its min/max
statistics: a streamed read holds about one per file in flight, and an id lookup reads only
the row groups whose id range holds an id (files sorted by the ids keep those ranges
narrow). Files written before this layout hold a file's rows in one row group; a compaction
rewrites them (``laid_out_for_streaming``). Engine-free (the CLI shows the default without
Spark)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..log.records import Revision
from ..read.plan.ranges import clustered_by_id
from ..storage.base import Storage
from ..storage.footer import stored_file

if TYPE_CHECKING:
    from ..read.plan.scans import MergePlan

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
#: a column chunk's dictionary, at most: a dictionary pays off when it holds far fewer values
#: than the row group has rows (32 KiB: 4,096 doubles, a quarter of a row group). Parquet's
#: default (1 MiB) lets a column of distinct values fill a dictionary in every row group and
#: then rewrite it plain, which made a write of small row groups more than 2x slower
#: (docs/benchmarks/index.md, "Row groups")
DICTIONARY_PAGE_BYTES = 32 * 2**10


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


def laid_out_for_streaming(storage: Storage, files: Sequence[str]) -> bool:
    """Whether no row group of ``files`` holds more than ``ROW_GROUP_ROWS`` rows: the layout
    the engine writes. Files of an earlier release hold up to a file's rows (500,000 and
    more) in one row group, which a reader can neither stream nor skip in parts. One ranged
    read of each file's footer; a file that cannot be read counts as laid out (the file
    gate reports it when a read or a compaction scans it)."""
    return all(
        (stored_file(storage, path).largest_row_group or 0) <= ROW_GROUP_ROWS for path in files
    )


def compaction_needed(storage: Storage, plan: MergePlan) -> bool:
    """Whether a compaction of the state ``plan`` reads would change its files: revisions lie
    on its base, or an earlier release wrote the base's files: without their stats in the
    log, not clustered by id (files whose id ranges overlap), or not laid out for streaming
    (read from their footers, only when nothing lies on the base)."""
    if plan.on_base or not _stats_logged(plan) or not clustered_by_id(plan.base):
        return True
    return not laid_out_for_streaming(storage, plan.base.files)


def _stats_logged(plan: MergePlan) -> bool:
    """Whether the entry of ``plan``'s base recorded its files' stats (``file_stats``)."""
    if plan.compaction is not None:
        return plan.compaction.write.file_stats is not None
    base = next((r for r in plan.merge if r.sequence == plan.base.sequence), None)
    return base is None or base.tables[plan.table].file_stats is not None
