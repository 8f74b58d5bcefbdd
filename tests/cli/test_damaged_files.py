"""Damaged data files through the command line, as a user types it: one line naming the file
and the fix, never a JVM error or its stack traces, and never a process that runs out of
memory on a file that claims more rows than the log records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from core.damage import as_earlier_release
from core.helpers import stage_revision
from core.test_damaged_values import change_values
from harness.dates import day
from harness.frames import frame
from harness.processes import run_measuring_peak

from revisions_assets import RevisionedDataset
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage

from .test_console_script import revisions

#: what a file holds in the data file case of the issue: 1.2 MB holding 50M rows
CLAIMED_ROWS = 50_000_000


def write_many_rows(path: Path, rows: int) -> None:
    """A small Parquet file of ``rows`` rows of the staged schema (id, v, _deleted): one
    entity repeated, which encodes to almost nothing."""
    group = 1_000_000
    chunk = pa.table(
        {
            "id": pa.array(np.full(group, 7, dtype=np.int64)),
            "v": pa.nulls(group, pa.int64()),
            "_deleted": pa.array(np.zeros(group, dtype=bool)),
        }
    )
    with pq.ParquetWriter(path, chunk.schema) as writer:
        for _ in range(rows // group):
            writer.write_table(chunk, row_group_size=group)


def test_show_refuses_a_small_file_that_holds_far_more_rows_than_the_log(tmp_path):
    """The issue's case: a data file of the log's 16 rows replaced by one of 50M rows in
    about a megabyte. The read refuses it from its footer, before decoding anything: a fresh
    process ends with one line naming the file and both counts, and peaks far below 1 GiB."""
    root = str(tmp_path / "ds")
    log = RevisionLog(open_storage(root))
    stage_revision(log, root, "r0", day(0), True, {(i,): {"v": i} for i in range(16)})
    data = Path(root, "r0/t/part-00000.parquet")
    write_many_rows(data, CLAIMED_ROWS)
    assert data.stat().st_size < 2 << 20

    measured = run_measuring_peak(
        "revisions_assets", ["show", root, "t", "--limit", "3"], tmp_path, timeout=120
    )
    done = measured.done
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr[-2000:])
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert done.stderr.startswith("revisions: error: ")
    for part in ("r0/t/part-00000.parquet", f"{CLAIMED_ROWS} rows", "the log records 16"):
        assert part in done.stderr, done.stderr
    assert measured.peak_mib is not None and measured.peak_mib < 1024, measured.peak_mib


@pytest.fixture
def changed(spark, tmp_path) -> tuple[str, str]:
    """(root, the data file whose values changed) of a dataset committed by Spark: a major
    of ids 0-9 in one file, whose values were then changed, its ``.crc`` kept, and a minor
    on top (so that there is something to compact); its entries as the previous release
    wrote them, without file stats (with them, the file gate refuses the file before any
    Spark job reads it)."""
    root = str(tmp_path / "ds")
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    rows = frame(spark, [(i, i * 2) for i in range(10)], "id long, v long").coalesce(1)
    ds.commit({"t": rows}, timestamp=day(0), is_major=True, name="r0")
    ds.commit({"t": frame(spark, [(10, 20)], "id long, v long")}, timestamp=day(1), is_major=False)
    (path,) = Path(root, "r0/t").glob("part-*.parquet")
    change_values(path, keep_crc=True)
    as_earlier_release(Path(root))
    return root, path.relative_to(root).as_posix()


@pytest.mark.slow
def test_a_failed_spark_job_is_one_line_naming_the_file(changed):
    """``compact`` in a process of its own: the job fails on the file's checksum. One line
    on stderr names the file and the fix; none of the JVM's errors and stack traces."""
    root, name = changed
    done = revisions("compact", root, code=3)
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("revisions: error: "), (
        f"not one line ({len(done.stderr)} characters): {done.stderr[:3000]}"
    )
    assert name in done.stderr and ".crc" in done.stderr and "backup" in done.stderr
    assert "Py4J" not in done.stderr
