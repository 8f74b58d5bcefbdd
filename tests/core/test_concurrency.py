"""Concurrent writers (SPEC §4): separate OS processes commit through the real engine at once.

Every writer owns one table of the shared dataset (a major, then minors with colliding and
out-of-order timestamps), so after the race the expected state at any sequence follows from
the log alone, through tests/core/model.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import DuplicateRevisionNameError
from revisions_assets.core.transaction import CommitTransaction

from .helpers import day, frame, input_files, top_dirs
from .model import Model

WRITERS = 4
COMMITS = 25
START_TIMEOUT_S = 600
RUN_TIMEOUT_S = 900

WRITER = r"""
import sys, time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from revisions_assets import RevisionedDataset
from revisions_assets.spark import build_spark_session

root, work, writer, commits = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
spark = build_spark_session(master="local[1]", app_name=f"writer-{writer}", conf={
    "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1", "spark.driver.memory": "512m"})
ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
frames = [spark.createDataFrame([(i, i), (i + 1, i)], "id long, v long") for i in range(commits)]
(work / f"ready-{writer}").touch()
while not (work / "go").exists():
    time.sleep(0.01)
for i, df in enumerate(frames):
    rev = ds.commit({f"w{writer}": df},
                    timestamp=datetime(2020, 1, 1, tzinfo=timezone.utc) + timedelta(days=i % 3),
                    is_major=(i == 0), version="v1",
                    properties={"writer": str(writer), "i": str(i)})
    print(rev.sequence, rev.name, flush=True)
