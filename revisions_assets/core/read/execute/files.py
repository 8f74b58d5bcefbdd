"""The file gate: the data files a read plans exist and are Parquet, checked by their last
bytes, before either executor scans them.

Spark reads lazily and reports a missing or damaged file only when a job runs, as a raw
JVM error without the revision; Polars as a bare ``ComputeError``. The gate checks each
planned file's four magic bytes first (a ranged read on an object store), so a damaged
dataset fails with a ``MissingFileError`` or ``CorruptFileError`` naming the file, its
revision and its table, in one wording for both handles. Data files are immutable: a
handle checks each file once (``FileGate.checked``). The reader's gate first fetches the
files into its download cache and checks the copies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from ...errors import CorruptFileError, MissingFileError
from ...storage.base import LocalStorage, Storage
from ...storage.footer import PARQUET_MAGIC

_THREADS = 8  # ranged reads of the last bytes in flight on an object store
#: what to do about a damaged data file, in every message that reports one
REPAIR = (
    "the dataset is damaged; run `revisions verify` and see 'Recovering a damaged dataset' "
    "in the docs"
)

#: fetches files into a local copy before they are checked: (paths, the entry that wrote
#: each path) -> None
Fetch = Callable[[Sequence[str], Callable[[str], str]], object]


def not_parquet(revision_name: str, table: str, path: str) -> str:
    """What is wrong with a data file whose last bytes are not Parquet's."""
    return (
        f"data file {path} of revision {revision_name!r}, table {table!r}, is not a Parquet "
        "file (its last bytes are not PAR1)"
    )


def corrupt_file_error(root: str, revision_name: str, table: str, path: str) -> CorruptFileError:
    return CorruptFileError(f"{root}: {not_parquet(revision_name, table, path)}: {REPAIR}")


def missing_file_error(
    root: str, revision_name: str, table: str, path: str, more: int = 0
) -> MissingFileError:
    """A data file the log references is gone (``more``: how many others are too)."""
    others = f" (and {more} more)" if more else ""
    return MissingFileError(
        f"{root}: data file {path} of revision {revision_name!r}, table {table!r}, is "
        f"missing{others}: {REPAIR}"
    )


class FileGate:
    """The data files one handle's reads may scan: each exists and ends as Parquet does.

    ``storage``: where the files are checked (the dataset's storage, or the reader's
    download cache); ``root``: how messages name the dataset; ``fetch``: brings the files
    into ``storage`` first (the reader's cache), or None.
    """

    def __init__(self, storage: Storage, root: str | None = None, fetch: Fetch | None = None):
        self.storage = storage
        self.root = root or storage.uri
        self.fetch = fetch
        #: data files found to exist and end as Parquet does
        self.checked: set[str] = set()

    def check(self, table: str, files: Iterable[tuple[str, str]]) -> None:
        """Raise MissingFileError naming the first missing file (and how many more are
        gone), else CorruptFileError for the first that is not Parquet; ``files`` are (the
        name of the entry that wrote it, path) pairs."""
        todo = dict((path, entry) for entry, path in files if path not in self.checked)
        if not todo:
            return
        if self.fetch is not None:
            self.fetch(list(todo), todo.__getitem__)
        paths = list(todo)
        if isinstance(self.storage, LocalStorage) or len(paths) == 1:
            tails = [self._tail(path) for path in paths]
        else:
            with ThreadPoolExecutor(min(_THREADS, len(paths))) as pool:
                tails = list(pool.map(self._tail, paths))
        missing = [path for path, tail in zip(paths, tails, strict=True) if tail is None]
        if missing:
            raise missing_file_error(
                self.root, todo[missing[0]], table, missing[0], len(missing) - 1
            )
        for path, tail in zip(paths, tails, strict=True):
            if tail != PARQUET_MAGIC:
                raise corrupt_file_error(self.root, todo[path], table, path)
            self.checked.add(path)

    def _tail(self, path: str) -> bytes | None:
        return self.storage.read_tail(path, len(PARQUET_MAGIC))
