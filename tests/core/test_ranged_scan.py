"""The reader's ranged scan of files read in place (``read/execute/remote.py``) against
Polars' own reading of the same files: any projection, filter and row limit, files of
several row groups, columns a file lacks, narrower types, null and sparse ids. The storage
is local here (the scan asks it for byte ranges as it asks S3); the reads of an ``s3://``
root end to end are in ``tests/s3/test_s3_reader.py``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from harness.examples import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st

from revisions_assets.core.errors import CorruptFileError
from revisions_assets.core.read.execute.remote import RemoteFiles
from revisions_assets.core.storage.base import LocalStorage, Storage
from revisions_assets.core.storage.footer import stored_file

SCHEMA = {"id": pl.Int64(), "name": pl.String(), "x": pl.Float64(), "extra": pl.Int64()}
COLUMN_TYPES = {"id": "long", "name": "string"}


class CountingStorage(LocalStorage):
    """A local root that counts the ranges read from it."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.ranges: list[tuple[str, int, int]] = []

    def read_range(self, rel: str, offset: int, length: int) -> bytes | None:
        self.ranges.append((rel, offset, length))
        return super().read_range(rel, offset, length)


def write_files(root: Path, files: list[tuple[list[int | None], int, bool]]) -> list[str]:
    """Parquet files of ``(ids, row group rows, with the extra column)``: ids as written
    (sorted or not), a name per id, x as float32 in half of them (a narrower type)."""
    names = []
    for n, (ids, group_rows, extra) in enumerate(files):
        columns = {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([None if i is None else f"n{i:04d}" for i in ids], pa.string()),
            "x": pa.array(
                [None if i is None else i / 4 for i in ids],
                pa.float32() if n % 2 else pa.float64(),
            ),
        }
        if extra:
            columns["extra"] = pa.array([None if i is None else i * 10 for i in ids], pa.int32())
        name = f"part-{n}.parquet"
        pq.write_table(pa.table(columns), root / name, row_group_size=group_rows)
        names.append(name)
    return names


def ranged(storage: Storage, files: list[str]) -> pl.LazyFrame:
    remote = RemoteFiles(storage)
    for f in files:  # as the file gate hands them on
        remote.footers.keep(stored_file(storage, f))
    return remote.scan(remote.paths(files), SCHEMA, file_column="__file", column_types=COLUMN_TYPES)


def polars_own(root: Path, files: list[str]) -> pl.LazyFrame:
    return pl.scan_parquet(
        [str(root / f) for f in files],
        schema=SCHEMA,
        missing_columns="insert",
        cast_options=pl.ScanCastOptions(float_cast="upcast", integer_cast="upcast"),
        include_file_paths="__file",
    ).with_columns(pl.col("__file").str.replace(r"^.*/", ""))


def same(got: pl.DataFrame, want: pl.DataFrame) -> None:
    order = [c for c in ("id", "name", "x", "extra") if c in got.columns]
    assert got.columns == want.columns
    if order:
        got, want = got.sort(order, nulls_last=True), want.sort(order, nulls_last=True)
    assert got.equals(want), (got, want)


ids_lists = st.lists(st.one_of(st.none(), st.integers(0, 300)), min_size=0, max_size=60)
a_file = st.tuples(
    ids_lists.map(lambda ids: sorted(ids, key=lambda i: (i is None, i or 0))) | ids_lists,
    st.integers(1, 16),
    st.booleans(),
)
filters = st.one_of(
    st.none(),
    st.lists(st.integers(0, 300), min_size=1, max_size=5).map(lambda v: pl.col("id").is_in(v)),
    st.tuples(st.integers(0, 300), st.integers(0, 300)).map(
        lambda r: pl.col("id").is_between(min(r), max(r))
    ),
    st.integers(0, 300).map(lambda v: pl.col("name") == f"n{v:04d}"),
    st.integers(0, 300).map(lambda v: (pl.col("x") > v / 8) & pl.col("id").is_in([v, v + 1])),
    st.just(pl.col("extra").is_null()),
)
projections = st.one_of(
    st.none(), st.lists(st.sampled_from(["id", "name", "x", "extra", "__file"]), unique=True)
)


