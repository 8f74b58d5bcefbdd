"""Whether the data files a read needs are Parquet at all: their last bytes, not their data.

Spark reads lazily and reports a file that is not Parquet only when a job runs, as a raw
JVM error (``FAILED_READ_FILE``) without the revision; Polars as a bare ``ComputeError``.
Checking each file's four magic bytes while planning turns a damaged file into a
``CorruptFileError`` naming the file, its revision and its table. Data files are
immutable, so a handle checks each file once (``checked``).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableSet
from concurrent.futures import ThreadPoolExecutor

from ...errors import CorruptFileError
from ...storage.base import LocalStorage, Storage
from ...storage.footer import PARQUET_MAGIC

_THREADS = 8  # ranged reads of the last bytes in flight on an object store


def not_parquet(revision_name: str, table: str, path: str) -> str:
    """What is wrong with a data file whose last bytes are not Parquet's."""
    return (
        f"data file {path} of revision {revision_name!r}, table {table!r}, is not a Parquet "
        "file (its last bytes are not PAR1)"
    )


def corrupt_file_error(root: str, revision_name: str, table: str, path: str) -> CorruptFileError:
    return CorruptFileError(
        f"{root}: {not_parquet(revision_name, table, path)}: the dataset is damaged; run "
        "`revisions verify` and see 'Recovering a damaged dataset' in the docs"
    )


def check_data_files(
    storage: Storage,
    table: str,
    files: Iterable[tuple[str, str]],
    checked: MutableSet[str],
) -> None:
    """Raise CorruptFileError for the first file that is not Parquet; ``files`` are (the
    name of the entry that wrote it, path) pairs; files in ``checked``
    are skipped and passing ones added to it (a missing file is left to the read, which
    names every missing file)."""
    todo = [(n, f) for n, f in dict((f, (n, f)) for n, f in files).values() if f not in checked]
    if not todo:
        return

    def tail(item: tuple[str, str]) -> bytes | None:
        return storage.read_tail(item[1], len(PARQUET_MAGIC))

    if isinstance(storage, LocalStorage) or len(todo) == 1:
        tails = [tail(item) for item in todo]
    else:
        with ThreadPoolExecutor(min(_THREADS, len(todo))) as pool:
            tails = list(pool.map(tail, todo))
    for (entry, path), last in zip(todo, tails, strict=True):
        if last is None:
            continue
        if last != PARQUET_MAGIC:
            raise corrupt_file_error(storage.uri, entry, table, path)
        checked.add(path)
