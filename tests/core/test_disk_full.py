"""A full or read-only filesystem under a commit or a purge: a clean StorageError naming the
path, the dataset exactly as it was, and no temporary file or claimed folder left behind.

The filesystem is a small tmpfs mounted for the test. It needs root and permission to
mount, which CI has: a machine that cannot mount fails the test (with the reason) rather
than skipping a guarantee unseen.
"""

from __future__ import annotations

import errno
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from harness.dates import day
from pyspark.sql import functions as F

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import StorageError

from .damage import TABLE, copy_dataset, snapshot
from .helpers import frame


def _mount(args: list[str]) -> str | None:
    """None when the command worked, else why it did not."""
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


@pytest.fixture
def small_fs(tmp_path):
    """A fresh 16 MB tmpfs, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.fail("mounting a tmpfs for the full-disk tests needs root (CI runs as root)")
    mount = tmp_path / f"tmpfs-{uuid.uuid4().hex[:8]}"
    mount.mkdir()
    problem = _mount(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)])
    if problem:
        pytest.fail(f"cannot mount a tmpfs for the full-disk tests: {problem}")
    yield mount
    _mount(["umount", "-l", str(mount)])


def fill(mount: Path, leave: int = 0) -> Path:
    """Fill the filesystem, then free ``leave`` bytes."""
    filler = mount / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (1 << 20, 1 << 12, 1):
            try:
                while os.write(fd, b"\0" * chunk):
                    pass
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def big_frame(spark, rows: int = 50_000):
    """Rows of incompressible text: far more than the space left."""
    return spark.range(rows).select(F.col("id"), F.sha2(F.col("id").cast("string"), 256).alias("v"))


def small_commit(ds: RevisionedDataset, spark, name: str | None = None):
    return ds.commit(
        {TABLE: frame(spark, [(9, "z")], "id long, v string")},
        timestamp=day(3),
        is_major=False,
        name=name,
    )


def unchanged_after(root: Path, attempt) -> StorageError:
    before = snapshot(root)
    with pytest.raises(StorageError) as caught:
        attempt()
    assert snapshot(root) == before
    return caught.value


def test_a_full_disk_refuses_the_commit_cleanly(small_fs, template, spark):
    root = copy_dataset(template, small_fs / "dataset")
    ds = RevisionedDataset(str(root), spark=spark, id_columns=["id"])
    filler = fill(small_fs)

    error = unchanged_after(
        root,
        lambda: small_commit(ds, spark, name="on_full_disk"),
    )
    assert "No space left on device" in str(error) and str(root) in str(error)
    assert "on_full_disk" in str(error)

    filler.unlink()
    assert ds.maintenance.verify() == []  # no temporary file, no claimed folder left
    assert small_commit(ds, spark).sequence == 4


def test_a_disk_filling_up_during_the_spark_write(small_fs, template, spark):
    root = copy_dataset(template, small_fs / "dataset")
    ds = RevisionedDataset(str(root), spark=spark, id_columns=["id"])
    filler = fill(small_fs, leave=256 << 10)  # room for the claim, not for the data

    error = unchanged_after(
        root,
        lambda: ds.commit({TABLE: big_frame(spark)}, timestamp=day(3), is_major=True, name="big"),
    )
    assert "No space left on device" in str(error)
    assert f"{root}/big/{TABLE}" in str(error)

    filler.unlink()
    assert ds.maintenance.verify() == []
    assert [r.name for r in ds.revisions()] == ["r1", "r2", "r3"]


def test_a_read_only_filesystem(small_fs, template, spark):
    root = copy_dataset(template, small_fs / "dataset")
    ds = RevisionedDataset(str(root), spark=spark, id_columns=["id"])
    problem = _mount(["mount", "-o", "remount,ro", str(small_fs)])
    if problem:
        pytest.fail(f"cannot remount the tmpfs read-only: {problem}")
    try:
        error = unchanged_after(
            root,
            lambda: small_commit(ds, spark),
        )
        assert "Read-only file system" in str(error)
        # reading still works on a read-only dataset
        assert ds.read(TABLE).count() == 4
        assert RevisionedDataset(str(root), spark=spark).head_sequence == 3
    finally:
        _mount(["mount", "-o", "remount,rw", str(small_fs)])


def test_a_disk_filling_up_during_compaction_and_purge(small_fs, template, spark):
    """Their Spark jobs fail as a commit's do: a StorageError naming the folder they were
    writing, and the dataset exactly as it was."""
    root = copy_dataset(template, small_fs / "dataset")
    ds = RevisionedDataset(str(root), spark=spark, id_columns=["id"], compact_after=None)
    ds.commit({TABLE: big_frame(spark, 20_000)}, timestamp=day(3), is_major=True, name="big")
    small_commit(ds, spark)  # something on the base to compact
    filler = fill(small_fs, leave=256 << 10)  # room for a claim, not for the rewritten data

    error = unchanged_after(root, lambda: ds.maintenance.compact(TABLE))
    assert "No space left on device" in str(error)
    assert f"compaction of table {TABLE!r} into {root}/compaction-" in str(error)
    ids = frame(spark, [(5,)], "id long")  # in the big major's file: rewritten by the purge
    error = unchanged_after(root, lambda: ds.maintenance.purge(TABLE, ids, reason="erasure"))
    assert "No space left on device" in str(error)
    assert f"purge of table {TABLE!r} into {root}/purge-" in str(error), str(error)

    filler.unlink()
    assert ds.maintenance.verify() == []


def test_a_purge_on_a_full_disk_leaves_no_folder(small_fs, template, spark):
    """Issue 52: the purge rewrites the files of r1 and r2 (both hold id 2) into folders of
    its own; the disk fills up under them. Every folder it created goes."""
    root = copy_dataset(template, small_fs / "dataset")
    ds = RevisionedDataset(str(root), spark=spark, id_columns=["id"])
    ids = frame(spark, [(2,)], "id long")
    filler = fill(small_fs)

    error = unchanged_after(root, lambda: ds.maintenance.purge(TABLE, ids, reason="erasure"))
    assert "No space left on device" in str(error)

    filler.unlink()
    assert ds.maintenance.verify() == []
    record = ds.maintenance.purge(TABLE, ids, reason="erasure")
    assert [s.sequence for s in record.purge.swaps[TABLE]] == [1, 2]
    assert sorted(r.id for r in ds.read(TABLE).select("id").collect()) == [1, 3, 4]
