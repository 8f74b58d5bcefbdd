"""A long log: 2,000 revisions, all present, gap-free, described, and still read correctly.

The first and last revisions go through the engine with Spark; the 1,998 in between are
committed through the log layer itself (RevisionLog + Revision records, one put-if-absent
entry each), with one-row data files written by pyarrow in the engine's file layout, and
the post-commit upkeep wherever it writes a checkpoint (every CHECKPOINT_INTERVAL entries):
between those it only rewrites description.parquet, which the next upkeep rewrites whole
(rewriting it 2,000 times was most of the test's time). No timing is asserted: the cost belongs
to the benchmarks.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from harness.dates import day

from revisions_assets import RevisionedDataset
from revisions_assets.core.log.revision_log import CHECKPOINT_INTERVAL, RevisionLog
from revisions_assets.core.storage.backends import open_storage

from .helpers import STAGED_SCHEMA, frame, input_files, stage_revision, top_dirs
from .model import Model

TOTAL = 2000
#: later majors: a read after one ignores everything before it (and stays a small merge)
MAJORS = (1000, 1990)


def name_of(seq: int) -> str:
    return f"r{seq:04d}"


def planned(seq: int) -> tuple[datetime, bool, dict]:
    """Revision seq: (timestamp, is_major, {key: row or None}) with backfills and tombstones."""
    if seq in MAJORS:
        return day(1) + timedelta(minutes=seq), True, {(i,): {"v": -seq} for i in range(13)}
    # every 7th is an old partition recomputed late: stamped before the later majors
    stamp = day(0.5) if seq % 7 == 0 else day(1) + timedelta(minutes=seq)
    return stamp, False, {(seq % 13,): None if seq % 11 == 0 else {"v": seq}}


@pytest.mark.slow
def test_two_thousand_revisions(spark, root):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    first = {(i,): {"v": -1} for i in range(13)}
    ds.commit(
        {"t": frame(spark, [(k[0], r["v"]) for k, r in first.items()], "id long, v long")},
        timestamp=day(0),
        is_major=True,
        version="v1",
        name=name_of(1),
    )
    model = Model()
    model.commit(name_of(1), day(0), True, {"t": first})

    log = RevisionLog(open_storage(root))
    log.refresh()
    assert log.records[0].tables["t"].schema_json == STAGED_SCHEMA
    for seq in range(2, TOTAL):
        stamp, is_major, rows = planned(seq)
        record = stage_revision(log, root, name_of(seq), stamp, is_major, rows)
        assert record.sequence == seq
        if seq % CHECKPOINT_INTERVAL == 0:
            log.after_commit()
        model.commit(record.name, stamp, is_major, {"t": rows})

    last = ds.commit(
        {"t": frame(spark, [(5, 2000)], "id long, v long")},
        timestamp=day(3),
        is_major=False,
        version="v1",
        name=name_of(TOTAL),
    )
    model.commit(name_of(TOTAL), day(3), False, {"t": {(5,): {"v": 2000}}})
    assert last.sequence == TOTAL

    fresh = RevisionedDataset(root, spark=spark)
    records = fresh.revisions()
    assert [r.sequence for r in records] == list(range(1, TOTAL + 1))
    assert [r.name for r in records] == [name_of(s) for s in range(1, TOTAL + 1)]
    desc = pd.read_parquet(Path(root) / "description.parquet")
    assert len(desc) == TOTAL and desc["name"].iloc[-1] == name_of(TOTAL)
    assert list(desc["name"]) == [r.name for r in records]

    positions = ({"at": 1}, {"at": 40}, {"at": 1000}, {"at": 1030}, {"at": "HEAD~1"}, {})
    for where in positions:
        want = model.state("t", **where)
        df = fresh.read("t", with_revision=True, **where)
        got = {r["id"]: (r["v"], r["_revision"]) for r in df.collect()}
        assert got == {k[0]: (row["v"], rev.name) for k, (row, rev) in want.rows.items()}, where
        assert top_dirs(input_files(df, root)) <= {r.name for r in want.live}
