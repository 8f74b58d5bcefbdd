"""A change feed consumer killed mid-batch with SIGKILL and restarted neither loses nor repeats
a change: Spark's checkpoint replays the batch it did not commit, the source reads the same
changes again, an idempotent sink replaces what the killed attempt wrote.

50 log entries: a major and 45 minors staged through the log layer (no Spark: milliseconds
each), a second major, a compaction, a purge and a vacuum by the engine. A consumer
process (tests/harness/change_feed_consumer.py: the product's session, no PYSPARK_PYTHON,
the format found by Spark itself) runs the feed with ``trigger(availableNow=True)`` and
``maxRevisionsPerTrigger`` after each group of commits; two of its runs are killed, once
mid-write of a batch's file and once after the write but before Spark's commit of the batch
(at the major's reset). After every run each batch's file holds exactly the library's change
read of the batch's positions (read from the checkpoint), the batches' positions follow each
other from 0 to the newest revision, and replaying every batch in order gives the table's state.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from core.helpers import stage_revision
from harness.dates import day
from harness.frames import frame
from harness.processes import HARNESS, kill_group, with_tests_on_path

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage

pytestmark = [pytest.mark.slow, pytest.mark.long]  # consumer processes with JVMs of their own

RUN_TIMEOUT_S = 600
COLUMNS = ("id", "v", "_deleted", "_revision", "_revision_sequence")


class Consumer:
    """The consumer process: ``run()`` asks it for one available-now run of the feed."""

    def __init__(self, work: Path, root: str, kill: str = "none"):
        self.work, self.marker = work, work / "killed"
        self.marker.unlink(missing_ok=True)
        self.out = work / f"consumer-{time.monotonic_ns()}.log"
        command = [
            sys.executable,
            str(HARNESS / "change_feed_consumer.py"),
            root,
            str(work / "checkpoint"),
            str(work / "sink"),
            str(self.marker),
            kill,
        ]
        with open(self.out, "w") as out:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=without_a_python_for_spark(),
                text=True,
                start_new_session=True,  # its own process group: the kill takes the JVM too
            )
        self.runs = 0

    def run(self) -> bool:
        """One run; False when it stopped at its kill point (then killed, group and all)."""
        self.runs += 1
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while self.out.read_text().count("done") < self.runs:
            if self.marker.exists():
                kill_group(self.proc)
                return False
            assert self.proc.poll() is None, f"consumer exited:\n{self.out.read_text()[-4000:]}"
            assert time.monotonic() < deadline, self.out.read_text()[-4000:]
            time.sleep(0.05)
        return True

    def stop(self) -> None:
        if self.proc.poll() is None:
            kill_group(self.proc)


def without_a_python_for_spark() -> dict[str, str]:
    """The environment without PYSPARK_PYTHON and without a virtualenv on the PATH: only the
    session the product builds can give Spark's Python workers this interpreter."""
    env = with_tests_on_path(None)
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV"):
        env.pop(name, None)
    venv = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv)
    return env


def batch_positions(work: Path) -> dict[int, int]:
    """Each planned batch's end position, from Spark's checkpoint (its offset log)."""
    ends = {}
    for path in (work / "checkpoint" / "offsets").iterdir():
        if path.name.isdigit():
            ends[int(path.name)] = json.loads(path.read_text().splitlines()[-1])["sequence"]
    return ends


def check_batches(work: Path, root: str, checked: dict[int, list[tuple]]) -> None:
    """Every batch since the last check holds the library's change read of its positions,
    reads now (before the next commits); the positions follow each other."""
    ends = batch_positions(work)
    files = sorted(p.name for p in (work / "sink").iterdir())
    assert files == [f"batch-{b:05d}.parquet" for b in sorted(ends)], files  # none torn left
    reader = DatasetReader(root)
    for batch, end in sorted(ends.items()):
        start = ends.get(batch - 1, 0)
        assert end > start, ends
        got = pq.read_table(work / "sink" / f"batch-{batch:05d}.parquet")
        rows = sorted(zip(*[got.column(c).to_pylist() for c in COLUMNS], strict=True))
        if batch in checked:
            assert rows == checked[batch], f"batch {batch} changed after it was committed"
            continue
        cs = reader.changes("t", since_sequence=start, until_sequence=end, with_revision=True)
        assert set(got.column("_reset").to_pylist()) <= {cs.is_reset}, batch
        want = sorted(cs.df.select(COLUMNS).rows())
        assert rows == want, f"batch {batch}: positions ({start}, {end}]"
        checked[batch] = rows


