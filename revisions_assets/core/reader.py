"""DatasetReader: the reads of ``RevisionedDataset`` without Spark, with Polars.

The same plans as the Spark engine (``read/plan/``): the same rows, the same errors. The
Polars executor (``read/execute/polars.py``) runs them lazily in this process: a scan
(``read/scan.py``) converts to a ``LazyFrame`` whose projections and id filters reach the
Parquet scans (``to_polars``), streams (``to_batches``), or collects (``read``,
``to_arrow``). On object storage a read fetches byte ranges: each file's footer, the column
chunks it projects, the row groups its id filters keep (``read/execute/remote.py``). With
``cache_dir`` a read first downloads the files it needs, and only those, whole, into a
local cache (``read/execute/download_cache.py``), which an offline reader reads alone.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Unpack

import polars as pl
import pyarrow as pa

from .arguments import check_bool, check_count, check_options
from .errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    NotCachedError,
    RevisionsError,
    StorageError,
)
from .log.layout import not_a_dataset
from .log.records import Revision
from .log.revision_log import RevisionLog
from .log.view import LogView
from .read.execute.download_cache import DownloadCache
from .read.execute.files import FileGate
from .read.execute.polars import PolarsExecutor, polars_schema
from .read.execute.polars_ids import polars_id_bounds
from .read.execute.remote import remote_files
from .read.facade import DatasetReads
from .read.plan.pruning import IdBounds
from .read.plan.requests import ReadOptions
from .read.plan.schema import Schema
from .read.scan import Scan
from .storage.backends import open_storage
from .storage.base import LocalStorage, Storage
from .uris import describe

#: a table's schema as the reader gives it
PolarsSchema = dict[str, pl.DataType]


class DatasetReader(DatasetReads[pl.DataFrame, PolarsSchema]):
    """Reads a revisioned dataset in this process, without a JVM (see the module doc):
    ``scan``, ``read``, ``changes``, ``history``, ``as_of_join``, ``tables`` and
    ``revisions`` as ``RevisionedDataset`` gives them (``read/facade.py``), as Polars
    DataFrames; a scan converts to a lazy ``LazyFrame`` (``to_polars``) or a stream of Arrow
    batches.

    ``root``: a local path, ``file://`` or ``s3://`` URI; ``storage_options`` as for
    ``RevisionedDataset`` (S3 endpoint, region and credentials, or a ready boto3 ``client``:
    the reads use what it signs with). Without ``cache_dir``, a read of an ``s3://`` root
    fetches byte ranges and keeps nothing: each file's footer, the column chunks of the
    columns it reads, in the row groups its id filters keep. ``cache_dir``: a local folder
    where reads keep the files they fetch, whole: a read fetches the files of the revisions
    it needs and only those, each once; later reads of those revisions, and offline ones,
    fetch nothing. ``offline=True`` reads only ``cache_dir``: the log and files an earlier
    online reader cached; the root is never touched. Every online read first catches up
    with the log; the reader never writes to the root.
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
            absolute = self.root if "://" in self.root else os.path.abspath(self.root)
            self._log = RevisionLog(self._cache.storage(), root=absolute)  # positions
        else:
            self._source = open_storage(root, **options)
            self.root = self._source.uri
            self._cache = DownloadCache(cache_dir, self._source) if cache_dir else None
            self._log = RevisionLog(self._source)
        #: an object store's files, read in place by byte range (no cache_dir), or None
        self._remote = remote_files(self._source) if self._source and not self._cache else None
        self._executor = PolarsExecutor(self._local, self._remote)
        if self._cache is not None:
            self._gate = FileGate(self._cache.storage(), self.root, self._cache.local)
        else:
            assert self._source is not None
            footers = self._remote.footers.keep if self._remote else None
            self._gate = FileGate(self._source, self.root, keep_footer=footers)
        self._refresh()
        if self._log.head == 0:
            if self.offline:
                raise NotCachedError(
                    f"{self._cache.folder if self._cache else cache_dir}: no cached log of "
                    f"{self.root}; open the reader online with this cache_dir first"
                )
            raise not_a_dataset(self._source)
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
            self._cache.save_log(records, self.root)
        return records

    @property
    def head_sequence(self) -> int:
        self._refresh()
        return self._log.head

    def _log_view(self, refresh: bool) -> LogView:
        if refresh:
            self._refresh()
        return self._log.view()

    def _log_frame(self) -> pl.DataFrame:
        self._refresh()
        return pl.from_arrow(self._log.description())  # type: ignore[return-value]

    # -- reads ----------------------------------------------------------------------------

    def batches(
        self, table: str, *, batch_size: int | None = None, **options: Unpack[ReadOptions]
    ) -> pa.RecordBatchReader:
        """The state of ``table`` as a stream of Arrow record batches of about
        ``batch_size`` rows, in bounded memory: for states larger than memory, or for
        DuckDB (``duckdb.sql("select ... from batches")``). The options are ``read``'s
        (``ReadOptions``); ``scan(...).to_batches()``."""
        return self.scan(table, **options).to_batches(batch_size)

    def download(self, table: str, **options: Unpack[ReadOptions]) -> list[Path]:
        """Fetch into the cache the files a ``read(table, **options)`` needs, and only those
        (with a filter on the id columns, the files its ids can be in); returns their local
        paths (a read then needs no download). ``scan(...).download()``."""
        return self.scan(table, **options).download()

    # -- the conversions of a scan (``read/scan.py``) --------------------------------------

    _other_handle = "RevisionedDataset"

    def _to_polars(self, scan: Scan[pl.DataFrame]) -> pl.LazyFrame:
        return scan._frames()[0]

    def _to_arrow(self, scan: Scan[pl.DataFrame]) -> pa.Table:
        return scan.read().to_arrow()

    def _count(self, scan: Scan[pl.DataFrame]) -> int:
        frame = scan._frames()[0].select(pl.len())
        return int(self._results([frame], scan._plan.what)[0].item())

    def _to_batches(self, scan: Scan[pl.DataFrame], batch_size: int | None) -> pa.RecordBatchReader:
        check_count(batch_size, "batch_size", minimum=1, optional=True)
        frame = scan._frames()[0]
        arrow_schema = pl.DataFrame(schema=frame.collect_schema()).to_arrow().schema
        what = scan._plan.what

        def stream() -> Iterator[pa.RecordBatch]:
            try:
                for chunk in frame.collect_batches(chunk_size=batch_size, lazy=True):
                    yield from chunk.to_arrow().cast(arrow_schema).to_batches()
            except (pl.exceptions.PolarsError, OSError) as exc:
                raise self._read_error(what, exc) from exc

        return pa.RecordBatchReader.from_batches(arrow_schema, stream())

    def _download(self, scan: Scan[pl.DataFrame]) -> list[Path]:
        if self._cache is None:
            raise InvalidArgumentError(
                f"download(): the reader of {self.root} has no cache_dir to download into"
            )
        files = scan._plan.files
        self._gate.check(scan.request.table, scan._plan.scanned)
        return [self._cache.path(f) for f in dict.fromkeys(f for _, f in files)]

    def _local(self, files: Sequence[str]) -> list[str]:
        """What the scans open for data files the file gate passed: their paths in the cache
        or a local root, or their URIs on an object store (read there by byte range)."""
        if self._cache is not None:
            return [str(self._cache.path(f)) for f in files]
        if self._remote is not None:
            return self._remote.paths(files)
        source = self._source
        assert isinstance(source, LocalStorage)
        # the gate resolved each checked file inside the root (no link out) when it read
        # its last bytes: resolving it again would double a long log's cost of opening
        checked = self._gate.checked_files
        return [
            posixpath.join(source.uri, f) if f in checked else str(source.local_path(f))
            for f in files
        ]

    # -- what the shared reads (``read/facade.py``) need -------------------------------------

    def _schema(self, schema: Schema) -> PolarsSchema:
        return polars_schema(schema)

    def _check_filter(self, condition: Any, call: str) -> None:
        if not isinstance(condition, pl.Expr):
            raise ArgumentTypeError(
                f"{call}(): filter must be a Polars expression, got {describe(condition)}"
            )

    def _id_bounds(self, condition: pl.Expr, id_types: Mapping[str, str]) -> IdBounds:
        return polars_id_bounds(condition, id_types)

    def _filtered(self, frame: pl.LazyFrame, condition: pl.Expr) -> pl.LazyFrame:
        return frame.filter(condition)

    def _joined(self, frame: pl.LazyFrame, events_df: Any, what: str) -> Any:
        """A lazy join of lazy events (it streams: ``sink_parquet``), else collected."""
        if isinstance(events_df, pl.LazyFrame):
            return frame
        return super()._joined(frame, events_df, what)

    def _results(self, frames: Sequence[pl.LazyFrame], what: str) -> list[pl.DataFrame]:
        """The frames collected together; a failure reading files is a StorageError naming
        the read (``what`` names the dataset too)."""
        try:
            return pl.collect_all(frames)
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise self._read_error(what, exc) from exc

    def _read_error(self, what: str, exc: Exception) -> RevisionsError:
        if isinstance(exc, RevisionsError):
            return exc
        return StorageError(f"{what} failed reading its data files: {exc}")
