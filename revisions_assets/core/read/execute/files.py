"""The file gate: the data files a read plans exist, are Parquet, and their footers agree
with the log, checked before either executor scans them.

Spark reads lazily and reports a missing or damaged file only when a job runs, as a raw
JVM error without the revision; Polars as a bare ``ComputeError``; and a file holding
other rows than the log records is read as if it were right (a few bytes on disk can claim
millions of rows, which a reader then decodes). The gate reads each planned file's footer
first (one ranged read of its last bytes on an object store, ``storage/footer.py``): a
damaged dataset fails with a ``MissingFileError`` or ``CorruptFileError`` naming the file,
its revision and its table, in one wording for both handles, before any data is decoded.

Where the log recorded the statistics of a write's files (``FileStats``), each file must be
the one its commit recorded: its size, its footer's rows and the sha256 of its footer
(``stats_difference``; the stats give the footer's length, so one ranged read fetches
exactly the footer). A file rewritten with the same rows but other values has another
footer (other statistics, other offsets) and is refused (``rewritten_file_error``). For
entries written before the log recorded them, the footers of the files one entry wrote
must hold the rows the entry records (``footer_disagreement``), as for every write. Data
files are immutable: a handle checks each write once (``FileGate.checked``). The reader's
gate first fetches the files into its download cache and checks the copies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ...errors import CorruptFileError, MissingFileError
from ...log.file_stats import in_threads, read_footer, stats_difference
from ...log.records import FileStats
from ...storage.base import Storage
from ...storage.footer import StoredFile
from ..plan.scans import ScanTask

#: what to do about a damaged data file, in every message that reports one
REPAIR = (
    "the dataset is damaged; run `revisions verify` and see 'Recovering a damaged dataset' "
    "in the docs"
)
#: what to do about a data file whose contents are not what was committed
RESTORE = "restore it from a backup (it was replaced or changed outside revisions-assets)"

#: fetches files into a local copy before they are checked: (paths, the entry that wrote
#: each path) -> None
Fetch = Callable[[Sequence[str], Callable[[str], str]], object]


def not_parquet(
    revision_name: str, table: str, path: str, problem: str = "its last bytes are not PAR1"
) -> str:
    """What is wrong with a data file whose footer cannot be read (``StoredFile.problem``)."""
    return (
        f"data file {path} of revision {revision_name!r}, table {table!r}, is not a Parquet "
        f"file ({problem})"
    )


def corrupt_file_error(
    root: str, revision_name: str, table: str, path: str, problem: str | None = None
) -> CorruptFileError:
    """A data file that is not Parquet (``problem``: what its footer says is wrong)."""
    message = not_parquet(revision_name, table, path, *([problem] if problem else []))
    return CorruptFileError(f"{root}: {message}: {REPAIR}")


def missing_file_error(
    root: str, revision_name: str, table: str, path: str, more: int = 0
) -> MissingFileError:
    """A data file the log references is gone (``more``: how many others are too)."""
    others = f" (and {more} more)" if more else ""
    return MissingFileError(
        f"{root}: data file {path} of revision {revision_name!r}, table {table!r}, is "
        f"missing{others}: {REPAIR}"
    )


def damaged_file_error(
    root: str, revision_name: str, table: str, path: str, problem: str
) -> CorruptFileError:
    """A data file whose bytes a Spark job found damaged (``spark_errors.damaged_file``):
    other values than were committed, or bytes that fail their checksum."""
    return CorruptFileError(
        f"{root}: data file {path} of revision {revision_name!r}, table {table!r}: {problem}: "
        f"{RESTORE} (a compaction's: `revisions compact ROOT --rebuild {revision_name}`); "
        "`revisions verify --deep` lists every damaged file, see 'Recovering a damaged "
        "dataset' in the docs"
    )


@dataclass(frozen=True)
class Disagreement:
    """Files of one log entry whose footers hold other rows than the entry records."""

    paths: tuple[str, ...]  #: the files at fault
    held: int  #: the rows their footers hold
    recorded: int  #: the rows the log records for them


def footer_disagreement(
    files: Sequence[str], rows: int, stored: Mapping[str, StoredFile]
) -> Disagreement | None:
    """How the readable footers of the files one log entry wrote to a table disagree with
    what it records; None when they agree.

    The one comparison of footers with the log, for reads, rewrites and ``verify``. The
    log records a write's rows (tombstones included): files that together hold another
    number were replaced or truncated; which of them is not known, so all are named.
    """
    held = sum(stored[f].rows or 0 for f in files)
    return None if held == rows else Disagreement(tuple(files), held, rows)


def disagreement_error(
    root: str, task: ScanTask, table: str, wrong: Disagreement
) -> CorruptFileError:
    """A write whose footers disagree with the log (``footer_disagreement``)."""
    paths = wrong.paths
    shown = ", ".join(paths[:3]) + (f" (and {len(paths) - 3} more)" if len(paths) > 3 else "")
    one = len(paths) == 1
    files = f"data file {shown}" if one else f"data files {shown}"
    hold = "holds" if one else "hold"
    footers = "its footer" if one else "their footers"
    return CorruptFileError(
        f"{root}: {files} of revision {task.entry!r}, table {table!r}, {hold} {wrong.held} "
        f"rows by {footers}, the log records {wrong.recorded}: refused before reading any "
        f"row; {RESTORE}, or commit a new major of the table; {REPAIR}"
    )


def rewritten_file_error(
    root: str, task: ScanTask, table: str, path: str, difference: str
) -> CorruptFileError:
    """A data file that is not the one its commit recorded (``stats_difference``)."""
    fix = (
        f"{RESTORE} (a compaction's: `revisions compact ROOT --rebuild {task.entry}`)"
        if task.is_compaction
        else f"{RESTORE}, or commit a new major of the table"
    )
    return CorruptFileError(
        f"{root}: data file {path} of revision {task.entry!r}, table {table!r}, was rewritten "
        f"after its commit ({difference}): refused before reading any row; {fix}; {REPAIR}"
    )


class FileGate:
    """The data files one handle's reads may scan: each exists, is Parquet, each file whose
    stats the log recorded is the one its commit recorded, and the footers of each write
    hold the rows the log records.

    ``storage``: where the files are checked (the dataset's storage, or the reader's
    download cache); ``root``: how messages name the dataset; ``fetch``: brings the files
    into ``storage`` first (the reader's cache), or None; ``keep_footer``: given each
    footer checked (the reader's scans of an object store read files by it).
    """

    def __init__(
        self,
        storage: Storage,
        root: str | None = None,
        fetch: Fetch | None = None,
        keep_footer: Callable[[StoredFile], None] | None = None,
    ):
        self.storage = storage
        self.root = root or storage.uri
        self.fetch = fetch
        self.keep_footer = keep_footer
        #: (entry, files) of the writes found whole: their files exist, are Parquet and
        #: hold the rows the log records
        self.checked: set[tuple[str, tuple[str, ...]]] = set()
        #: the files of those writes (each resolved inside the root when it was read)
        self.checked_files: set[str] = set()

    def check(self, table: str, tasks: Iterable[ScanTask]) -> None:
        """Raise MissingFileError naming the first missing file (and how many more are
        gone), else CorruptFileError for the first file that is not Parquet or whose footer
        does not parse, else for the first file that differs from its stats, else for the
        first write whose footers disagree with the log. ``tasks``: the writes a plan scans
        (its ``scanned``)."""
        todo = {}
        for task in tasks:
            key = (task.entry, task.files)
            if key not in self.checked:
                todo.setdefault(key, task)
        if not todo:
            return
        writer: dict[str, ScanTask] = {}
        recorded: dict[str, FileStats] = {}
        for task in todo.values():
            for n, path in enumerate(task.files):
                writer.setdefault(path, task)
                if task.file_stats is not None:
                    recorded.setdefault(path, task.file_stats[n])
        paths = list(writer)
        if self.fetch is not None:
            self.fetch(paths, lambda path: writer[path].entry)
        footers = in_threads(
            self.storage, lambda path: read_footer(self.storage, path, recorded.get(path)), paths
        )
        stored = dict(zip(paths, footers, strict=True))
        missing = [f.path for f in footers if f.problem == "missing"]
        if missing:
            entry = writer[missing[0]].entry
            raise missing_file_error(self.root, entry, table, missing[0], len(missing) - 1)
        for state in footers:
            if state.problem is not None:
                entry = writer[state.path].entry
                raise corrupt_file_error(self.root, entry, table, state.path, state.problem)
        for path in paths:
            known = recorded.get(path)
            difference = None if known is None else stats_difference(known, stored[path])
            if difference is not None:
                raise rewritten_file_error(self.root, writer[path], table, path, difference)
        for key, task in todo.items():
            wrong = footer_disagreement(task.files, task.rows, stored)
            if wrong is not None:
                raise disagreement_error(self.root, task, table, wrong)
            self.checked.add(key)
            self.checked_files.update(task.files)
        if self.keep_footer is not None:
            for found in footers:
                self.keep_footer(found)