def test_a_consumer_killed_mid_batch_neither_loses_nor_repeats_a_change(spark, tmp_path):
    root = str(tmp_path / "dataset")
    (tmp_path / "sink").mkdir()
    log = RevisionLog(open_storage(root))
    names = iter(f"r{n:02d}" for n in range(1, 100))

    def stage(count: int, start: int) -> None:
        log.refresh()  # after the engine's own entries
        for n in range(count):  # minors: an update, an insert, and every third a deletion
            base = start + n
            rows = {(base % 20,): {"v": base}, (20 + base,): {"v": base}}
            if n % 3 == 2:
                rows[((base + 7) % 20,)] = None
            stage_revision(log, root, next(names), day(base), False, rows)
        log.after_commit()

    stage_revision(log, root, next(names), day(0), True, {(i,): {"v": i} for i in range(20)})
    stage(9, 1)
    checked: dict[int, list[tuple]] = {}
    first = Consumer(tmp_path, root, kill="torn:2")
    try:
        assert first.run()  # the bootstrap: batch 0, positions (0, 10]
        check_batches(tmp_path, root, checked)
        stage(15, 10)
        assert not first.run()  # batches 1, 2 of (10, 25]: killed writing batch 2
    finally:
        first.stop()
    torn = pq.read_table(tmp_path / "sink" / "batch-00002.parquet").num_rows

    second = Consumer(tmp_path, root, kill="written:4")
    try:
        assert second.run()  # batch 2 again, then 3
        check_batches(tmp_path, root, checked)
        assert len(checked[2]) > torn  # the torn file was replaced whole
        ds = RevisionedDataset(root, spark=spark, compact_after=None)
        rows = [(i, 1000 + i, False) for i in range(5, 30)]
        major = frame(spark, rows, "id long, v long, _deleted boolean")
        ds.commit({"t": major}, day(40), True, "v1", name="m2")  # a second major: a reset
        stage(4, 41)
        assert ds.maintenance.compact("t") is not None  # no data change: no batch
        purged = frame(spark, [(12,)], "id long")
        assert ds.maintenance.purge("t", purged, reason="a test") is not None  # nor this
        assert not second.run()  # batch 4, the reset: killed before Spark commits it
    finally:
        second.stop()

    third = Consumer(tmp_path, root)
    try:
        assert third.run()  # batch 4 again
        check_batches(tmp_path, root, checked)
        report = ds.maintenance.vacuum(retain=timedelta(0), keep_majors=False)
        assert report.revisions  # the revisions the second major voided: no batch
        stage(17, 50)
        assert third.run()
        check_batches(tmp_path, root, checked)
    finally:
        third.stop()

    assert len(ds.revisions()) == 50
    ends = batch_positions(tmp_path)
    assert ends[max(ends)] == ds.revisions("t")[-1].sequence  # nothing left behind
    # every batch in order onto an empty copy: the table's state (the reset replaces it)
    state: dict[int, int] = {}
    for batch in sorted(ends):
        rows = pq.read_table(tmp_path / "sink" / f"batch-{batch:05d}.parquet").to_pylist()
        if rows and rows[0]["_reset"]:
            state = {}
        for row in rows:
            if row["_deleted"]:
                state.pop(row["id"], None)
            else:
                state[row["id"]] = row["v"]
    assert state == dict(DatasetReader(root).read("t").select("id", "v").rows())
