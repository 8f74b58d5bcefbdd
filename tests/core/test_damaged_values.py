"""Data files changed outside revisions-assets are never read as data nor copied.

Three kinds of damage a footer check of missing or non-Parquet files lets through: a file
rewritten with the same rows and schema but other values (as on S3, where no checksum
sidecar tells), the same with Hadoop's ``.crc`` sidecar of the old bytes kept (the local
filesystem), and a file with rows dropped. Reads of both handles refuse a file whose
footer holds other rows than the log records (or, where the log records the file's stats,
is not the footer its commit recorded: ``test_file_stats.py``). For the files of entries
without stats (``as_earlier_release``), whose footers cannot tell changed values,
``verify --deep`` recomputes every row's hash and names the files whose values changed;
compaction and purge check the rows they rewrite against their hashes in the job that
writes, and refuse, committing nothing.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from harness.dates import day

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import CorruptFileError
from revisions_assets.core.maintain.verify import verify

from .damage import TABLE, as_earlier_release, copy_dataset, data_files, snapshot
from .helpers import frame


def checksum_of(path: Path) -> Path:
    """The ``.crc`` sidecar Hadoop's local filesystem keeps beside a file it wrote."""
    return path.with_name(f".{path.name}.crc")


def change_values(path: Path, *, keep_crc: bool = False) -> None:
    """Rewrite a data file with the same rows, schema and stored row hashes, but other values
    in its first value column (what a bad copy or a hand edit leaves). ``keep_crc``: leave
    the ``.crc`` sidecar of the old bytes, else remove it (as on an object store)."""
    table = pq.read_table(path)
    column = next(n for n in table.column_names if n not in ("id", "_deleted", "_row_hash"))
    values = table[column]
    if pa.types.is_string(values.type):
        changed = pc.binary_join_element_wise(values, pa.scalar("!"), "")
    else:
        changed = pc.add(values, pa.scalar(1, values.type))
    pq.write_table(table.set_column(table.column_names.index(column), column, changed), path)
    if not keep_crc:
        checksum_of(path).unlink(missing_ok=True)


def drop_rows(path: Path, rows: int) -> None:
    """Rewrite a data file without its last ``rows`` rows (its ``.crc`` removed)."""
    table = pq.read_table(path)
    pq.write_table(table.slice(0, table.num_rows - rows), path)
    checksum_of(path).unlink(missing_ok=True)


def file_holding(root: Path, revision: str, entity: int) -> Path:
    """The data file of ``revision`` that holds the row of ``entity``."""
    return next(
        f for f in data_files(root, revision) if entity in pq.read_table(f)["id"].to_pylist()
    )


def refused(act, *names: str) -> str:
    """The CorruptFileError ``act`` raises; every one of ``names`` in its message."""
    with pytest.raises(CorruptFileError) as caught:
        act()
    message = str(caught.value)
    for name in names:
        assert name in message, f"{name!r} not in: {message}"
    return message


def test_changed_values_are_found_by_verify_deep_and_never_rewritten(template, spark, tmp_path):
    root = copy_dataset(template, tmp_path / "dataset")
    as_earlier_release(root)
    first = file_holding(root, "r1", 1)  # r1: ids 1-3; r2 rewrote id 2, r3 added id 4
    name, rows = first.relative_to(root).as_posix(), pq.read_metadata(first).num_rows
    change_values(first)
    ds = RevisionedDataset(str(root), spark=spark, compact_after=None)
    assert verify(str(root)) == []  # the footers agree with the log: only the data tells
    found = ds.maintenance.verify(deep=True)
    assert [(f.kind, f.path, f.severity) for f in found] == [("row_hash_mismatch", name, "error")]
    assert f"{rows} of its {rows} rows hold other values" in found[0].message
    assert "'r1'" in found[0].message

    before = snapshot(tmp_path)
    refused(lambda: ds.maintenance.compact(TABLE), name, "'r1'", "row hash", "backup")
    ids = frame(spark, [(1,)], "id long")
    refused(lambda: ds.maintenance.purge(TABLE, ids, reason="x"), name, "row hash")
    assert snapshot(tmp_path) == before  # nothing written, nothing committed
    assert ds.snapshot().head_sequence == 3


def test_a_changed_file_a_purge_wrote_is_not_a_purge_that_lost_rows(spark, tmp_path):
    """verify --deep compares the state after a purge with the state before it: a file the
    purge wrote whose values then changed would read as rows the purge changed. The damage
    is reported for what it is, and that comparison is left out."""
    root = tmp_path / "dataset"
    ds = RevisionedDataset(str(root), spark=spark, id_columns=["id"], compact_after=None)
    rows = frame(spark, [(i, str(i)) for i in range(4)], "id long, v string").coalesce(1)
    ds.commit({TABLE: rows}, timestamp=day(0), is_major=True, name="m")
    purge = ds.maintenance.purge(TABLE, frame(spark, [(0,)], "id long"), reason="x")
    (written,) = purge.purge.swaps[TABLE][0].write.files  # ids 1-3, the state's rows
    as_earlier_release(root)
    change_values(root / written)
    found = ds.maintenance.verify(deep=True)
    assert [(f.kind, f.path) for f in found] == [("row_hash_mismatch", written)]


