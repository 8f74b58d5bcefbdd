"""The resolver's pure rules (``revisions_assets.dagster.resources.slice``): windows, the
partitions a revision covers, and what a scoring run must do. No Spark, no Dagster run: log
records and a partitions definition."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pytest
from harness.dates import day

from revisions_assets.core.log.records import Revision, TableWrite, UpstreamPosition
from revisions_assets.core.runs.versions import decide_major
from revisions_assets.dagster.resources.address import UpstreamRef
from revisions_assets.dagster.resources.slice import (
    InvalidRunTagError,
    ScoringRangeError,
    UpstreamNotReadyError,
    check_requested_partitions,
    compute_window,
    format_upstream_heads,
    parse_upstream_heads,
    partition_gaps,
    partition_landings,
    plan_consumer,
    revision_partitions,
    upstream_slice,
)

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")
FEATURES = UpstreamRef("features", "features", "main", "features", ("entity",), "main")
GROUPS = UpstreamRef("groups", "groups", "ref", "groups", ("grp",), "reference")
ROOTS = {"features": "/data/main", "groups": "/data/ref"}


#: day 0 of the January 2024 the partitions cover: ``day(d, JANUARY)`` is 2024-01-d, key(d)'s day
JANUARY = datetime(2023, 12, 31, tzinfo=UTC)


def key(d: int) -> str:
    return f"2024-01-{d:02d}"


def rev(
    seq: int,
    table: str,
    end_day: int,
    major: bool = False,
    partitions: str | None = None,
    version: str = "1",
    upstream: tuple[UpstreamPosition, ...] = (),
) -> Revision:
    """A revision of ``table`` stamped at the end of day ``end_day - 1``."""
    return Revision(
        name=f"r{seq}",
        timestamp=day(end_day, JANUARY),
        is_major=major,
        sequence=seq,
        committed_at=day(end_day, JANUARY),
        tables={table: TableWrite(("id",), "{}", version, 1, 0, (), 0)},
        producer={"partition_key": partitions} if partitions else {},
        upstream=upstream,
    )


def scored(seq: int, end_day: int, partitions: str, features: int, groups: int, major=False):
    positions = (
        UpstreamPosition(ROOTS["features"], "features", features),
        UpstreamPosition(ROOTS["groups"], "groups", groups),
    )
    return rev(seq, "scores", end_day, major, partitions, upstream=positions)


def slices(scores, features, groups, pins=None):
    pins = pins or {}
    return (
        upstream_slice(FEATURES, ROOTS["features"], features, scores, "scores", pins.get("f")),
        upstream_slice(GROUPS, ROOTS["groups"], groups, scores, "scores", pins.get("g")),
    )


def test_windows_and_majors():
    keys = dg.PartitionKeyRange(key(3), key(4))
    assert compute_window(DAILY, keys, is_major=False) == (day(3, JANUARY), day(5, JANUARY))
    # a major starts from the first day
    assert compute_window(DAILY, keys, is_major=True) == (day(1, JANUARY), day(5, JANUARY))
    head = rev(4, "features", 3, version="1")
    assert decide_major(None, "features", "1", False) == (True, "first revision of the table")
    assert decide_major(head, "features", "2", False)[0] is True
    assert decide_major(head, "features", "1", False)[0] is False
    assert decide_major(head, "features", "1", True)[1] == "major forced by run tag or config"


@pytest.mark.parametrize(
    "revision, covered",
    [
        (rev(1, "features", 4, major=True, partitions=key(3)), (key(1), key(3))),  # a major: all
        (rev(2, "features", 4, partitions=key(3)), (key(3), key(3))),
        (rev(3, "features", 6, partitions=f"{key(2)}...{key(5)}"), (key(2), key(5))),
        (rev(4, "features", 5), (key(4), key(4))),  # written outside Dagster: its timestamp
    ],
)
def test_the_partitions_a_revision_covers(revision, covered):
    assert revision_partitions(revision, DAILY) == dg.PartitionKeyRange(*covered)


def test_first_scoring_run_is_a_major_over_every_upstream_day():
    features = [rev(1, "features", 2, True, key(1)), rev(2, "features", 3, False, key(2))]
    groups = [rev(1, "groups", 2, True)]
    upstream = slices([], features, groups)
    plan = plan_consumer([], "scores", "1", False, upstream, DAILY)
    assert (plan.is_major, plan.covers) == (True, dg.PartitionKeyRange(key(1), key(2)))
    assert [(u.since, u.head, u.data_version) for u in plan.upstream] == [
        (0, 2, "features@2"),
        (0, 1, "groups@1"),
    ]
    check_requested_partitions("scores", plan, plan.covers, [], DAILY)  # the sensor's range
    with pytest.raises(ScoringRangeError, match=r"asks for partitions 2024-01-02.*cover "):
        check_requested_partitions("scores", plan, dg.PartitionKeyRange(key(2), key(2)), [], DAILY)


def test_minor_covers_the_pending_days_and_may_re_include_scored_ones():
    features = [
        rev(1, "features", 2, True, key(1)),
        rev(2, "features", 3, False, key(2)),
        rev(3, "features", 5, False, f"{key(3)}...{key(4)}"),
        rev(4, "features", 3, False, key(2)),  # a backfill of day 2, committed late
    ]
    groups = [rev(1, "groups", 2, True)]
    history = [scored(1, 3, f"{key(1)}...{key(2)}", features=2, groups=1, major=True)]
    plan = plan_consumer(history, "scores", "1", False, slices(history, features, groups), DAILY)
    assert not plan.is_major and plan.covers == dg.PartitionKeyRange(key(2), key(4))
    for first, last in [(key(2), key(4)), (key(1), key(4))]:  # day 1 is already scored
        check_requested_partitions(
            "scores", plan, dg.PartitionKeyRange(first, last), history, DAILY
        )
    for first, last in [(key(3), key(4)), (key(2), key(5))]:  # a day left out; day 5 unscored
        with pytest.raises(ScoringRangeError):
            check_requested_partitions(
                "scores", plan, dg.PartitionKeyRange(first, last), history, DAILY
            )


def test_reference_changes_cover_the_newest_day_and_nothing_pending_covers_nothing():
    features = [rev(1, "features", 2, True, key(1)), rev(2, "features", 3, False, key(2))]
    groups = [rev(1, "groups", 2, True), rev(2, "groups", 4)]
    history = [scored(1, 3, f"{key(1)}...{key(2)}", features=2, groups=1, major=True)]
    plan = plan_consumer(history, "scores", "1", False, slices(history, features, groups), DAILY)
    assert plan.covers == dg.PartitionKeyRange(key(2), key(2)) and not plan.is_major

    history.append(scored(2, 3, key(2), features=2, groups=2))
    idle = plan_consumer(history, "scores", "1", False, slices(history, features, groups), DAILY)
    assert idle.covers is None and "nothing new upstream" in idle.reason
    # a new scoring code version re-scores everything, even with nothing pending
    bumped = plan_consumer(history, "scores", "2", False, slices(history, features, groups), DAILY)
    assert bumped.is_major and bumped.covers == dg.PartitionKeyRange(key(1), key(2))


def test_an_upstream_major_resets_the_consumer():
    features = [
        rev(1, "features", 2, True, key(1)),
        rev(2, "features", 4, True, key(3), version="2"),
    ]
    groups = [rev(1, "groups", 2, True)]
    history = [scored(1, 2, key(1), features=1, groups=1, major=True)]
    plan = plan_consumer(history, "scores", "1", False, slices(history, features, groups), DAILY)
    assert plan.is_major and plan.reason == "upstream reset in features"
    assert plan.covers == dg.PartitionKeyRange(key(1), key(3))


def test_pinned_heads_never_move_a_position_back():
    features = [rev(s, "features", s + 1, s == 1, key(s)) for s in (1, 2, 3)]
    groups = [rev(1, "groups", 2, True)]
    history = [scored(1, 4, f"{key(1)}...{key(3)}", features=3, groups=1, major=True)]
    old_pin = slices(history, features, groups, pins={"f": 2, "g": 1})
    assert [(u.since, u.head, u.pending) for u in old_pin] == [(3, 3, ()), (1, 1, ())]
    pinned = slices([], features, groups, pins={"f": 2})
    assert pinned[0].head == 2 and [r.sequence for r in pinned[0].pending] == [1, 2]
    with pytest.raises(InvalidRunTagError, match="beyond the upstream head"):
        slices([], features, groups, pins={"f": 9})
    with pytest.raises(UpstreamNotReadyError, match="materialize it first"):
        slices([], features, [])


def test_upstream_heads_tag_round_trip():
    features = [rev(1, "features", 2, True, key(1))]
    upstream = slices([], features, [rev(1, "groups", 2, True), rev(2, "groups", 3)])
    tag = format_upstream_heads(upstream)
    assert tag == "features@1,groups@2"
    assert parse_upstream_heads(tag) == {"features": 1, "groups": 2}
    assert parse_upstream_heads("prefix/asset@7") == {"prefix/asset": 7}
    with pytest.raises(InvalidRunTagError, match="upstream_heads"):
        parse_upstream_heads("features=3")


def test_when_each_partition_landed_and_the_gaps_between():
    history = [
        rev(1, "features", 2, True, key(1)),
        rev(2, "features", 3, False, key(2)),
        rev(3, "features", 6, False, key(5)),  # days 3 and 4 never ran
        rev(4, "features", 3, False, key(2)),  # day 2 again, later
    ]
    landed = partition_landings(history, DAILY)
    assert {k: r.sequence for k, r in landed.items()} == {key(1): 1, key(2): 4, key(5): 3}
    assert partition_gaps(landed, DAILY) == [dg.PartitionKeyRange(key(3), key(4))]
    # a major covers every day up to its end: no gap left, each day landed with it
    major = rev(5, "features", 6, True, key(5), version="2")
    landed = partition_landings([*history, major], DAILY)
    assert partition_gaps(landed, DAILY) == [] and {r.sequence for r in landed.values()} == {5}
    assert partition_gaps({}, DAILY) == []