spark.stop()
"""


def writer_rows(i: int) -> dict:
    """What commit i of a writer wrote: ids i and i+1, value i (so later commits overwrite)."""
    return {(i,): {"v": i}, (i + 1,): {"v": i}}


def wait_for(work: Path, procs: list[subprocess.Popen], timeout: float) -> None:
    """Poll until every writer is ready; fail early (with its stderr) if one died first."""
    deadline = time.monotonic() + timeout
    while not all((work / f"ready-{w}").exists() for w in range(len(procs))):
        for w, proc in enumerate(procs):
            if proc.poll() is not None:
                err = (work / f"err-{w}").read_text()[-3000:]
                pytest.fail(f"writer {w} exited early ({proc.returncode}):\n{err}")
        assert time.monotonic() < deadline, f"writers not ready after {timeout}s"
        time.sleep(0.05)


@pytest.mark.slow
def test_four_processes_commit_25_revisions_each(spark, tmp_path):
    root = str(tmp_path / "dataset")
    work = tmp_path / "work"
    work.mkdir()
    procs = []
    for w in range(WRITERS):
        with open(work / f"out-{w}", "w") as out, open(work / f"err-{w}", "w") as err:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", WRITER, root, str(work), str(w), str(COMMITS)],
                    stdout=out,
                    stderr=err,  # files, not pipes: a full pipe would block a writer
                )
            )
    try:
        wait_for(work, procs, START_TIMEOUT_S)
        (work / "go").touch()  # all JVMs are up: the writers now race for the log
        for proc in procs:
            proc.wait(timeout=RUN_TIMEOUT_S)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for w, proc in enumerate(procs):
        assert proc.returncode == 0, (work / f"err-{w}").read_text()[-3000:]
        assert len((work / f"out-{w}").read_text().splitlines()) == COMMITS

    total = WRITERS * COMMITS
    # the writers kept description.parquet current among themselves (before any handle heals it)
    desc = pd.read_parquet(Path(root) / "description.parquet")
    assert list(desc["sequence"]) == list(range(1, total + 1))
    ds = RevisionedDataset(root, spark=spark)
    records = ds.revisions()
    assert list(desc["name"]) == [r.name for r in records]
    assert [r.sequence for r in records] == list(range(1, total + 1))
    assert len({r.name for r in records}) == total
    assert sorted((r.properties["writer"], int(r.properties["i"])) for r in records) == sorted(
        (str(w), i) for w in range(WRITERS) for i in range(COMMITS)
    )
    log = ds.log()
    assert list(log["sequence"]) == list(range(1, total + 1))
    assert list(log["name"]) == [r.name for r in records]

    model = Model()
    for r in records:
        w, i = r.properties["writer"], int(r.properties["i"])
        model.commit(r.name, r.timestamp, r.is_major, {f"w{w}": writer_rows(i)})
    # each writer's final rows, with the revision each one comes from
    for w in range(WRITERS):
        check_state(ds, model, f"w{w}")
    # and a positional read in the middle of the interleaved log
    for w in range(WRITERS):
        check_state(ds, model, f"w{w}", at=total // 2)
    # every committed file still exists (nothing was lost or overwritten)
    for r in records:
        for write in r.tables.values():
            assert write.files and all((Path(root) / f).is_file() for f in write.files)


def check_state(ds, model, table, **where):
    if not model.history(table, where.get("at")):
        return  # this writer had not committed its major yet at that position
    want = {
        k[0]: (row["v"], rev.name) for k, (row, rev) in model.state(table, **where).rows.items()
    }
    df = ds.read(table, with_revision=True, **where)
    got = {r["id"]: (r["v"], r["_revision"]) for r in df.collect()}
    assert got == want, f"read({table!r}, {where})"
    assert top_dirs(input_files(df, ds.root)) <= {r.name for r in model.state(table, **where).live}


def test_same_custom_name_racing_never_loses_the_committed_revision(spark, root, monkeypatch):
    """Writer B validates name 'nightly' while it is free; writer A then commits 'nightly'
    before B claims the folder. B must fail cleanly and A's revision must stay intact."""
    a = RevisionedDataset(root, spark=spark, id_columns=["id"])
    b = RevisionedDataset(root, spark=spark, id_columns=["id"])
    a.commit({"t": frame(spark, [(0, 0)], "id long, v long")}, timestamp=day(0), is_major=True)
    original = CommitTransaction.claim_folder
    fired = []

    def a_commits_first(transaction):
        if not fired:  # B's claim: A commits the same name first
            fired.append(transaction.request.name)
            a.commit(
                {"t": frame(spark, [(1, 1)], "id long, v long")},
                timestamp=day(1),
                is_major=False,
                name="nightly",
            )
        return original(transaction)

    monkeypatch.setattr(CommitTransaction, "claim_folder", a_commits_first)
    with pytest.raises(DuplicateRevisionNameError, match="nightly"):
        b.commit(
            {"t": frame(spark, [(2, 2)], "id long, v long")},
            timestamp=day(1),
            is_major=False,
            name="nightly",
        )
    committed = a.revision("nightly")
    assert committed.sequence == 2 and a.head_sequence == 2
    missing = [f for f in committed.tables["t"].files if not (Path(root) / f).is_file()]
    assert not missing, f"files of committed revision 'nightly' were deleted: {missing}"
    assert {r.id: r.v for r in a.read("t").collect()} == {0: 0, 1: 1}


def test_a_writer_that_claimed_a_name_keeps_it(spark, root, monkeypatch):
    """A second writer of the same name while the first writes its data is refused at once,
    and the first writer's files and commit are untouched."""
    a = RevisionedDataset(root, spark=spark, id_columns=["id"])
    b = RevisionedDataset(root, spark=spark, id_columns=["id"])
    a.commit({"t": frame(spark, [(0, 0)], "id long, v long")}, timestamp=day(0), is_major=True)
    original = CommitTransaction.write_table
    refused = []

    def a_tries_meanwhile(*args, **kwargs):
        if refused:
            return original(*args, **kwargs)
        with pytest.raises(DuplicateRevisionNameError, match="nightly") as error:
            a.commit(
                {"t": frame(spark, [(1, 1)], "id long, v long")},
                timestamp=day(1),
                is_major=False,
                name="nightly",
            )
        refused.append(error.value)
        return original(*args, **kwargs)

    monkeypatch.setattr(CommitTransaction, "write_table", a_tries_meanwhile)
    b.commit(
        {"t": frame(spark, [(2, 2)], "id long, v long")},
        timestamp=day(1),
        is_major=False,
        name="nightly",
    )
    assert refused and b.revision("nightly").sequence == 2
    assert {r.id: r.v for r in a.read("t").collect()} == {0: 0, 2: 2}
