"""The pure log-walking rules of docs/concepts/read-semantics.md, without Spark."""

from __future__ import annotations

import pytest
from harness.dates import day

from revisions_assets.core.errors import (
    AmbiguousRevisionError,
    NoMajorRevisionError,
    UnknownRevisionError,
    UnknownTableError,
)
from revisions_assets.core.log.records import Revision, TableWrite
from revisions_assets.core.log.view import table_revisions
from revisions_assets.core.read.plan.refs import find_revision, resolve_position
from revisions_assets.core.read.plan.selection import (
    changes_by_sequence,
    changes_by_time,
    state_selection,
)


def rev(seq: int, ts: int, major: bool, tables=("t",), name: str | None = None) -> Revision:
    write = TableWrite(("id",), '{"type":"struct","fields":[]}', "v1", 1, 0, (), 0)
    return Revision(
        name=name or f"r{seq}",
        timestamp=day(ts),
        is_major=major,
        sequence=seq,
        committed_at=day(28),
        tables={t: write for t in tables},
    )


WORKED = [
    rev(1, 1, True, name="r0"),
    rev(2, 3, False, name="r2"),
    rev(3, 5, True, name="r4"),
    rev(4, 7, False, name="r6"),
]


def names(revisions) -> list[str]:
    return [r.name for r in revisions]


def test_worked_example_selection():
    assert names(state_selection(WORKED, "t").merge) == ["r4", "r6"]
    assert names(state_selection(WORKED, "t", day(2)).merge) == ["r0"]
    assert names(state_selection(WORKED, "t", day(4)).merge) == ["r0", "r2"]
    window = changes_by_time(WORKED, "t", day(2), day(4))
    assert not window.is_reset and names(window.window) == ["r2"]
    reset = changes_by_time(WORKED, "t", day(2), day(6))
    assert reset.is_reset and names(reset.merge) == ["r4"]


def test_no_major_before_time_is_an_error():
    with pytest.raises(NoMajorRevisionError, match="'t'.*as of 2019"):
        state_selection(WORKED, "t", day(-1))  # 2019-12-31


def test_since_is_exclusive_and_until_inclusive():
    assert changes_by_time(WORKED, "t", day(3), day(7)).is_reset  # r4 (day 5) is inside
    assert not changes_by_time(WORKED, "t", day(5), day(7)).is_reset  # r4 is at since: excluded
    assert changes_by_time(WORKED, "t", day(5), day(7)).window[0].name == "r6"
    assert changes_by_time(WORKED, "t", day(5), day(6)).window == ()
    assert changes_by_time(WORKED, "t", None, day(7)).is_reset


def test_out_of_order_timestamps_order_by_time_then_sequence():
    history = [rev(1, 1, True), rev(2, 5, False), rev(3, 3, False), rev(4, 3, False)]
    assert names(state_selection(history, "t").merge) == ["r1", "r3", "r4", "r2"]
    # the late-committed early revision r4 is seen by a consumer that consumed up to 3
    changed = changes_by_sequence(history, "t", 3, 4)
    assert names(changed.window) == ["r4"]
    assert names(changed.merge) == ["r4", "r2"]  # r2 (later timestamp) still wins
    assert changed.restrict


def test_consumer_form_resets_on_a_major_committed_after_the_position():
    history = [rev(1, 1, True), rev(2, 2, False), rev(3, 3, True), rev(4, 4, False)]
    assert changes_by_sequence(history, "t", 2, 4).is_reset
    assert not changes_by_sequence(history, "t", 3, 4).is_reset
    assert changes_by_sequence(history, "t", 4, 4).window == ()
    assert changes_by_sequence(history, "t", None, 4).is_reset
    with pytest.raises(UnknownRevisionError, match="after the head"):
        changes_by_sequence(history, "t", 5, 4)


def test_a_major_stamped_before_consumed_minors_voids_only_older_ones():
    # a backfilled major at day 2 committed after a minor at day 4: the minor still wins
    history = [rev(1, 1, True), rev(2, 4, False), rev(3, 2, True)]
    assert names(state_selection(history, "t").merge) == ["r3", "r2"]
    assert changes_by_sequence(history, "t", 2, 3).is_reset


def test_positions():
    records = [rev(1, 1, True), rev(2, 2, False, tables=("u",)), rev(3, 3, False)]
    assert resolve_position(records, "t", None) == 3
    assert resolve_position(records, "t", "HEAD") == 3
    assert resolve_position(records, "t", "HEAD~1") == 1  # one revision of t back
    assert resolve_position(records, "t", "r2") == 2
    assert resolve_position(records, "t", 2) == 2
    with pytest.raises(UnknownRevisionError, match=r"has 2 data revisions \(HEAD..HEAD~1\)"):
        resolve_position(records, "t", "HEAD~2")
    with pytest.raises(UnknownRevisionError, match="no revision named 'nope'"):
        resolve_position(records, "t", "nope")
    with pytest.raises(UnknownRevisionError, match="outside the log"):
        resolve_position(records, "t", 9)


def test_head_counts_the_data_revisions_of_the_table_or_of_the_log():
    """Reads count ``HEAD~n`` in the table's history, ``find_revision`` in the whole log's
    data revisions; neither counts maintenance entries, and both say what they can reach."""
    compaction = Revision("c", day(9), False, 4, day(28), {}, kind="compaction")
    records = [rev(1, 1, True), rev(2, 2, False, tables=("u",)), rev(3, 3, False), compaction]
    assert resolve_position(records, "t", "HEAD~1") == 1
    assert find_revision(records, "HEAD~1").name == "r2"  # u's revision counts in the log
    assert find_revision(records, "HEAD").name == "r3"  # the compaction has no ref
    with pytest.raises(UnknownRevisionError, match=r"table 't' has 2 data revisions"):
        resolve_position(records, "t", "HEAD~2")
    with pytest.raises(UnknownRevisionError, match=r"has 1 data revision \(HEAD\);"):
        resolve_position(records, "u", "HEAD~1")
    with pytest.raises(UnknownRevisionError, match=r"log has 3 data revisions \(HEAD..HEAD~2\)"):
        find_revision(records, "HEAD~3")


def test_a_unique_name_prefix_names_a_revision():
    names = ["3f9a0c11", "3f9a7d22", "compaction-3f9a"]
    records = [rev(n + 1, n + 1, n == 0, name=name) for n, name in enumerate(names)]
    assert resolve_position(records, "t", "3f9a0") == 1
    assert resolve_position(records, "t", "3f9a7d22") == 2  # a whole name
    assert find_revision(records, "compaction").sequence == 3
    with pytest.raises(AmbiguousRevisionError) as ambiguous:
        resolve_position(records, "t", "3f9a")
    assert str(ambiguous.value) == (
        "'3f9a' is the prefix of 2 revision names: 3f9a0c11 (sequence 1), 3f9a7d22 "
        "(sequence 2); give more characters"
    )
    with pytest.raises(UnknownRevisionError, match="needs at least 4 characters"):
        resolve_position(records, "t", "3f9")
    with pytest.raises(UnknownRevisionError, match="outside the log"):
        resolve_position(records, "t", "1234")  # digits are a sequence, never a prefix


def test_revisions_of_other_tables_are_invisible():
    records = [rev(1, 1, True, tables=("t", "u")), rev(2, 2, True, tables=("u",))]
    assert names(state_selection(table_revisions(records, "t"), "t").merge) == ["r1"]
    with pytest.raises(UnknownTableError, match="'v'.*known tables: 't', 'u'$"):
        table_revisions(records, "v")
