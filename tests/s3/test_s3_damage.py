"""Log health and confinement on S3: the names after the head are listed with StartAfter, a
gap or a lost log is found on open, verify() reports it, and keys never leave the prefix; a
renamed revision folder is misplaced (fixed by ``aws s3 mv``), and an object where a root's
prefix should be is a StorageError."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_log import record

from revisions_assets.core.errors import CorruptLogError, PathEscapeError, StorageError
from revisions_assets.core.log.layout import DESCRIPTION, LOG_DIR, entry_name
from revisions_assets.core.log.revision_log import RevisionLog, entry_path
from revisions_assets.core.maintain.vacuum import Vacuum
from revisions_assets.core.maintain.verify import verify
from revisions_assets.core.storage.backends import open_storage


@pytest.fixture
def storage(s3_root, s3_options):
    storage = open_storage(s3_root, **s3_options)
    log = RevisionLog(storage)
    log.refresh()
    for sequence in (1, 2, 3):
        assert log.try_append(record(sequence))
    log.after_commit()
    return storage


def test_names_after_a_position_are_listed_from_there(storage):
    names = storage.list_names(LOG_DIR, start_after=entry_name(1))
    assert [n for n in names if n.endswith(".json")] == [entry_name(2), entry_name(3)]
    assert f"{LOG_DIR}/" in storage.list_names("")  # folders end with '/'


def test_a_gap_is_found_on_open_and_by_verify(storage):
    storage.delete_tree(entry_path(2))
    with pytest.raises(CorruptLogError, match=f"{entry_path(2)} is missing"):
        RevisionLog(storage).refresh()
    assert ("log_gap", "error", entry_path(2)) in {
        (f.kind, f.severity, f.path) for f in verify(storage)
    }


def test_an_entry_far_beyond_the_head(storage):
    storage.write(entry_path(99), b"garbage")
    with pytest.raises(CorruptLogError, match=f"{entry_path(99)} exists but {entry_path(4)}"):
        RevisionLog(storage).refresh()


def test_a_lost_log_is_not_an_empty_dataset(storage):
    storage.delete_tree(LOG_DIR)
    with pytest.raises(CorruptLogError, match=f"{DESCRIPTION} lists 3 revisions"):
        RevisionLog(storage).refresh()
    assert [f.kind for f in verify(storage) if f.severity == "error"][:1] == ["log_missing"]


@pytest.mark.parametrize("rel", ["../other/_log/x.json", "/abs", "a/../../b"])
def test_keys_never_leave_the_prefix(storage, rel):
    with pytest.raises(PathEscapeError):
        storage.read(rel)


def test_a_renamed_revision_folder_is_misplaced_and_kept(s3_root, s3_options):
    """``aws s3 mv --recursive .../rev2/ .../rev2.moved/``, aged: verify gives the command
    that moves it back; vacuum keeps it (and deletes no orphan meanwhile)."""
    storage = open_storage(s3_root, **s3_options)
    log = RevisionLog(storage)
    log.refresh()
    for sequence in (1, 2):
        buffer = pa.BufferOutputStream()
        pq.write_table(pa.table({"id": [sequence, 9], "_deleted": [False, False]}), buffer)
        data = buffer.getvalue().to_pybytes()
        entry = record(sequence)
        write = replace(entry.tables["t"], rows=2, tombstones=0, bytes=len(data))
        storage.write(write.files[0], data)
        assert log.try_append(replace(entry, tables={"t": write}, upstream=()))
    log.after_commit()
    storage.write("rev2.moved/t/part-0.parquet", storage.read("rev2/t/part-0.parquet"))
    storage.delete_tree("rev2")
    storage.write("killed/_claimed", b"token")
    (misplaced,) = [f for f in verify(storage) if f.kind == "misplaced_folder"]
    assert misplaced.path == "rev2.moved" and misplaced.severity == "error"
    assert f"`aws s3 mv --recursive {s3_root}/rev2.moved/ {s3_root}/rev2/`" in misplaced.fix
    later = datetime.now(UTC) + timedelta(days=1)
    report = Vacuum(storage, RevisionLog(storage)).run(
        retain=timedelta(days=7),
        keep_majors=True,
        dry_run=False,
        consumer_positions={},
        grace=timedelta(0),
        now=later,
    )
    assert report.orphans == () and report.orphans_kept == ("killed",)
    assert storage.exists("rev2.moved/t/part-0.parquet") and storage.exists("killed/_claimed")


def test_a_root_that_is_an_object_is_a_storage_error(s3_root, s3_options, s3_env):
    """An object where the dataset's prefix should be: a StorageError that says so (the
    command line: exit 3), not "no dataset there" (exit 2)."""
    storage = open_storage(s3_root, **s3_options)
    bucket, key = s3_root.removeprefix("s3://").split("/", 1)
    storage.client.put_object(Bucket=bucket, Key=key, Body=b"PAR1")
    with pytest.raises(StorageError, match="is a regular file \\(an object\\), not a folder"):
        verify(storage)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "revisions"), "log", s3_root]
        + ["--endpoint-url", s3_options["endpoint_url"]],
        capture_output=True,
        text=True,
        env=s3_env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 3 and done.stdout == "", done.stderr
    assert f"root {s3_root} is a regular file (an object)" in done.stderr


def test_a_footer_is_read_with_the_object_size(s3_root, s3_options):
    """One ranged GET gives a footer and the object's size (``Content-Range``): what the
    log's file stats record and ``check_stored_file`` compares."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from revisions_assets.core.log.file_stats import check_stored_file, read_file_stats

    storage = open_storage(s3_root, **s3_options)
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(range(100_000), pa.int64())}), buf)
    storage.write("r/t/part-0.parquet", buf.getvalue())
    assert len(buf.getvalue()) > 4 * 64 * 1024  # larger than the tail one read fetches
    schema = (
        '{"fields":[{"metadata":{},"name":"id","nullable":true,"type":"long"}],"type":"struct"}'
    )
    (stats,) = read_file_stats(storage, ["r/t/part-0.parquet"], ("id",), schema)
    assert (stats.bytes, stats.rows, stats.id_min, stats.id_max) == (
        len(buf.getvalue()),
        100_000,
        (0,),
        (99_999,),
    )
    assert check_stored_file(storage, stats).problem is None
    storage.write("r/t/part-0.parquet", buf.getvalue()[:-1] + b"X")
    assert check_stored_file(storage, stats).problem == "its last bytes are not PAR1"
