"""Concurrent writers (docs/guides/engine.md, docs/concepts/lifecycle.md): separate OS processes
commit through the real engine at once.

Two writers commit minors to one table with colliding and out-of-order timestamps while a
third process compacts that table over and over (tests/harness/processes.py starts them
from one line). Each round's appends are lined up (tests/harness/race_points.py), so the
writers lose races for real and the engine's re-validation and retry is what lands them;
the engine's own count of lost races must be above zero. The log decides the order; the
expected state at any sequence follows from the data revisions alone, through
tests/core/model.py, whatever compactions landed between.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
from harness.dates import day
from harness.processes import HARNESS, race

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import DuplicateRevisionNameError
from revisions_assets.core.write.transaction import CommitTransaction

from .helpers import frame, input_files, top_dirs
from .model import Model

WRITERS = 2
COMMITS = 6  # rounds of racing appends: each round lines the writers up again (every one contends)
BASE_IDS = 30


def writer_rows(writer: int, i: int) -> dict:
    """What commit i of a writer wrote: ids i and i+1 (so commits overwrite each other)."""
    return {(i,): {"v": 100 * writer + i}, (i + 1,): {"v": 100 * writer + i}}


@pytest.mark.slow
def test_two_writers_and_a_compactor_commit_at_once(spark, tmp_path):
    root = str(tmp_path / "dataset")
    work = tmp_path / "work"
    work.mkdir()
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    base = ds.commit(
        {"t": frame(spark, [(i, -1) for i in range(BASE_IDS)], "id long, v long")},
        timestamp=day(0),
        is_major=True,
        version="v1",
        name="base",
    )
    data_revisions = 1 + WRITERS * COMMITS
    writer, compactor = str(HARNESS / "race_writer.py"), str(HARNESS / "race_compactor.py")
    commands = [
        [sys.executable, writer, root, str(work), str(w), str(COMMITS), str(WRITERS)]
        for w in range(WRITERS)
    ]
    commands.append(
        [sys.executable, compactor, root, str(work), str(WRITERS), str(COMMITS)]
        + [str(data_revisions)]
    )
    outputs = race(commands, work)
    lines = [out.read_text().splitlines() for out in outputs]
    lost = [int(out[-1].removeprefix("lost_races ")) for out in lines]
    print(f"lost races (writers..., compactor): {lost}")
    assert sum(lost[:WRITERS]) > 0, "the writers never contended: the race proves nothing"
    for out in lines[:WRITERS]:
        assert len(out) == COMMITS + 1
    compacted = [line.split() for line in lines[WRITERS][:-1]]

    # the writers kept description.parquet current among themselves (before any handle heals it)
    desc = pd.read_parquet(Path(root) / "description.parquet")
    fresh = RevisionedDataset(root, spark=spark)
    records = fresh.revisions()
    total = len(records)
    assert list(desc["sequence"]) == list(range(1, total + 1))  # gap-free, nothing lost
    assert [r.sequence for r in records] == list(range(1, total + 1))
    data = [r for r in records if r.is_data]
    compactions = [r for r in records if r.kind == "compaction"]
    assert len(data) == data_revisions and len(compactions) == len(compacted) >= 1
    assert {(str(r.sequence), r.name) for r in compactions} == {tuple(c) for c in compacted}
    assert sorted((r.properties["writer"], int(r.properties["i"])) for r in data[1:]) == sorted(
        (str(w), i) for w in range(WRITERS) for i in range(COMMITS)
    )
    assert list(fresh.inspect.log()["name"]) == [r.name for r in records]

    model = Model()
    model.commit(base.name, base.timestamp, True, {"t": {(i,): {"v": -1} for i in range(BASE_IDS)}})
    for r in data[1:]:
        rows = writer_rows(int(r.properties["writer"]), int(r.properties["i"]))
        model.commit(r.name, r.timestamp, False, {"t": rows})
    data_seqs = [r.sequence for r in data]

    def model_at(sequence: int) -> int:
        return sum(s <= sequence for s in data_seqs)

    # every compaction holds exactly the merge set of a default read at its `through`
    for c in compactions:
        covers = c.replaces["t"]
        expected = model.state("t", at=model_at(covers.through)).live
        assert (covers.major, covers.revisions) == (1, len(expected))
    newest = compactions[-1]
    df = check_state(fresh, model, {}, {})
    assert newest.name in top_dirs(input_files(df, root))  # the latest read uses it
    for seq in (total // 3, total // 2, newest.sequence, newest.sequence - 1, total):
        check_state(fresh, model, {"at": seq}, {"at": model_at(seq)})
    check_state(fresh, model, {"as_of": day(2)}, {"as_of": day(2)})
    for since in (1, total // 2):
        cs = fresh.changes("t", since_sequence=since)
        want = model.changes_since_sequence("t", model_at(since))
        got = {r["id"]: r["v"] for r in cs.df.collect()}
        assert (cs.is_reset, got) == (
            want.is_reset,
            {k[0]: row["v"] for k, (row, _) in want.rows.items()},
        )
    # every committed file still exists (nothing was lost or overwritten)
    for r in records:
        for write in r.tables.values():
            assert write.files and all((Path(root) / f).is_file() for f in write.files)


def check_state(ds, model, where: dict, model_where: dict):
    want = {
        k[0]: (row["v"], rev.name) for k, (row, rev) in model.state("t", **model_where).rows.items()
    }
    df = ds.read("t", with_revision=True, **where)
    got = {r["id"]: (r["v"], r["_revision"]) for r in df.collect()}
    assert got == want, f"read('t', {where})"
    return df


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
