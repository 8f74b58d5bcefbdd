"""The file statistics the log records (``TableWrite.file_stats``), against the files: a
commit, a compaction and a purge record, per file, exactly what the file holds (its rows,
bytes, row groups, footer and the min and max of each id column, computed here from the
data itself); an entry written before gets the same from the footers, and ``compact``
rewrites a base without them. Every read of both handles, and ``verify``, compare each
file with its stats: a file rewritten with the same rows but other values is refused;
the files of an entry without stats are checked by the rows of each write, as before."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import date
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from harness.dates import day

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import CorruptFileError
from revisions_assets.core.log.records import COMPACTION, PURGE, FileStats, TableWrite
from revisions_assets.core.log.revision_log import RevisionLog, entry_path
from revisions_assets.core.maintain.verify import verify
from revisions_assets.core.storage.backends import open_storage
from revisions_assets.core.write import commit

from .damage import TABLE, as_earlier_release, copy_dataset
from .helpers import frame
from .test_damaged_values import change_values, drop_rows, file_holding

SCHEMA = "id long, k string, d date, v long"
IDS = ["id", "k", "d"]


def rows(ids: range, v: int) -> list[tuple]:
    return [(i, f"key-{i % 7}", date(2020, 1, 1 + i % 28), v) for i in ids]


def as_written(root: str, path: str, id_columns: tuple[str, ...]) -> FileStats:
    """What the file at ``path`` holds, computed here: from its bytes and its data."""
    data = (Path(root) / path).read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    ids = pq.read_table(Path(root) / path, columns=list(id_columns))
    return FileStats(
        path=path,
        rows=ids.num_rows,
        bytes=len(data),
        row_groups=pq.read_metadata(Path(root) / path).num_row_groups,
        footer_offset=len(data) - 8 - length,
        footer_length=length,
        footer_sha256=hashlib.sha256(data[-8 - length : -8]).hexdigest(),
        id_min=tuple(pc.min(ids.column(c)).as_py() for c in id_columns),
        id_max=tuple(pc.max(ids.column(c)).as_py() for c in id_columns),
    )


def check_recorded(root: str, write: TableWrite) -> None:
    assert write.file_stats is not None and len(write.file_stats) == len(write.files)
    assert write.file_stats == tuple(as_written(root, f, write.id_columns) for f in write.files)
    assert sum(s.rows for s in write.file_stats) == write.rows
    assert sum(s.bytes for s in write.file_stats) == write.bytes


@pytest.fixture(scope="module")
def maintained(spark, tmp_path_factory):
    """A major of three files (of 10 rows, from rows in no order), a minor, a compaction of
    several files and a purge of one entity from each."""
    root = str(tmp_path_factory.mktemp("stats") / "ds")
    ds = RevisionedDataset(root, spark=spark, id_columns=IDS, compact_after=None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(commit, "rows_per_file", lambda *_: 10)
        shuffled = frame(spark, rows(range(30), 0), SCHEMA).repartition(3)
        major = ds.commit({"t": shuffled}, day(0), True)
        ds.commit({"t": frame(spark, rows(range(25, 40), 1), SCHEMA)}, day(1), False)
    ds.maintenance.compact(target_file_bytes=major.tables["t"].bytes // 2)
    gone = frame(spark, rows(range(12, 13), 0), SCHEMA).select(*IDS)
    ds.maintenance.purge("t", gone, reason="test")
    return root, RevisionLog(open_storage(root)).refresh()


def test_commits_compactions_and_purges_record_what_their_files_hold(maintained):
    root, records = maintained
    major, minor, compaction, purge = records
    assert (compaction.kind, purge.kind) == (COMPACTION, PURGE)
    assert len(major.tables["t"].files) == 3
    for record in (major, minor, compaction):
        check_recorded(root, record.tables["t"])
    swapped = purge.purge.swaps["t"]
    assert {s.sequence for s in swapped} >= {major.sequence, compaction.sequence}
    for swap in swapped:  # the rewritten files and the ones it kept
        check_recorded(root, swap.write)
    first = major.tables["t"].file_stats[0]
    assert isinstance(first.id_min[2], date) and isinstance(first.id_min[1], str)
    stored = json.loads((Path(root) / entry_path(1)).read_text())["tables"]["t"]["file_stats"]
    assert stored[0]["id_min"][2] == first.id_min[2].isoformat()  # "YYYY-MM-DD" in the entry


def test_majors_compactions_and_purges_write_files_of_disjoint_id_ranges(maintained):
    """A major's files (its rows came in no order), a compaction's and a purge's hold
    disjoint id ranges; a purge rewrites each file within its old range."""
    _root, records = maintained
    major, _minor, compaction, purge = records

    def ranges(write: TableWrite) -> list[tuple]:
        assert write.file_stats is not None
        return sorted((s.id_min, s.id_max) for s in write.file_stats)

    for write in (major.tables["t"], compaction.tables["t"]):
        found = ranges(write)
        assert len(found) >= 3
        assert all(a[1] < b[0] for a, b in zip(found, found[1:], strict=False)), found
    for swap in purge.purge.swaps["t"]:
        before = next(r for r in records if r.sequence == swap.sequence).tables["t"]
        after = ranges(swap.write)
        assert len(after) == len(before.files)  # each file rewritten into one
        assert all(a[1] < b[0] for a, b in zip(after, after[1:], strict=False)), after
        old = dict(zip(before.files, before.file_stats or (), strict=True))
        for path, stats in zip(swap.write.files, swap.write.file_stats or (), strict=True):
            if path in old:
                continue
            holder = [s for s in old.values() if s.id_min <= stats.id_min <= s.id_max]
            assert holder and stats.id_max <= holder[0].id_max  # within its old range


def test_an_entry_written_before_gets_its_stats_from_the_footers(spark, tmp_path):
    """An entry without ``file_stats`` (an earlier format): a handle reads them from the
    footers, and ``compact`` rewrites the base, recording them."""
    root = str(tmp_path / "ds")
    ds = RevisionedDataset(root, spark=spark, id_columns=IDS, compact_after=None)
    ds.commit({"t": frame(spark, rows(range(10), 0), SCHEMA)}, day(0), True)
    path = Path(root) / entry_path(1)
    doc = json.loads(path.read_text())
    recorded = doc["tables"]["t"].pop("file_stats")
    doc["format"] = 2
    path.write_text(json.dumps(doc))  # the head: no entry records its digest yet

    log = RevisionLog(open_storage(root))
    (old,) = log.refresh()
    assert old.tables["t"].file_stats is None
    from_footers = log.file_stats(old.tables["t"])
    assert [s.footer_sha256 for s in from_footers] == [s["footer_sha256"] for s in recorded]
    assert from_footers == tuple(
        as_written(root, f, old.tables["t"].id_columns) for f in old.tables["t"].files
    )

    fresh = RevisionedDataset(root, spark=spark)
    compaction = fresh.maintenance.compact()
    assert compaction is not None and compaction.kind == COMPACTION
    check_recorded(root, compaction.tables["t"])
    assert fresh.maintenance.compact() is None  # its base has them now


def refused_by_both_handles(spark, root: Path, *parts: str) -> None:
    """A read of ``TABLE`` by ``DatasetReader`` and by the Spark handle (fresh handles)
    raises CorruptFileError, with every one of ``parts`` in its message."""
    for handle in (DatasetReader(str(root)), RevisionedDataset(str(root), spark=spark)):
        with pytest.raises(CorruptFileError) as caught:
            handle.read(TABLE)
        for part in parts:
            assert part in str(caught.value), (part, str(caught.value))


def test_a_file_rewritten_with_the_same_rows_is_refused_by_every_read(template, spark, tmp_path):
    """A file rewritten with the same rows and schema but other values, without a ``.crc``
    (as on an object store): its footer holds the rows the log records, but it is not the
    footer its commit recorded. Both handles refuse it before reading any row, naming the
    file, its revision, its table, what differs and the fix; plain ``verify`` reports it."""
    root = copy_dataset(template, tmp_path / "dataset")
    stored = file_holding(root, "r1", 1)
    name, rows = stored.relative_to(root).as_posix(), pq.read_metadata(stored).num_rows
    change_values(stored)
    assert pq.read_metadata(stored).num_rows == rows
    assert not stored.with_name(f".{stored.name}.crc").exists()
    refused_by_both_handles(
        spark,
        root,
        f"data file {name} of revision 'r1', table 't', was rewritten after its commit",
        "its footer differs from the one recorded at commit",
        "restore it from a backup",
        "revisions verify",
    )
    (finding,) = verify(str(root))
    assert (finding.kind, finding.severity, finding.path) == ("corrupt_file", "error", name)
    assert "revision 'r1' (sequence 1), table 't', was rewritten" in finding.message
    assert "footer differs" in finding.message


def test_an_entry_without_stats_reads_and_is_checked_by_its_rows(template, spark, tmp_path):
    """Entries of the previous release record no file stats: both handles read them, and a
    write whose footers hold other rows than it records is refused as before."""
    root = copy_dataset(template, tmp_path / "dataset")
    as_earlier_release(root)
    want = [(1, "a"), (2, "B"), (3, "c"), (4, "d")]
    assert sorted(DatasetReader(str(root)).read(TABLE).rows()) == want
    spark_read = RevisionedDataset(str(root), spark=spark).read(TABLE)
    assert sorted(tuple(r) for r in spark_read.select("id", "v").collect()) == want
    assert verify(str(root)) == []
    drop_rows(file_holding(root, "r1", 1), 1)
    refused_by_both_handles(spark, root, "revision 'r1'", "2 rows", "the log records 3")


def test_a_rewritten_compaction_file_is_refused_and_reported(maintained, tmp_path):
    """A compaction's file rewritten the same way: reads refuse it, their fix names the
    rebuild; ``verify`` reports the compaction damaged, naming the file and what differs."""
    source, records = maintained
    root = tmp_path / "ds"
    shutil.copytree(source, root)
    compaction, purge = records[2], records[3]
    (swap,) = [s for s in purge.purge.swaps["t"] if s.sequence == compaction.sequence]
    name = swap.write.files[0]
    change_values(root / name)
    with pytest.raises(CorruptFileError) as caught:
        DatasetReader(str(root)).read("t")
    assert f"data file {name} of revision {compaction.name!r}" in str(caught.value)
    assert f"`revisions compact ROOT --rebuild {compaction.name}`" in str(caught.value)
    (finding,) = [f for f in verify(str(root)) if f.severity == "error"]
    assert (finding.kind, finding.path) == ("compaction_damaged", compaction.name)
    assert f"{name} was rewritten after its commit" in finding.message
