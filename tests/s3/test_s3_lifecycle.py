"""Compaction and vacuum with the dataset root on S3 (moto on loopback): docs/concepts/lifecycle.md
on S3.

The compaction is written and read by Spark's s3a; vacuum lists the bucket (ages from
``LastModified``), commits its entry with a conditional PUT and deletes with boto3.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from core.helpers import by_id, frame
from harness.dates import day

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import RetentionError
from revisions_assets.core.timeutil import now_utc

pytestmark = pytest.mark.s3

ROWS = "id long, day int"


def folders_read(df) -> set[str]:
    return {uri.rsplit("/", 3)[-3] for uri in df.inputFiles()}


def test_compaction_and_vacuum_on_s3(s3_spark, s3_options, s3_root):
    spark = s3_spark
    ds = RevisionedDataset(
        s3_root, spark=spark, id_columns=["id"], storage_options=s3_options, compact_after=None
    )
    ds.commit({"t": frame(spark, [(i, 0) for i in range(4)], ROWS)}, day(0), True, name="m")
    ds.commit({"t": frame(spark, [(1, 1)], ROWS)}, day(1), False, name="a")
    ds.commit({"t": frame(spark, [(2, 2)], ROWS)}, day(2), False, name="b")
    latest = {0: (0,), 1: (1,), 2: (2,), 3: (0,)}
    compaction = ds.maintenance.compact()
    df = ds.read("t")
    assert folders_read(df) == {compaction.name} and by_id(df, "day") == latest

    # what a killed writer leaves on S3: a claimed folder with a data file
    ds.storage.create_exclusive("killed/_claimed", b"token")
    ds.storage.write("killed/t/part-00000.parquet", b"not a committed file")
    young = ds.maintenance.vacuum(retain=timedelta(hours=1), dry_run=True)
    assert young.orphans == () and young.revisions == ()  # all younger than an hour
    later = now_utc() + timedelta(hours=2)  # LastModified is now: two hours later they are old
    dry = ds.maintenance.vacuum(retain=timedelta(hours=1), now=later, dry_run=True)
    assert sorted(dry.revisions) == ["a", "b"] and dry.orphans == ("killed",)
    assert ds.storage.list_files("a") and ds.head_sequence == 4  # a dry run changes nothing

    report = ds.maintenance.vacuum(retain=timedelta(hours=1), now=later)
    assert (sorted(report.revisions), report.orphans, report.files) == (
        ["a", "b"],
        ("killed",),
        dry.files,
    )
    assert report.entry.sequence == 5
    for folder in ("a", "b", "killed"):
        assert ds.storage.list_files(folder) == [], folder
    fresh = RevisionedDataset(s3_root, spark=spark, storage_options=s3_options)
    assert by_id(fresh.read("t"), "day") == latest
    assert list(fresh.inspect.log()["vacuumed"]) == [False, True, True, False, False]
    with pytest.raises(RetentionError, match="at sequence 2"):
        fresh.read("t", at=2)
