"""docs/concepts/read-semantics.md worked example, every bullet, exactly: ids, and which revision
(day) each row is from."""

from __future__ import annotations

from datetime import timedelta, timezone

import pytest
from harness.dates import day

from revisions_assets import RevisionedDataset

from .helpers import by_id, frame
from .model import Model

# name, day offset, major, ids: the table of docs/concepts/read-semantics.md (r<n> is stamped
# 2020-01-01 + n days)
EXAMPLE = [
    ("r0", 0, True, range(0, 5)),
    ("r2", 2, False, range(2, 7)),
    ("r4", 4, True, range(4, 9)),
    ("r6", 6, False, range(6, 11)),
]


def expect(*spans: tuple[range, int]) -> dict:
    """{id: (day,)} from (ids, day) spans."""
    return {i: (d,) for ids, d in spans for i in ids}


@pytest.fixture(scope="module")
def ds(spark, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("worked") / "dataset")
    dataset = RevisionedDataset(root, spark=spark, id_columns=["id"])
    for name, d, major, ids in EXAMPLE:
        rev = dataset.commit(
            {"t": frame(spark, [(i, d) for i in ids], "id long, day int")},
            timestamp=day(d),
            is_major=major,
            version="v1",
            name=name,
        )
        assert rev is not None and rev.name == name
    return dataset


def test_latest_state(ds):
    # ids 4,5 (day 4) and 6-10 (day 6); ids 0-3 are voided by r4
    assert by_id(ds.read("t"), "day") == expect((range(4, 6), 4), (range(6, 11), 6))


def test_as_of_day_2(ds):
    # as of 2020-01-02: ids 0-4 from r0
    assert by_id(ds.read("t", as_of=day(1)), "day") == expect((range(0, 5), 0))


def test_as_of_day_4(ds):
    # as of 2020-01-04: ids 0,1 from r0; 2-6 from r2
    assert by_id(ds.read("t", as_of=day(3)), "day") == expect((range(0, 2), 0), (range(2, 7), 2))


def test_times_in_other_zones_are_the_same_instants(ds):
    plus5 = timezone(timedelta(hours=5))
    assert by_id(ds.read("t", as_of=day(3).astimezone(plus5)), "day") == by_id(
        ds.read("t", as_of=day(3)), "day"
    )
    assert by_id(ds.read("t", as_of="2020-01-04T05:00:00+05:00"), "day") == by_id(
        ds.read("t", as_of=day(3)), "day"
    )


def test_changes_not_a_reset(ds):
    # changes in (2020-01-02, 2020-01-04]: ids 2-6 from r2, not a reset
    cs = ds.changes("t", since=day(1), until=day(3))
    assert cs.is_reset is False
    assert by_id(cs.df, "day", "_deleted") == {i: (2, False) for i in range(2, 7)}


def test_changes_reset(ds):
    # changes in (2020-01-02, 2020-01-06]: a reset: ids 4-8 from r4
    cs = ds.changes("t", since=day(1), until=day(5))
    assert cs.is_reset is True
    assert by_id(cs.df, "day", "_deleted") == {i: (4, False) for i in range(4, 9)}


def test_rows_name_their_revision(ds):
    got = by_id(ds.read("t", as_of=day(3), with_revision=True), "_revision", "_revision_sequence")
    assert got == {**{i: ("r0", 1) for i in (0, 1)}, **{i: ("r2", 2) for i in range(2, 7)}}


def test_positional_reads(ds):
    at_r2 = expect((range(0, 2), 0), (range(2, 7), 2))
    assert by_id(ds.read("t", at=2), "day") == at_r2
    assert by_id(ds.read("t", at="r2"), "day") == at_r2
    assert by_id(ds.read("t", at="HEAD~2"), "day") == at_r2
    assert by_id(ds.read("t", at="HEAD~1"), "day") == expect((range(4, 9), 4))
    assert by_id(ds.read("t", at="HEAD"), "day") == by_id(ds.read("t"), "day")


def test_consumer_form(ds):
    # the major r4 (sequence 3) is after position 2: a reset to the state at head
    reset = ds.changes("t", since_sequence=2)
    assert reset.is_reset is True and reset.until_sequence == 4
    assert by_id(reset.df, "day") == expect((range(4, 6), 4), (range(6, 11), 6))
    # from position 3 only r6 is new
    cs = ds.changes("t", since_sequence=3, until_sequence=4)
    assert cs.is_reset is False
    assert by_id(cs.df, "day", "_deleted") == {i: (6, False) for i in range(6, 11)}


def test_model_agrees_with_the_example():
    """The reference model used by the property tests must satisfy the same bullets."""
    model = Model()
    for name, d, major, ids in EXAMPLE:
        model.commit(name, day(d), major, {"t": {(i,): {"day": d} for i in ids}})

    def days(rows):
        return {k[0]: (v[0]["day"],) if v[0] is not None else None for k, v in rows.items()}

    assert days(model.state("t").rows) == expect((range(4, 6), 4), (range(6, 11), 6))
    assert days(model.state("t", as_of=day(1)).rows) == expect((range(0, 5), 0))
    assert days(model.state("t", as_of=day(3)).rows) == expect((range(0, 2), 0), (range(2, 7), 2))
    window = model.changes("t", since=day(1), until=day(3))
    assert not window.is_reset and days(window.rows) == expect((range(2, 7), 2))
    reset = model.changes("t", since=day(1), until=day(5))
    assert reset.is_reset and days(reset.rows) == expect((range(4, 9), 4))


def test_history(ds):
    """The SCD2 view of the example: r4 drops ids 0-3 (deletion rows), r6 updates 6-8."""

    def d(n):
        return day(n).replace(tzinfo=None)

    rows = ds.history("t").select("id", "day", "valid_from", "valid_to", "is_deleted", "_revision")
    got = sorted((tuple(r) for r in rows.collect()), key=lambda r: (r[0], r[2]))
    want = []
    for i in range(11):
        versions = [(name, n) for name, n, _, ids in EXAMPLE if i in ids]
        if i < 4:  # voided by the major r4: deleted from day 4 on
            versions.append(("r4", None))
        for (name, n), following in zip(versions, [*versions[1:], None], strict=True):
            start = int(name[1:])
            end = d(int(following[0][1:])) if following else None
            want.append((i, n, d(start), end, n is None, name))
    assert got == sorted(want, key=lambda r: (r[0], r[2]))


def test_empty_tables_in_multi_table_majors_and_minors(spark, root):
    """README: an empty table of a major empties that table; of a minor it is left out; all
    tables empty commit nothing."""
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    rows = lambda *ids: frame(spark, [(i, i) for i in ids], "id long, v long")  # noqa: E731
    ds.commit({"a": rows(1, 2), "b": rows(3)}, timestamp=day(0), is_major=True, name="m0")
    minor = ds.commit({"a": rows(4), "b": rows()}, timestamp=day(1), is_major=False, name="n1")
    assert set(minor.tables) == {"a"}  # the empty table is left out
    assert by_id(ds.read("b"), "v") == {3: (3,)}
    major = ds.commit({"a": rows(5), "b": rows()}, timestamp=day(2), is_major=True, name="m2")
    assert set(major.tables) == {"a", "b"} and major.tables["b"].rows == 0
    assert ds.read("b").count() == 0  # the major emptied b
    assert by_id(ds.read("a"), "v") == {5: (5,)}
    assert by_id(ds.read("b", as_of=day(1)), "v") == {3: (3,)}
    assert ds.commit({"a": rows(), "b": rows()}, timestamp=day(3), is_major=True) is None
    assert ds.head_sequence == 3
