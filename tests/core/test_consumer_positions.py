"""Consumer positions commit with the output: exactly-once guards of docs/concepts/consumers.md at
the engine level."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from revisions_assets import RevisionedDataset, UpstreamPosition
from revisions_assets.core.errors import ConsumerPositionConflictError

from .helpers import frame

T = datetime(2022, 5, 1, tzinfo=timezone.utc)
UP = "/somewhere/upstream"


@pytest.fixture
def scores(spark, root):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    first = frame(spark, [(1, 0.5)], "id long, score double")
    ds.commit({"s": first}, timestamp=T, is_major=True, upstream=[UpstreamPosition(UP, "f", 3)])
    return ds


def test_positions_are_recorded_and_guarded(spark, scores):
    assert scores.inspect.upstream_position(UP, "f") == 3
    df = frame(spark, [(2, 0.7)], "id long, score double")
    with pytest.raises(ConsumerPositionConflictError, match=r"from sequence 2, but 3 is already"):
        scores.commit(
            {"s": df},
            timestamp=T,
            is_major=False,
            upstream=[UpstreamPosition(UP, "f", 5)],
            expected_positions={(UP, "f"): 2},
        )
    with pytest.raises(ConsumerPositionConflictError, match="would go back from 3 to 1"):
        scores.commit(
            {"s": df}, timestamp=T, is_major=False, upstream=[UpstreamPosition(UP, "f", 1)]
        )
    assert scores.head_sequence == 1  # failed commits changed nothing
    rev = scores.commit(
        {"s": df},
        timestamp=T,
        is_major=False,
        upstream=[UpstreamPosition(UP, "f", 5)],
        expected_positions={(UP, "f"): 3},
    )
    assert rev.sequence == 2 and scores.inspect.upstream_position(UP, "f", "s") == 5


def test_an_empty_output_still_records_a_moved_position(spark, scores):
    empty = frame(spark, [], "id long, score double")
    rev = scores.commit(
        {"s": empty},
        timestamp=T,
        is_major=False,
        upstream=[UpstreamPosition(UP, "f", 4)],
        expected_positions={(UP, "f"): 3},
    )
    assert rev is not None and rev.tables["s"].rows == 0
    assert scores.inspect.upstream_position(UP, "f", "s") == 4
    assert sorted(r.id for r in scores.read("s").collect()) == [1]
    # nothing new read and nothing written: no revision
    assert (
        scores.commit(
            {"s": empty}, timestamp=T, is_major=False, upstream=[UpstreamPosition(UP, "f", 4)]
        )
        is None
    )
    assert scores.head_sequence == 2
