"""DatasetReader: the reads of ``RevisionedDataset`` without Spark, with Polars.

The same plans as the Spark engine (``read/plan/``): the same rows, the same errors. The
Polars executor (``read/execute/polars.py``) runs them lazily in this process: ``scan``
returns the merged state as a ``LazyFrame`` whose projections and id filters reach the
Parquet scans, ``batches`` streams it, ``read`` collects it. With ``cache_dir`` a read
first downloads the files it needs, and only those, into a local cache
(``read/execute/download_cache.py``), which an offline reader reads alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from .arguments import check_bool, check_count, check_options
from .errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    MissingFileError,
    NotCachedError,
    RevisionsError,
    StorageError,
)
from .log.layout import not_a_dataset
from .log.records import Revision
from .log.revision_log import RevisionLog
from .read.execute.download_cache import DownloadCache
from .read.execute.files import PARQUET_MAGIC, corrupt_file_error
from .read.execute.frames import Rows
from .read.execute.polars import PolarsExecutor, polars_schema
from .read.facade import DatasetReads
from .read.plan.refs import Position
from .read.plan.requests import Snapshot, plan_state
from .read.plan.schema import Schema
from .storage.backends import open_storage
from .storage.base import LocalStorage, Storage
from .timeutil import TimeLike
from .uris import describe

#: a table's schema as the reader gives it
PolarsSchema = dict[str, pl.DataType]


class DatasetReader(DatasetReads[pl.DataFrame, PolarsSchema]):
    """Reads a revisioned dataset in this process, without a JVM (see the module doc):
    ``read``, ``changes``, ``history``, ``tables`` and ``revisions`` as ``RevisionedDataset``
    gives them (``read/facade.py``), as Polars DataFrames; ``scan`` and ``batches`` lazily.

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
            absolute = self.root if "://" in self.root else os.path.abspath(self.root)
            self._log = RevisionLog(self._cache.storage(), root=absolute)  # positions
        else:
            self._source = open_storage(root, **options)
            self.root = self._source.uri
            if cache_dir is None and not isinstance(self._source, LocalStorage):
                cache_dir = tempfile.mkdtemp(prefix="revisions-reader-")
                weakref.finalize(self, shutil.rmtree, cache_dir, ignore_errors=True)
            self._cache = DownloadCache(cache_dir, self._source) if cache_dir else None
            self._log = RevisionLog(self._source)
        self._executor = PolarsExecutor(self._local)
        self._checked: set[str] = set()  # data files found to end as Parquet does
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

    def log(self) -> pl.DataFrame:
        """One row per log entry, as ``RevisionedDataset.log()``."""
        self._refresh()
        return pl.from_arrow(self._log.description())  # type: ignore[return-value]

    def snapshot(self) -> Snapshot:
        """One frozen view of the log, caught up with commits (online): what a read plans
        from (each read takes one when it starts)."""
        self._refresh()
        return Snapshot(self.root, self._log.view())

    # -- reads ----------------------------------------------------------------------------

    def scan(
        self,
        table: str,
        *,
        as_of: TimeLike | None = None,
        at: Position = None,
        known_at: TimeLike | None = None,
        with_revision: bool = False,
    ) -> pl.LazyFrame:
        """The state of ``table`` as ``read`` gives it, as a ``LazyFrame``: a ``select``
        reads only those columns (and the ids) from the files, a ``filter`` on the id
        columns prunes the files' rows before the merge, and a filter on other columns
        applies after it (before, it would bring back an older row of an entity whose
        newest row it drops). Collect it, stream it (``collect(engine="streaming")``,
        ``sink_parquet``), or join it: the files it needs are fetched when it is planned."""
        plan = plan_state(
            self.snapshot(),
            table,
            as_of=as_of,
            at=at,
            known_at=known_at,
            with_revision=with_revision,
        )
        return self._executor.merge(plan.rows, Rows(with_revision=with_revision))

    def batches(
        self,
        table: str,
        *,
        as_of: TimeLike | None = None,
        at: Position = None,
        known_at: TimeLike | None = None,
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
    ) -> pa.RecordBatchReader:
        """The state of ``table`` as a stream of Arrow record batches of about
        ``batch_size`` rows, in bounded memory: for states larger than memory, or for
        DuckDB (``duckdb.sql("select ... from batches")``)."""
        check_count(batch_size, "batch_size", minimum=1, optional=True)
        plan = plan_state(
            self.snapshot(), table, as_of=as_of, at=at, known_at=known_at, columns=columns
        )
        frame = self._executor.merge(plan.rows)
        schema = frame.collect_schema()
        arrow_schema = pl.DataFrame(schema=schema).to_arrow().schema

        def stream() -> Iterator[pa.RecordBatch]:
            try:
                for chunk in frame.collect_batches(chunk_size=batch_size, lazy=True):
                    yield from chunk.to_arrow().cast(arrow_schema).to_batches()
            except (pl.exceptions.PolarsError, OSError) as exc:
                raise self._read_error(plan.rows.what, exc) from exc

        return pa.RecordBatchReader.from_batches(arrow_schema, stream())

    def download(
        self,
        table: str,
        *,
        as_of: TimeLike | None = None,
        at: Position = None,
        known_at: TimeLike | None = None,
    ) -> list[Path]:
        """Fetch into the cache the files a ``read(table, as_of=..., at=...)`` needs, and
        only those; returns their local paths (a read then needs no download)."""
        if self._cache is None:
            raise InvalidArgumentError(
                f"download(): the reader of {self.root} has no cache_dir to download into"
            )
        plan = plan_state(self.snapshot(), table, as_of=as_of, at=at, known_at=known_at)
        return [Path(p) for p in self._local([f for _, f in plan.rows.files])]

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
            with open(path, "rb") as fh:  # a file that is not Parquet: say which (execute/files.py)
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

    # -- what the shared reads (``read/facade.py``) need -------------------------------------

    def _schema(self, schema: Schema) -> PolarsSchema:
        return polars_schema(schema)

    def _filtered(self, frame: pl.LazyFrame, condition: Any) -> pl.LazyFrame:
        if not isinstance(condition, pl.Expr):
            raise ArgumentTypeError(
                f"read(): filter must be a Polars expression, got {describe(condition)}"
            )
        return frame.filter(condition)

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
