"""Purge (erasure): ``ds.purge`` removes entities from every revision and compaction.

One worked example: the entity 777 is written by a major, changed by a minor, held by a
compaction and deleted by a later minor; after the purge no read at any time, no
positional read, no change read and no history returns it, the other entities read as
before, consumers' positions and ``HEAD~n`` are unchanged, the entry's audit record
holds counts and never the value, and after ``vacuum(retain=0)`` no Parquet file on
disk holds it. Crash safety: tests/core/test_purge_crash.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from harness.dates import day

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import (
    IdColumnsError,
    MissingFileError,
    ReadOnlyDatasetError,
    UnknownTableError,
)

from .damage import copy_dataset, data_files
from .helpers import by_id, frame, tree

ROWS = "id long, v long"
SECRET = 777


def stored_ids(root: str) -> list[int]:
    """Every id value in every Parquet file under ``root``: what is physically there."""
    return [
        i
        for path in Path(root).rglob("*.parquet")
        if len(path.relative_to(root).parts) == 3  # data files, not the log's Parquet
        for i in pq.read_table(path, columns=["id"]).column("id").to_pylist()
    ]


@pytest.fixture(scope="module")
def purged(spark, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("purge") / "ds")
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    ds.commit({"t": frame(spark, [(1, 0), (2, 0), (SECRET, 0)], ROWS)}, day(0), True, name="r0")
    ds.commit({"t": frame(spark, [(2, 1), (SECRET, 1)], ROWS)}, day(1), False, name="r1")
    ds.maintenance.compact()
    ds.commit({"t": frame(spark, [(3, 2)], ROWS)}, day(2), False, name="r2")
    before = {
        "latest": by_id(ds.read("t"), "v"),
        "as_of": by_id(ds.read("t", as_of=day(0.5)), "v"),
        "at": by_id(ds.read("t", at=2), "v"),
        "head~1": ds.revision("HEAD~1"),
    }
    dry = ds.maintenance.purge(
        "t", frame(spark, [(SECRET,)], "id long"), reason="dry", dry_run=True
    )
    assert ds.head_sequence == 4 and dry.purge.rows_removed == 3  # r0, r1, the compaction
    entry = ds.maintenance.purge("t", frame(spark, [(SECRET,)], "id int"), reason="GDPR request 42")
    return root, ds, before, entry


def test_purged_entity_is_gone_from_every_read(purged, spark):
    root, ds, before, entry = purged
    without = {k: v for k, v in before["latest"].items() if k != SECRET}
    assert SECRET in before["latest"] and SECRET in before["as_of"]
    assert by_id(ds.read("t"), "v") == without
    assert by_id(ds.read("t", as_of=day(0.5)), "v") == {1: (0,), 2: (0,)}
    assert by_id(ds.read("t", at=2), "v") == {1: (0,), 2: (1,)}
    assert by_id(ds.read("t", at="r0"), "v") == {1: (0,), 2: (0,)}
    changes = ds.changes("t", since_sequence=0)
    assert SECRET not in {r["id"] for r in changes.df.collect()}
    assert SECRET not in {r["id"] for r in ds.history("t").collect()}
    fresh = RevisionedDataset(root, spark=spark)  # from the log on storage
    assert by_id(fresh.read("t"), "v") == without


def leaves(value: object) -> Iterator[object]:
    """Every scalar of a JSON document."""
    if isinstance(value, dict):
        for item in value.values():
            yield from leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item)
    else:
        yield value


def test_purge_entry_is_an_audit_record_and_not_a_data_change(purged):
    root, ds, before, entry = purged
    assert (entry.kind, entry.sequence, entry.data_change, entry.tables) == ("purge", 5, False, {})
    assert entry.purge.reason == "GDPR request 42" and entry.purge.entities == 1
    removed = {s.sequence: s.rows_removed for s in entry.purge.swaps["t"]}
    assert removed == {1: 1, 2: 1, 3: 1}  # r0, r1 and the compaction
    raw = Path(root, "_log").glob("*5.json")
    # counts, never the purged values (the text may hold 777 in a commit time or a size)
    values = set(leaves(json.loads(next(iter(raw)).read_text())))
    assert SECRET not in values and str(SECRET) not in values
    assert ds.revision("HEAD~1") == before["head~1"]
    assert ds.inspect.log()["kind"].tolist() == ["major", "minor", "compaction", "minor", "purge"]
    assert ds.changes("t", since_sequence=4).df.count() == 0  # nothing to consume from a purge
    assert ds.maintenance.verify() == []


def test_purged_data_is_physically_gone_after_vacuum_retain_zero(purged, spark):
    root, ds, before, entry = purged
    assert SECRET in stored_ids(root)  # swapped out, kept for concurrent readers
    kept = ds.maintenance.vacuum(retain=timedelta(days=7))
    assert kept.purged_files == () and SECRET in stored_ids(root)
    sizes = {path: Path(root, path).stat().st_size for path in tree(root)}
    swapped = sorted(ds.snapshot().view.superseded(entry.sequence))  # what the purge replaced
    sidecars = [f"{p.rsplit('/', 1)[0]}/.{p.rsplit('/', 1)[1]}.crc" for p in swapped]
    assert all(Path(root, c).exists() for c in sidecars)  # Hadoop's checksum files
    report = ds.maintenance.vacuum(retain=timedelta(0))
    # r0's and the compaction's old files; r1 goes whole (the compaction holds it)
    assert len(report.purged_files) == 2 and "r1" in report.revisions
    assert SECRET not in stored_ids(root)
    # the entry records every file it deleted, and which of them the purge swapped out
    gone = {path: size for path, size in sizes.items() if not Path(root, path).exists()}
    deleted = report.entry.vacuum.deleted
    assert (deleted.files, deleted.bytes) == (len(gone), sum(gone.values()))
    assert (report.files, report.bytes) == (deleted.files, deleted.bytes)
    assert set(deleted.folders) == {"r1", f"{entry.name}-2"} and set(deleted.loose) < set(gone)
    assert len(swapped) == 3 and set(swapped) <= set(gone)  # r0's, r1's, the compaction's
    assert set(sidecars) <= set(gone)  # each with its .crc, in folders that stay too
    assert deleted.purged == {entry.sequence: tuple(swapped)}
    assert by_id(ds.read("t"), "v") == {k: v for k, v in before["latest"].items() if k != SECRET}
    assert ds.maintenance.verify() == []


def test_purge_refuses_bad_input(purged, spark):
    root, ds, *_ = purged
    with pytest.raises(UnknownTableError, match="'nope'"):
        ds.maintenance.purge("nope", frame(spark, [(1,)], "id long"), reason="x")
    with pytest.raises(IdColumnsError, match=r"\['id'\]"):
        ds.maintenance.purge("t", frame(spark, [(1, 2)], "id long, v long"), reason="x")
    with pytest.raises(ReadOnlyDatasetError):
        RevisionedDataset(root, read_only=True).maintenance.purge(
            "t", frame(spark, [(1,)], "id long"), reason="x"
        )


def test_a_purge_names_a_missing_file_and_commits_nothing(spark, template, tmp_path):
    """Found by the damage property test: Spark's PATH_NOT_FOUND leaked from the scan."""
    root = copy_dataset(template, tmp_path / "ds")
    data_files(root, "r2")[0].unlink()
    ds = RevisionedDataset(str(root), spark=spark)
    with pytest.raises(MissingFileError, match=r"r2/t/part-.*of revision 'r2'.*is missing"):
        ds.maintenance.purge("t", frame(spark, [(2,)], "id long"), reason="x")
    assert ds.head_sequence == 3 and sorted(p.name for p in root.iterdir() if p.is_dir()) == [
        "_log",
        "r1",
        "r2",
        "r3",
    ]