@settings(max_examples=examples(25), deadline=None)
@given(
    files=st.lists(a_file, min_size=1, max_size=3),
    condition=filters,
    columns=projections,
    limit=st.one_of(st.none(), st.integers(0, 20)),
)
@example(  # found exploring: a lookup where no row group holds the ids (every group skipped)
    files=[([1, 2, 3, 4], 2, True)], condition=pl.col("id").is_in([9]), columns=None, limit=None
)
@example(  # found exploring: only the file column, no column of the file (rows kept)
    files=[([None], 1, False)], condition=None, columns=["__file"], limit=None
)
@example(  # only a column the file lacks: its rows as nulls, no row invented
    files=[([3, 4], 1, False), ([], 1, True)], condition=None, columns=["extra"], limit=None
)
@example(  # a sparse row group read ids first, holding one of them
    files=[(list(range(0, 300, 9)), 64, False)],
    condition=pl.col("id").is_in([27, 28]),
    columns=["x"],
    limit=None,
)
def test_a_ranged_scan_reads_what_polars_reads(tmp_path_factory, files, condition, columns, limit):
    root = tmp_path_factory.mktemp("ranged")
    names = write_files(root, files)
    storage = CountingStorage(root)
    got, want = ranged(storage, names), polars_own(root, names)
    if condition is not None:
        got, want = got.filter(condition), want.filter(condition)
    if columns is not None:
        got, want = got.select(columns), want.select(columns)
    if limit is not None:  # which rows a limit keeps is the scan's choice: compare counts
        assert got.head(limit).collect().height == want.head(limit).collect().height
        return
    got_rows = got.collect()
    # the file column: the scan names a file by its URI under the root
    if "__file" in got_rows.columns:
        got_rows = got_rows.with_columns(pl.col("__file").str.replace(r"^.*/", ""))
    same(got_rows, want.collect())


def test_a_lookup_fetches_only_the_row_groups_that_hold_its_ids(tmp_path):
    """A clustered file: only the row group whose statistics meet the id is fetched, in one
    range of its projected columns; a sparse file: its ids first, nothing else when they
    lack the id."""
    clustered = (list(range(0, 1000)), 100, True)
    sparse = (list(range(0, 1000, 97)), 100, True)
    names = write_files(tmp_path, [clustered, sparse])
    storage = CountingStorage(tmp_path)
    rows = ranged(storage, names).filter(pl.col("id").is_in([250])).select("id", "x").collect()
    assert rows.to_dicts() == [{"id": 250, "x": 62.5}]
    by_file = {n: [r for r in storage.ranges if r[0] == n] for n in names}
    assert len(by_file[names[0]]) == 1  # the one row group holding 250, its two columns
    chunk = pq.read_metadata(tmp_path / names[0]).row_group(2).column(0)
    starts = [chunk.data_page_offset, chunk.dictionary_page_offset]
    assert by_file[names[0]][0][1] == min(o for o in starts if o is not None)
    assert len(by_file[names[1]]) == 1  # its id chunk only: 250 is not among its ids
    sparse_meta = pq.read_metadata(tmp_path / names[1])
    assert by_file[names[1]][0][2] == sparse_meta.row_group(0).column(0).total_compressed_size


def test_a_damaged_column_chunk_is_a_corrupt_file_error(tmp_path):
    """Bytes of a column chunk changed in place (the footer, which the file gate compares
    with the log, unchanged): the scan names the file, never an Arrow error."""
    (name,) = write_files(tmp_path, [(list(range(500)), 500, True)])
    chunk = pq.read_metadata(tmp_path / name).row_group(0).column(1)  # the names
    data = bytearray((tmp_path / name).read_bytes())
    start = chunk.data_page_offset
    data[start : start + chunk.total_compressed_size] = b"\xff" * chunk.total_compressed_size
    (tmp_path / name).write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=f"data file {name}: its row groups"):
        ranged(CountingStorage(tmp_path), [name]).select("name").collect()