def test_a_changed_compaction_is_found_refused_and_rebuilt(template, spark, tmp_path):
    """Compaction files carry the row hashes of the rows they hold: checked the same way."""
    root = copy_dataset(template, tmp_path / "dataset")
    ds = RevisionedDataset(str(root), spark=spark, compact_after=None)
    compaction = ds.maintenance.compact(TABLE)
    assert compaction is not None
    as_earlier_release(root)
    ds = RevisionedDataset(str(root), spark=spark, compact_after=None)
    stored = file_holding(root, compaction.name, 3)
    change_values(stored)
    found = ds.maintenance.verify(deep=True)
    assert [(f.kind, f.path) for f in found] == [("compaction_damaged", compaction.name)]
    assert "row hashes disagree" in found[0].message

    before = snapshot(tmp_path)
    ids = frame(spark, [(3,)], "id long")  # id 3: in r1's file and in the compaction's
    name = stored.relative_to(root).as_posix()
    refused(lambda: ds.maintenance.purge(TABLE, ids, reason="x"), name, compaction.name)
    assert snapshot(tmp_path) == before

    rebuilt = ds.maintenance.compact(rebuild=compaction.name)  # from the revisions it holds
    assert rebuilt.properties == {"rebuilds": compaction.name}
    assert sorted(DatasetReader(str(root)).read(TABLE).rows()) == [
        (1, "a"),
        (2, "B"),
        (3, "c"),
        (4, "d"),
    ]


def test_bytes_that_fail_their_crc_are_named_not_a_jvm_error(template, spark, tmp_path):
    root = copy_dataset(template, tmp_path / "dataset")
    as_earlier_release(root)  # with stats, the file gate refuses the file before any job
    first = file_holding(root, "r1", 1)
    name = first.relative_to(root).as_posix()
    change_values(first, keep_crc=True)
    ds = RevisionedDataset(str(root), spark=spark, compact_after=None)
    found = ds.maintenance.verify(deep=True)
    assert [(f.kind, f.path) for f in found] == [("corrupt_file", name)]
    assert "checksum of its .crc file" in found[0].message

    before = snapshot(tmp_path)
    refused(lambda: ds.maintenance.compact(TABLE), name, "'r1'", ".crc")
    ids = frame(spark, [(1,)], "id long")
    refused(lambda: ds.maintenance.purge(TABLE, ids, reason="x"), name, ".crc")
    assert snapshot(tmp_path) == before


def test_a_file_with_dropped_rows_is_refused_by_every_read_and_rewrite(template, spark, tmp_path):
    """Both handles, every kind of read, compaction and purge: the same error, naming the
    file and the counts, before any row is read; nothing changes."""
    root = copy_dataset(template, tmp_path / "dataset")
    first = file_holding(root, "r1", 1)
    drop_rows(first, 1)
    name = first.relative_to(root).as_posix()
    spark_ds = RevisionedDataset(str(root), spark=spark, compact_after=None)
    events = frame(spark, [(1, day(5))], "id long, at timestamp")
    handles = {
        "reader": (DatasetReader(str(root)), events.toPandas()),
        "spark": (spark_ds, events),
    }
    before = snapshot(tmp_path)
    messages = set()
    for handle, events_df in handles.values():
        for act in (
            lambda h=handle: h.read(TABLE),
            lambda h=handle: h.scan(TABLE).count(),
            lambda h=handle: h.changes(TABLE, since_sequence=0),
            lambda h=handle: h.history(TABLE),
            lambda h=handle, e=events_df: h.as_of_join(e, TABLE, event_time="at", on=["id"]),
        ):
            messages.add(refused(act, name, "'r1'", "2 rows", "the log records 3", "backup"))
    ids = frame(spark, [(4,)], "id long")  # only in r3's file: the purge refuses all the same
    for act in (
        lambda: spark_ds.maintenance.compact(TABLE),
        lambda: spark_ds.maintenance.purge(TABLE, ids, reason="x"),
    ):
        messages.add(refused(act, name, "'r1'", "2 rows", "the log records 3"))
    assert len(messages) == 1, messages  # one wording for both handles and every command
    assert snapshot(tmp_path) == before
    assert [f.kind for f in verify(str(root)) if f.severity == "error"] == ["corrupt_file"]
