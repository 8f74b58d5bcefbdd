"""Data files read where they are: the reader's scans of an object store root, by byte range.

Without a download cache, ``DatasetReader`` reads each file of an ``s3://`` root by ranged
GET requests and fetches only what a scan needs:

* the footer, once per file and reader: the file gate fetches exactly its bytes (the log
  records where it lies) and hands the parsed footer on (``Footers``), so a scan never
  fetches it again;
* per row group, one request for the column chunks of the columns the scan projects
  (neighbouring chunks in one range), in the row groups the id filter's bounds can meet
  (their min/max statistics skip the others);
* for a lookup of a few ids in a row group that likely holds none of them (a minor spans
  the id range sparsely), the id chunks first, and the other columns only of the row
  groups that hold a wanted id.

The rows are decoded by Arrow from the fetched ranges (the footer given, no other byte
read) and handed to Polars as a scan (``register_io_source``), which pushes the read's
projection and filter into it. Credentials stay in the root's boto3 client: nothing is
written into a plan, a log or a message.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import CorruptFileError, MissingFileError
from ...storage.base import Storage
from ...storage.footer import StoredFile, chunk_bounds, stored_file
from ..plan.pruning import IdBounds
from .polars_ids import polars_id_bounds

#: a column of nulls that keeps the rows of a scan reading none of a file's columns
_ROWS = "__revisions_rows"
#: the parsed footers a reader keeps (the largest are a few hundred KiB parsed)
KEPT_FOOTERS = 2048
#: two column chunks closer than this are fetched in one range (a request costs more than
#: the bytes between them)
GAP = 64 * 1024
#: ranges up to this size are kept a while after they are fetched, up to ``RECENT_BYTES``
RECENT_RANGE, RECENT_BYTES = 1024 * 1024, 32 * 1024 * 1024
#: the row groups whose ranges are fetched at once (in parallel), then decoded
WINDOW = 8
#: a row group of a point lookup is read ids first when it holds fewer wanted ids than this
#: by the density of its id range (a sparse minor), else whole at once (a clustered major)
ID_FIRST_BELOW = 0.5


class Footers:
    """The parsed footers of the files a reader's gate checked (``FileGate.keep_footer``), the
    last ``KEPT_FOOTERS`` of them: a scan of a file finds its footer here instead of
    fetching it again."""

    def __init__(self, limit: int = KEPT_FOOTERS):
        self.limit = limit
        self._kept: OrderedDict[str, StoredFile] = OrderedDict()

    def keep(self, found: StoredFile) -> None:
        if found.metadata is None:
            return
        self._kept[found.path] = found
        self._kept.move_to_end(found.path)
        while len(self._kept) > self.limit:
            self._kept.popitem(last=False)

    def get(self, path: str) -> StoredFile | None:
        return self._kept.get(path)


@dataclass(frozen=True)
class _Layout:
    """Where a file's top-level columns lie: per column, its leaf column indexes."""

    leaves: dict[str, list[int]]

    @classmethod
    def of(cls, meta: pq.FileMetaData) -> _Layout:
        leaves: dict[str, list[int]] = {}
        at = 0
        for field in meta.schema.to_arrow_schema():
            count = _leaf_count(field.type)
            leaves[field.name] = list(range(at, at + count))
            at += count
        return cls(leaves)


