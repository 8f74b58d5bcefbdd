"""Both merge plans give the same state; ``auto`` picks by the sizes in the log."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest

from revisions_assets import RevisionedDataset
from revisions_assets.core.merge import choose_strategy

START = datetime(2021, 3, 1, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    """A major and eight minors with overlapping ids, tombstones and out-of-order timestamps."""
    root = str(tmp_path_factory.mktemp("plans") / "ds")
    ds = RevisionedDataset(root, spark=spark, id_columns=["k1", "k2"])
    rng = random.Random(7)
    base = [(i % 7, i, float(i), False) for i in range(60)]
    schema = "k1 int, k2 int, value double, _deleted boolean"
    ds.commit({"t": spark.createDataFrame(base, schema)}, timestamp=START, is_major=True)
    for n in range(8):
        ids = rng.sample(range(80), 12)
        rows = [(i % 7, i, float(100 * (n + 1) + i), rng.random() < 0.25) for i in ids]
        when = START + timedelta(days=rng.choice([1, 2, 2, 3, 5]))
        ds.commit({"t": spark.createDataFrame(rows, schema)}, timestamp=when, is_major=False)
    return root


def state(spark, root, strategy, **read):
    ds = RevisionedDataset(root, spark=spark, merge_strategy=strategy)
    return sorted(tuple(r) for r in ds.read("t", **read).collect())


@pytest.mark.parametrize("read", [{}, {"at": 5}, {"as_of": START + timedelta(days=2)}])
def test_broadcast_and_window_plans_agree(spark, history, read):
    window = state(spark, history, "window", **read)
    assert window == state(spark, history, "broadcast", **read)
    assert window == state(spark, history, "auto", **read)
    assert window  # the comparison is not vacuous


def test_change_reads_agree_across_plans(spark, history):
    results = []
    for strategy in ("broadcast", "window"):
        ds = RevisionedDataset(history, spark=spark, merge_strategy=strategy)
        changes = ds.changes("t", since_sequence=4)
        results.append(sorted(tuple(r) for r in changes.df.collect()))
    assert results[0] == results[1] and results[0]


def test_auto_uses_the_logged_row_counts(spark, history):
    revisions = RevisionedDataset(history, spark=spark).revisions("t")
    assert choose_strategy(revisions[:1], "t", "auto") == "auto"  # one revision: plain read
    assert choose_strategy(revisions, "t", "auto") == "window"  # 96 newer rows > 60 base rows
    assert choose_strategy(revisions[:3], "t", "auto") == "broadcast"  # 24 newer rows
