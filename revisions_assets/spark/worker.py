"""What a Spark task of ``format("revisions")`` runs: one part of a planned read, on the
engine's Polars executor, streamed to Spark as Arrow record batches.

A part (``ReadPart``) is planned on the driver (``planning.py``) and carries all it needs:
the plan (which files, which merge: no log is read here), the request it answers, and what
narrows it (the filters Spark pushed, an id range). The rows are those of the engine's read
(``run_plan``, the code every read of the library runs), kept to the part's conditions,
in the columns and types the source declared to Spark. Nothing here imports pandas: the
executors need the base install (Polars, PyArrow) beside PySpark.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import Filter, InputPartition

from ..core.read.plan.requests import ChangePlan, HistoryPlan, ReadRequest, StatePlan

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa
    from pyspark.sql.types import StructType

#: the column of a change read through Spark telling whether its rows are a reset: the
#: complete state, which a consumer puts in place of the table's (not merged into it)
RESET = "_reset"
#: the rows of an Arrow batch handed to Spark (bounded memory, few calls into the JVM)
BATCH_ROWS = 65_536


@dataclass(frozen=True)
class IdRange:
    """Rows with ``low <= column < high`` (None: unbounded): one of the ranges a read is
    split into, on its first id column."""

    column: str
    low: Any = None
    high: Any = None

    def condition(self) -> pl.Expr:
        import polars as pl

        column = pl.col(self.column)
        bounds = [
            *([column >= self.low] if self.low is not None else []),
            *([column < self.high] if self.high is not None else []),
        ]
        return pl.all_horizontal(bounds) if bounds else pl.lit(True)


@dataclass(frozen=True, eq=False)
class ReadPart(InputPartition):
    """One Spark partition of a read: the plan (or a part of it), what the read asked for,
    and the conditions that narrow it. ``reset``: the value of ``_reset`` (a change read),
    None when the read has no such column."""

    root: str
    table: str
    plan: StatePlan | ChangePlan | HistoryPlan
    request: ReadRequest
    id_columns: tuple[str, ...]
    conditions: tuple[Filter, ...] = ()
    id_range: IdRange | None = None
    reset: bool | None = None
    storage_options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # Spark shows partitions in plans and errors: no options
        narrowed = f", {self.id_range}" if self.id_range else ""
        return f"ReadPart({self.root!r}, {self.table!r}, {self.request.kind}{narrowed})"


def read_part(part: ReadPart, schema: StructType) -> Iterator[pa.RecordBatch]:
    """The rows of ``part`` as Arrow record batches of ``schema`` (the source's, or the
    columns a user's schema names), streamed."""
    import polars as pl
    from pyspark.sql.pandas.types import to_arrow_schema

    from ..core.errors import RevisionsError, StorageError
    from ..core.read.execute.polars import PolarsExecutor
    from ..core.read.scan import run_plan
    from .filters import polars_condition

    target = to_arrow_schema(schema, timezone="UTC")
    local = _local_files(part)
    frame, _ = run_plan(part.plan, part.request, PolarsExecutor(local), lambda f, c: f.filter(c))
    conditions = [polars_condition(c, part.id_columns) for c in part.conditions]
    if part.id_range is not None:
        conditions.append(part.id_range.condition())
    for condition in conditions:
        frame = frame.filter(condition)
    present = frame.collect_schema()
    columns = []
    for name in target.names:
        if name == RESET and part.reset is not None:
            columns.append(pl.lit(part.reset).alias(RESET))
        elif name in present:
            columns.append(pl.col(name))
        else:  # a column later revisions added: null in rows written before it
            columns.append(pl.lit(None).alias(name))
    frame = frame.select(columns)
    try:
        for chunk in frame.collect_batches(chunk_size=BATCH_ROWS, lazy=True):
            yield from chunk.to_arrow().cast(target).to_batches()
    except (pl.exceptions.PolarsError, OSError) as exc:
        if isinstance(exc, RevisionsError):
            raise
        raise StorageError(f"{part.plan.what} failed reading its data files: {exc}") from exc


#: the download caches of S3 roots in this worker process (files are immutable: a file
#: fetched for one task serves the next)
_CACHES: dict[str, Any] = {}


def _local_files(part: ReadPart) -> Any:
    """Local paths of the part's files: a local root's own, or copies fetched into this
    worker's download cache (an S3 root), checked as every read checks them."""
    from ..core.read.execute.download_cache import DownloadCache
    from ..core.read.execute.files import FileGate
    from ..core.storage.backends import open_storage
    from ..core.storage.base import LocalStorage

    storage = open_storage(part.root, **part.storage_options)
    if isinstance(storage, LocalStorage):
        return lambda files: [str(storage.local_path(f)) for f in files]
    cache = _CACHES.get(storage.uri)
    if cache is None:
        folder = tempfile.mkdtemp(prefix="revisions-spark-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        cache = _CACHES[storage.uri] = DownloadCache(folder, storage)
    FileGate(cache.storage(), storage.uri, cache.local).check(part.table, part.plan.scanned)
    return lambda files: [str(cache.path(f)) for f in files]