def _leaf_count(kind: pa.DataType) -> int:
    if pa.types.is_struct(kind):
        return sum(_leaf_count(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_map(kind):
        return _leaf_count(kind.key_type) + _leaf_count(kind.item_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _leaf_count(kind.value_type)
    return 1


def _chunk_range(meta: pq.FileMetaData, group: int, leaf: int) -> tuple[int, int]:
    """The bytes ``[start, end)`` of one column chunk (its dictionary page first)."""
    chunk = meta.row_group(group).column(leaf)
    start = chunk.data_page_offset
    if chunk.has_dictionary_page and chunk.dictionary_page_offset is not None:
        start = min(start, chunk.dictionary_page_offset)
    return start, start + chunk.total_compressed_size


def _coalesced(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` sorted, those less than ``GAP`` apart joined into one."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out and start - out[-1][1] < GAP:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


class _Fetched(io.RawIOBase):
    """A file of which only some byte ranges were fetched: what Arrow reads a row group
    from (given the footer, it reads nothing else). A read outside them is fetched then."""

    def __init__(self, size: int, pieces: Mapping[int, bytes], fetch: Callable[[int, int], bytes]):
        self._size, self._pos, self._fetch = size, 0, fetch
        self._pieces = sorted(pieces.items())

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = base + offset
        return self._pos

    def read(self, size: int = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        start, self._pos = self._pos, max(self._pos, end)
        for at, piece in self._pieces:
            if at <= start and end <= at + len(piece):
                return piece[start - at : end - at]
        return self._fetch(start, end - start) if end > start else b""


class RemoteFiles:
    """The data files of a root as the reader scans them in place (an S3 root's, without
    a download cache): ``paths`` gives their URIs, ``scan`` a lazy Polars scan of some of
    them that fetches byte ranges (``Storage.read_range``)."""

    def __init__(self, storage: Storage):
        self.storage = storage
        self.footers = Footers()
        self._relative: dict[str, str] = {}
        #: the small ranges fetched last (id chunks: a lookup's rows and its merge's joins
        #: both read a file's ids)
        self._recent: OrderedDict[tuple[str, int, int], bytes] = OrderedDict()
        self._recent_bytes = 0
        self._lock = threading.Lock()

    def paths(self, files: Sequence[str]) -> list[str]:
        root = self.storage.uri.rstrip("/")
        uris = [f"{root}/{f}" for f in files]
        self._relative.update(zip(uris, files, strict=True))
        return uris

    def scan(
        self,
        uris: Sequence[str],
        schema: Mapping[str, pl.DataType],
        *,
        file_column: str | None = None,
        column_types: Mapping[str, str] | None = None,
    ) -> pl.LazyFrame:
        """The rows of the files ``uris`` in ``schema`` (a column a file lacks reads as
        null, narrower types are widened), with each row's file URI as ``file_column``.
        ``column_types``: the Spark types of the flat columns whose bounds in a pushed
        filter choose the row groups read (by their statistics; the id columns first)."""
        files = [self._relative[u] for u in uris]
        types = dict(schema)
        produced = {**types, **({file_column: pl.String()} if file_column else {})}
        ids = dict(column_types or {})

        def source(
            with_columns: list[str] | None,
            predicate: pl.Expr | None,
            n_rows: int | None,
            batch_size: int | None,
        ) -> Iterator[pl.DataFrame]:
            wanted = list(produced) if with_columns is None else list(with_columns)
            needed = set(wanted)
            if predicate is not None:
                needed |= set(predicate.meta.root_names())
            read = [c for c in types if c in needed]
            bounds = None if predicate is None or not ids else polars_id_bounds(predicate, ids)
            left = n_rows
            for file, uri in zip(files, uris, strict=True):
                for frame in self._rows(file, read, types, bounds):
                    if file_column is not None and file_column in needed:
                        frame = frame.with_columns(
                            pl.lit(uri, dtype=pl.String()).alias(file_column)
                        )
                    if predicate is not None:
                        frame = frame.filter(predicate)
                    frame = frame.select(wanted)
                    if left is not None:
                        frame = frame.head(left)
                        left -= frame.height
                    if frame.height:
                        yield frame
                    if left is not None and left <= 0:
                        return

        return pl.io.plugins.register_io_source(
            source, schema=produced, explain_name="revisions ranged Parquet"
        )

    # -- one file --------------------------------------------------------------------------

    def _footer(self, file: str) -> StoredFile:
        """The footer the file gate handed on, or fetched again (a read of more files than
        ``KEPT_FOOTERS``)."""
        found = self.footers.get(file)
        if found is None:
            found = stored_file(self.storage, file)
            if found.problem == "missing":
                raise self._gone(file)
            if found.problem is not None or found.metadata is None:
                raise CorruptFileError(
                    f"{self.storage.uri}: data file {file} is not a Parquet file "
                    f"({found.problem}); run `revisions verify`"
                )
            self.footers.keep(found)
        return found

    def _gone(self, file: str) -> MissingFileError:
        """A file the gate checked that went missing before the scan read it."""
        return MissingFileError(
            f"{self.storage.uri}: data file {file} is gone (the read checked it a moment "
            "ago); run `revisions verify`"
        )

    def _fetch(self, file: str, offset: int, length: int) -> bytes:
        key = (file, offset, length)
        with self._lock:
            if key in self._recent:
                return self._recent[key]
        got = self.storage.read_range(file, offset, length)
        if got is None:
            raise self._gone(file)
        with self._lock:
            if length <= RECENT_RANGE and key not in self._recent:
                self._recent[key] = got
                self._recent_bytes += len(got)
                while self._recent_bytes > RECENT_BYTES:
                    self._recent_bytes -= len(self._recent.popitem(last=False)[1])
        return got

    def _fetched(
        self, file: str, meta: pq.FileMetaData, groups: Sequence[int], leaves: Sequence[int]
    ) -> dict[int, bytes]:
        """The column chunks ``leaves`` of row groups ``groups``, one range per row group
        (chunks within ``GAP`` of each other joined), fetched in parallel."""
        ranges = [
            r for g in groups for r in _coalesced([_chunk_range(meta, g, leaf) for leaf in leaves])
        ]
        if not ranges:
            return {}
        with ThreadPoolExecutor(max_workers=min(WINDOW, len(ranges))) as pool:
            bodies = pool.map(lambda r: self._fetch(file, r[0], r[1] - r[0]), ranges)
            return {start: body for (start, _), body in zip(ranges, bodies, strict=True)}

    def _decoded(
        self,
        file: str,
        stored: StoredFile,
        groups: Sequence[int],
        columns: Sequence[str],
        pieces: Mapping[int, bytes],
    ) -> pa.Table:
        assert stored.size is not None
        handle = _Fetched(stored.size, pieces, lambda at, n: self._fetch(file, at, n))
        try:
            parquet = pq.ParquetFile(
                pa.PythonFile(handle, mode="r"),
                metadata=stored.metadata,
                coerce_int96_timestamp_unit="us",
            )
            return parquet.read_row_groups(list(groups), columns=list(columns), use_threads=False)
        except (pa.ArrowException, ValueError, OSError) as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CorruptFileError(
                f"{self.storage.uri}: data file {file}: its row groups {list(groups)} do not "
                f"decode ({detail}): restore it from a backup (it was changed outside "
                "revisions-assets); `revisions verify --deep` lists every damaged file"
            ) from exc

    def _rows(
        self,
        file: str,
        read: Sequence[str],
        types: Mapping[str, pl.DataType],
        bounds: IdBounds | None,
    ) -> Iterator[pl.DataFrame]:
        """The rows of ``file``'s columns ``read`` (those it has) in ``types``, a batch per
        window of the row groups ``bounds`` can meet."""
        stored = self._footer(file)
        meta = stored.metadata
        assert meta is not None
        layout = _Layout.of(meta)
        present = [c for c in read if c in layout.leaves]
        keys = [c for c, _ in (bounds.ranges if bounds else ()) if c in layout.leaves]
        groups = [
            g
            for g in range(meta.num_row_groups)
            if meta.row_group(g).num_rows and _may_hold(meta, layout, g, bounds)
        ]
        leaves = [leaf for c in present for leaf in layout.leaves[c]]
        for n in range(0, len(groups), WINDOW):
            window = groups[n : n + WINDOW]
            if bounds is not None and keys and set(keys) < set(present):
                window = [
                    g
                    for g in window
                    if not _few_wanted(meta, layout, g, bounds)
                    or self._holds(file, stored, layout, g, keys, bounds)
                ]
            if window and not present:  # no column the scan reads is in the file
                height = sum(meta.row_group(g).num_rows for g in window)
                yield _nulls(height, types, read)
            elif window:
                pieces = self._fetched(file, meta, window, leaves)
                table = self._decoded(file, stored, window, present, pieces)
                yield _conformed(pl.from_arrow(table), types, read)  # type: ignore[arg-type]

    def _holds(
        self,
        file: str,
        stored: StoredFile,
        layout: _Layout,
        group: int,
        keys: Sequence[str],
        bounds: IdBounds,
    ) -> bool:
        """Whether row group ``group`` holds a row whose ``keys`` ``bounds`` allow: their
        chunks alone fetched and decoded (kept a while: the scan of the same file's ids
        for a merge's joins fetches them too)."""
        assert stored.metadata is not None
        leaves = [leaf for c in keys for leaf in layout.leaves[c]]
        pieces = self._fetched(file, stored.metadata, [group], leaves)
        frame = pl.from_arrow(self._decoded(file, stored, [group], keys, pieces))
        assert isinstance(frame, pl.DataFrame)
        return bool(frame.filter(bounds_filter(bounds)).height)


def bounds_filter(bounds: IdBounds) -> pl.Expr:
    """The rows whose ids ``bounds`` allow, as a Polars filter."""
    condition = pl.lit(True)
    for column, ranges in bounds.ranges:
        points = [low for low, high in ranges if low is not None and low == high]
        spans = [(low, high) for low, high in ranges if not (low is not None and low == high)]
        allowed = pl.col(column).is_in(points) if points else pl.lit(False)
        for low, high in spans:
            inside = pl.lit(True)
            if low is not None:
                inside = inside & (pl.col(column) >= low)
            if high is not None:
                inside = inside & (pl.col(column) <= high)
            allowed = allowed | inside
        condition = condition & allowed
    return condition


def _statistics(meta: pq.FileMetaData, layout: _Layout, group: int, column: str) -> Any:
    """The min and max of a flat column in row group ``group``; None where unknown."""
    leaves = layout.leaves.get(column) or []
    return chunk_bounds(meta, group, leaves[0]) if len(leaves) == 1 else None


def _may_hold(meta: pq.FileMetaData, layout: _Layout, group: int, bounds: IdBounds | None) -> bool:
    """Whether row group ``group`` can hold an id ``bounds`` allow, by its statistics."""
    if bounds is None:
        return True
    for column, _ in bounds.ranges:
        found = _statistics(meta, layout, group, column)
        if found is not None and not bounds.meets(column, *found):
            return False
    return True


def _few_wanted(meta: pq.FileMetaData, layout: _Layout, group: int, bounds: IdBounds) -> bool:
    """Whether a lookup of points likely finds none of them in row group ``group``: an
    integer id range holding fewer wanted ids than ``ID_FIRST_BELOW`` by its density; for
    other id types, far fewer wanted ids in its range than rows."""
    rows = meta.row_group(group).num_rows
    for column, ranges in bounds.ranges:
        if any(low is None or low != high for low, high in ranges):
            return False
        found = _statistics(meta, layout, group, column)
        if found is None:
            return False
        low, high = found
        try:
            inside = sum(1 for value, _ in ranges if low <= value <= high)
        except TypeError:
            return False
        if isinstance(low, int) and isinstance(high, int) and not isinstance(low, bool):
            return inside * rows / max(1, high - low + 1) < ID_FIRST_BELOW
        return inside * 64 < rows
    return False


def _nulls(height: int, types: Mapping[str, pl.DataType], read: Sequence[str]) -> pl.DataFrame:
    """``height`` rows of nulls in the columns ``read`` (and ``_ROWS``, which keeps the
    height where none is read: the scan selects what it was asked for)."""
    columns = [pl.Series(c, [None] * height, dtype=types[c]) for c in read]
    return pl.DataFrame([*columns, pl.Series(_ROWS, [None] * height, dtype=pl.Null())])


def _conformed(
    frame: pl.DataFrame, types: Mapping[str, pl.DataType], read: Sequence[str]
) -> pl.DataFrame:
    """``frame``'s columns ``read`` in ``types``: a column the file lacks as null, a
    narrower type widened, an instant in UTC."""
    columns = []
    for name in read:
        want = types[name]
        if name not in frame.columns:
            columns.append(pl.lit(None, dtype=want).alias(name))
            continue
        have = frame.schema[name]
        column = pl.col(name)
        if isinstance(want, pl.Datetime) and isinstance(have, pl.Datetime):
            if have.time_zone is None and want.time_zone is not None:
                column = column.dt.replace_time_zone(want.time_zone)
            elif have.time_zone is not None and want.time_zone is not None:
                column = column.dt.convert_time_zone(want.time_zone)
        columns.append(column.cast(want).alias(name) if have != want else column)
    return frame.select(columns)


def remote_files(storage: Storage) -> RemoteFiles | None:
    """The files of ``storage`` as the reader scans them in place, or None where it reads
    local files (a local root, or other stores: fetched into a cache)."""
    return RemoteFiles(storage) if storage.uri.startswith("s3://") else None
