"""The statistics of data files: read from their footers right after a write, recorded in
the log (``TableWrite.file_stats``), and checked against the stored files.

* ``read_file_stats``: the ``FileStats`` of freshly written files, one ranged read of each
  footer (in threads on an object store), never the data.
* ``logged_file_stats``: the stats of any logged write: recorded, or, for entries written
  before the log recorded them, read from the footers once (``FooterStatsCache``, one
  per handle: ``RevisionLog.file_stats``).
* ``stats_difference``: whether a stored file is still the one the log recorded (its size,
  its footer's rows and digest): what the file gate, ``verify`` and ``find_misplaced``
  compare; ``check_stored_file`` reads one file's footer (one ranged read of exactly the
  footer) and compares it.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ..errors import CorruptFileError, MissingFileError
from ..storage.base import LocalStorage, Storage
from ..storage.footer import FOOTER_READ, StoredFile, column_bounds, stored_file
from .records import FileStats, TableWrite, decode_id_value, encode_id_value, id_types

_THREADS = 8  # footers fetched at once from an object store
#: the last bytes one read of a freshly written file fetches (``written_files``): its whole
#: footer, however many row groups it has (a file of a million rows has some 60, and a
#: footer near 100 KiB; files of earlier releases, one row group, fit ``FOOTER_READ``)
WRITTEN_TAIL_READ = 2**20
_T = TypeVar("_T")
_R = TypeVar("_R")

#: footers read for writes whose entries recorded no stats, by path (files are immutable)
FooterStatsCache = MutableMapping[str, FileStats]


def in_threads(storage: Storage, work: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
    """``work`` over ``items`` in order: in threads where each call is a network round trip
    (an object store), in this thread on a local filesystem or for one item."""
    if isinstance(storage, LocalStorage) or len(items) <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(min(_THREADS, len(items))) as pool:
        return list(pool.map(work, items))


def stats_of_footer(
    stored: StoredFile, id_columns: Sequence[str], types: Sequence[str]
) -> FileStats:
    """The stats a readable footer gives (``stored_file``); ValueError for an unreadable one."""
    if stored.problem is not None or stored.metadata is None:
        raise ValueError(f"{stored.path}: {stored.problem}")
    bounds = column_bounds(stored.metadata, id_columns)
    low, high = [], []
    for column, type_name in zip(id_columns, types, strict=True):
        found = bounds[column]
        lo, hi = (None, None) if found is None else found
        lo, hi = encode_id_value(type_name, lo), encode_id_value(type_name, hi)
        known = lo is not None and hi is not None  # as the log reads them back
        low.append(decode_id_value(type_name, lo) if known else None)
        high.append(decode_id_value(type_name, hi) if known else None)
    assert stored.size is not None and stored.footer_offset is not None
    return FileStats(
        path=stored.path,
        rows=stored.rows or 0,
        bytes=stored.size,
        row_groups=stored.metadata.num_row_groups,
        footer_offset=stored.footer_offset,
        footer_length=stored.footer_length or 0,
        footer_sha256=stored.footer_sha256 or "",
        id_min=tuple(low),
        id_max=tuple(high),
    )


def read_file_stats(
    storage: Storage,
    paths: Sequence[str],
    id_columns: Sequence[str],
    schema_json: str,
    tail_read: int = FOOTER_READ,
) -> tuple[FileStats, ...]:
    """The stats of ``paths`` from their footers (one ranged read of each file's last
    ``tail_read`` bytes, a second one for a longer footer; in threads on an object store).
    MissingFileError or CorruptFileError for a file gone or not Parquet."""
    types = id_types(schema_json, id_columns)
    stored = in_threads(
        storage, lambda path: stored_file(storage, path, tail_read=tail_read), paths
    )
    for state in stored:
        if state.problem == "missing":
            raise MissingFileError(f"{storage.uri}: data file {state.path} is missing")
        if state.problem is not None:
            raise CorruptFileError(f"{storage.uri}: data file {state.path}: {state.problem}")
    return tuple(stats_of_footer(state, id_columns, types) for state in stored)


def logged_file_stats(
    storage: Storage, write: TableWrite, cache: FooterStatsCache | None = None
) -> tuple[FileStats, ...]:
    """The stats of every file of ``write``, aligned with ``write.files``: as recorded, or
    (entries written before the log recorded them) read from the footers, once per path
    and ``cache``. MissingFileError or CorruptFileError for a file that cannot give them."""
    if write.file_stats is not None:
        return write.file_stats
    cache = {} if cache is None else cache
    todo = [path for path in dict.fromkeys(write.files) if path not in cache]
    if todo:
        for found in read_file_stats(storage, todo, write.id_columns, write.schema_json):
            cache[found.path] = found
    return tuple(cache[path] for path in write.files)


def read_footer(storage: Storage, path: str, stats: FileStats | None) -> StoredFile:
    """A data file's footer (``stored_file``): exactly the footer, one ranged read of the
    length the log recorded, where ``stats`` are known; else its last bytes."""
    return stored_file(storage, path, footer_length=None if stats is None else stats.footer_length)


def stats_difference(stats: FileStats, state: StoredFile) -> str | None:
    """How a readable stored file differs from the one the log recorded when it was written:
    its size, its footer's rows and its footer's digest (a file rewritten with the same rows
    but other values has another footer: other statistics, other offsets); None when it is
    the same file.

    The one comparison of a file with its stats, for reads (the file gate), rewrites,
    ``verify`` and ``find_misplaced``."""
    differs = []
    if state.rows != stats.rows:
        differs.append(f"its footer records {state.rows} rows, the log records {stats.rows}")
    if state.size != stats.bytes:
        differs.append(f"it holds {state.size} bytes, the log records {stats.bytes}")
    if state.footer_sha256 != stats.footer_sha256:
        differs.append("its footer differs from the one recorded at commit")
    return "; ".join(differs) or None


def check_stored_file(storage: Storage, stats: FileStats) -> StoredFile:
    """The stored file against what the log recorded when it was written
    (``stats_difference``), with one ranged read of exactly the footer. The ``problem`` of
    the result says what differs (None: the same file; "missing")."""
    state = read_footer(storage, stats.path, stats)
    difference = None if state.problem is not None else stats_difference(stats, state)
    if difference is None:
        return state
    problem = f"it was rewritten after its commit ({difference})"
    return StoredFile(
        stats.path, problem=problem, size=state.size, rows=state.rows, metadata=state.metadata
    )


__all__ = [
    "WRITTEN_TAIL_READ",
    "FooterStatsCache",
    "check_stored_file",
    "in_threads",
    "logged_file_stats",
    "read_file_stats",
    "read_footer",
    "stats_difference",
    "stats_of_footer",
]
