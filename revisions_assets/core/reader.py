"""DatasetReader: the reads of ``RevisionedDataset`` without Spark, as Polars DataFrames.

The same log walking and read planning as the Spark engine (``read.requests``,
``read.selection``): the same rows, the same errors. Only the merge is Polars
(``read.polars_merge``), in this process. With ``cache_dir`` a read first downloads the
files it needs, and only those, into a local cache (``read.download_cache``), which an
offline reader reads alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from .arguments import check_bool, check_options, check_text
from .errors import (
    ArgumentTypeError,
    DatasetNotFoundError,
    InvalidArgumentError,
    MissingFileError,
    NoMajorRevisionError,
    NotCachedError,
    RevisionsError,
    StorageError,
)
from .log.layout import LOG_DIR
from .log.records import Revision
from .log.revision_log import RevisionLog
from .log.view import LogView
from .read.data_files import PARQUET_MAGIC, corrupt_file_error
from .read.download_cache import DownloadCache
from .read.polars_merge import plan_columns, table_columns
from .read.polars_reads import PolarsChangeSet, PolarsReads
from .read.requests import change_read, find_revision, history_read, state_read
from .read.selection import Position, ReadPlan, head_plan, plan_read
from .storage.backends import open_storage
from .storage.base import LocalStorage, Storage
from .timeutil import TimeLike
from .uris import describe


@dataclass(frozen=True)
class ReaderTableInfo:
    """A table: its id columns and its current schema as Polars types."""

    name: str
    id_columns: tuple[str, ...]
    schema: dict[str, pl.DataType]


class DatasetReader:
    """Reads a revisioned dataset in this process, without a JVM (see the module doc).

    ``root``: a local path, ``file://`` or ``s3://`` URI; ``storage_options`` as for
    ``RevisionedDataset`` (S3 endpoint and credentials). ``cache_dir``: a local folder
    where reads keep the files they fetched (an S3 root without one uses a temporary
    folder). ``offline=True`` reads only ``cache_dir``: the log and files an earlier online
    reader cached; the root is never touched. Every online read first catches up with the
    log; the reader never writes to the root.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        storage_options: Mapping[str, object] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        offline: bool = False,
    ):
        options = check_options(storage_options, "storage_options")
        self.offline = check_bool(offline, "offline")
        if cache_dir is not None and not isinstance(cache_dir, str | os.PathLike):
            raise ArgumentTypeError(f"cache_dir must be a path or None, got {describe(cache_dir)}")
        if self.offline and cache_dir is None:
            raise InvalidArgumentError(
                "offline=True reads only the download cache: give cache_dir, the folder an "
                "online reader cached the dataset in"
            )
        if self.offline:
            self.root = os.fspath(root)
            self._source: Storage | None = None
            self._cache: DownloadCache | None = DownloadCache(cache_dir, None)  # type: ignore[arg-type]
            self._log = RevisionLog(self._cache.storage())
        else:
            self._source = open_storage(root, **options)
            self.root = self._source.uri
            if cache_dir is None and not isinstance(self._source, LocalStorage):
                cache_dir = tempfile.mkdtemp(prefix="revisions-reader-")
                weakref.finalize(self, shutil.rmtree, cache_dir, ignore_errors=True)
            self._cache = DownloadCache(cache_dir, self._source) if cache_dir else None
            self._log = RevisionLog(self._source)
        self._reads = PolarsReads(self._local, self.root)
        self._checked: set[str] = set()  # data files found to end as Parquet does
        self._refresh()
        if self._log.head == 0:
            if self.offline:
                raise NotCachedError(
                    f"{self._cache.folder if self._cache else cache_dir}: no cached log of "
                    f"{self.root}; open the reader online with this cache_dir first"
                )
            raise DatasetNotFoundError(f"{self.root} is not a revisioned dataset (no {LOG_DIR}/)")
        if self._cache is not None and not self.offline:
            self._cache.prune(self._log.view().live_files())

    def __repr__(self) -> str:
        mode = ", offline" if self.offline else ""
        return f"DatasetReader({self.root!r}, head={self._log.head}{mode})"

    # -- the log --------------------------------------------------------------------------

    def _refresh(self) -> tuple[Revision, ...]:
        """Catch up with the log (online), mirroring it into the cache when it moved."""
        if self.offline and self._log.head:
            return self._log.records
        head = self._log.head
        records = self._log.refresh()
        if self._cache is not None and not self.offline and self._log.head != head:
            self._cache.save_log(records)
        return records

    @property
    def head_sequence(self) -> int:
        self._refresh()
        return self._log.head

    def log(self) -> pl.DataFrame:
        """One row per log entry, as ``RevisionedDataset.log()``."""
        self._refresh()
        return pl.from_arrow(self._log.description())  # type: ignore[return-value]

    def revisions(self, table: str | None = None) -> list[Revision]:
        """Every log entry (maintenance entries included), or the data revisions of a table."""
        check_text(table, "table", optional=True)
        records = self._refresh()
        return list(records) if table is None else self._log.view().history(table)

    def revision(self, ref: Position) -> Revision:
        """An entry by name or sequence, or a data revision by ``HEAD`` or ``HEAD~n``."""
        return find_revision(self._refresh(), ref)

    def tables(self) -> dict[str, ReaderTableInfo]:
        """Every table with its id columns and its current schema (latest major + additions)."""
        self._refresh()
        view = self._log.view()
        out = {}
        for name in view.tables():
            ids = view.history(name)[-1].tables[name].id_columns
            out[name] = ReaderTableInfo(name, ids, _current_columns(view, name))
        return out

    # -- reads ----------------------------------------------------------------------------

    def read(
        self,
        table: str,
        *,
        as_of: TimeLike | None = None,
        at: Position = None,
        columns: Sequence[str] | None = None,
        with_revision: bool = False,
    ) -> pl.DataFrame:
        """The state of ``table`` as of a time and/or pinned at a position (SPEC §3), as
        ``RevisionedDataset.read``; ``columns``: the value columns to return (the id
        columns always come first)."""
        records = self._refresh()
        view = self._log.view()
        request = state_read(records, view, table, as_of, at, with_revision)
        frame = self._reads.merge(
            view,
            request.selection,
            request.what,
            keep_deleted=False,
            with_revision=with_revision,
            columns=columns,
        )
        return self._collect(frame, request.what)

    def changes(
        self,
        table: str,
        *,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        since_sequence: int | None = None,
        until_sequence: int | None = None,
        at: Position = None,
        with_revision: bool = False,
        only_changed: bool = False,
    ) -> PolarsChangeSet:
        """Changes in (since, until], or since a sequence up to a pinned head, as
        ``RevisionedDataset.changes`` (``.df`` with ``_deleted``, ``.is_reset``,
        ``.until_sequence``, ``.changed`` on a reset)."""
        records = self._refresh()
        view = self._log.view()
        request = change_read(
            records,
            view,
            table,
            since,
            until,
            since_sequence=since_sequence,
            until_sequence=until_sequence,
            at=at,
            with_revision=with_revision,
            only_changed=only_changed,
        )
        try:
            return self._reads.changes(
                view, request, only_changed=only_changed, with_revision=with_revision
            )
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise self._read_error(request.what, exc) from exc

    def history(
        self, table: str, *, since: TimeLike | None = None, until: TimeLike | None = None
    ) -> pl.DataFrame:
        """The SCD2 history of ``table``, as ``RevisionedDataset.history``."""
        self._refresh()
        view = self._log.view()
        plan, since_utc = history_read(view, self.root, table, since, until)
        frame_of = self._reads.history
        try:
            return frame_of(table, view.history(table), plan, since_utc)
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise self._read_error(f"history of table {table!r}", exc) from exc

    def download(
        self, table: str, *, as_of: TimeLike | None = None, at: Position = None
    ) -> list[Path]:
        """Fetch into the cache the files a ``read(table, as_of=..., at=...)`` needs, and
        only those; returns their local paths (a read then needs no download)."""
        if self._cache is None:
            raise InvalidArgumentError(
                f"download(): the reader of {self.root} has no cache_dir to download into"
            )
        records = self._refresh()
        view = self._log.view()
        request = state_read(records, view, table, as_of, at, False)
        plan = plan_read(view, request.selection, f"{self.root}: {request.what}")
        return [Path(p) for p in self._local(_plan_files(plan))]

    # -- files ----------------------------------------------------------------------------

    def _local(self, files: Sequence[str]) -> list[str]:
        """Local paths of data files: in the cache (fetched first) or in a local root."""
        if self._cache is not None:
            paths = [Path(p) for p in self._cache.local(files, self._owner)]
        else:
            source = self._source
            assert isinstance(source, LocalStorage)
            paths = [source.local_path(f) for f in files]
        for rel, path in zip(files, paths, strict=True):
            if rel in self._checked:
                continue
            if not path.is_file():
                raise MissingFileError(
                    f"{self.root}: data file {rel} of revision {self._owner(rel)!r} is missing: "
                    "the dataset is damaged; run `revisions verify` and see 'Recovering a "
                    "damaged dataset' in the docs"
                )
            with open(path, "rb") as fh:  # a file that is not Parquet: say which (data_files)
                fh.seek(max(0, fh.seek(0, os.SEEK_END) - len(PARQUET_MAGIC)))
                if fh.read() != PARQUET_MAGIC:
                    table = rel.split("/")[-2]
                    raise corrupt_file_error(self.root, self._owner(rel), table, rel)
            self._checked.add(rel)
        return [str(p) for p in paths]

    def _owner(self, rel: str) -> str:
        """The name of the entry whose files include ``rel`` (for error messages)."""
        for record in self._log.view().records:
            if any(rel in write.files for write in record.tables.values()):
                return record.name
        return "?"

    def _collect(self, frame: pl.LazyFrame, what: str) -> pl.DataFrame:
        try:
            return frame.collect()
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise self._read_error(what, exc) from exc

    def _read_error(self, what: str, exc: Exception) -> RevisionsError:
        if isinstance(exc, RevisionsError):
            return exc
        return StorageError(f"{self.root}: {what} failed reading its data files: {exc}")


def _plan_files(plan: ReadPlan) -> list[str]:
    """Every data file a read plan scans."""
    files = [f for r in plan.direct for f in r.tables[plan.table].files]
    if plan.base is not None:
        files += plan.base.write.files
    for r in plan.only_ids_of or ():
        files += r.tables[plan.table].files
    return list(dict.fromkeys(files))


def _current_columns(view: LogView, table: str) -> dict[str, pl.DataType]:
    """The schema a read of ``table`` at the head returns (``spark_merge.current_schema``)."""
    try:
        return plan_columns(head_plan(view, table))
    except NoMajorRevisionError:
        return table_columns(view.history(table), table)
