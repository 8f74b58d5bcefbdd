"""Files pruned from a read's plan by their logged id ranges (``read/plan/pruning.py``), and
what a Polars filter says about the ids (``read/execute/polars_ids.py``), without Spark."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

import polars as pl
from harness.dates import day
from harness.examples import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from revisions_assets.core.log.records import FileStats, Revision, TableWrite
from revisions_assets.core.log.view import LogView
from revisions_assets.core.read.execute.polars_ids import polars_id_bounds
from revisions_assets.core.read.plan import ranges as id_ranges
from revisions_assets.core.read.plan.as_of_join import plan_as_of_join
from revisions_assets.core.read.plan.pruning import (
    EVERY_ID,
    IdBounds,
    key_bounds,
    pruned,
    typed_id,
)
from revisions_assets.core.read.plan.requests import plan_history, plan_state
from revisions_assets.core.read.plan.scans import scan_task
from revisions_assets.core.read.scan import DatasetSnapshot

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "v", "type": "long", "nullable": True, "metadata": {}},
        ],
    }
)
TYPES = {"id": "long"}
POINTS = range(-2, 23)  # every id the strategies below can name, and a few beyond


def stats(path: str, low: int | None, high: int | None, rows: int = 10) -> FileStats:
    return FileStats(path, rows, 100 * rows, 1, 90, 10, "0" * 64, (low,), (high,))


def write(files: list[tuple[int | None, int | None]], prefix: str, logged: bool = True):
    paths = tuple(f"{prefix}/t/part-{n}.parquet" for n in range(len(files)))
    found = tuple(stats(p, lo, hi) for p, (lo, hi) in zip(paths, files, strict=True))
    return TableWrite(
        ("id",),
        SCHEMA,
        "v1",
        rows=10 * len(files),
        tombstones=3,
        files=paths,
        bytes=1000 * len(files),
        file_stats=found if logged else None,
    )


def revision(sequence: int, major: bool, files, logged: bool = True) -> Revision:
    return Revision(
        name=f"r{sequence}",
        timestamp=day(sequence),
        is_major=major,
        sequence=sequence,
        committed_at=day(sequence),
        tables={"t": write(files, f"r{sequence}", logged)},
    )


#: a clustered major of four files, a minor spanning ids, a minor with no logged stats
HISTORY = [
    revision(1, True, [(0, 4), (5, 9), (10, 14), (15, 19)]),
    revision(2, False, [(3, 3), (12, 18)]),
    revision(3, False, [(7, 8)], logged=False),
]
SNAPSHOT = DatasetSnapshot("mem://ds", LogView(HISTORY))


def kept(plan) -> dict[str, tuple[str, ...]]:
    return {t.entry: tuple(f.rsplit("-", 1)[1] for f in t.files) for t in plan.rows.tasks}


def test_a_lookup_reads_only_the_files_whose_ranges_hold_its_ids():
    plan = plan_state(SNAPSHOT, "t")
    assert kept(pruned(plan, IdBounds.values("id", [13]))) == {
        "r1": ("2.parquet",),
        "r2": ("1.parquet",),
        "r3": ("0.parquet",),  # no logged range: always kept
    }
    assert kept(pruned(plan, IdBounds.values("id", [3, 21]))) == {
        "r1": ("0.parquet",),
        "r2": ("0.parquet",),
        "r3": ("0.parquet",),
    }
    assert pruned(plan, EVERY_ID) is plan  # no bound: the plan as it was
    base = pruned(plan, IdBounds.of("id", [(5, 11)])).rows.base
    assert (base.rows, base.bytes, base.tombstones) == (20, 2000, 3)
    nothing = pruned(plan, IdBounds.values("id", [])).rows.base
    assert (nothing.files, nothing.rows, nothing.tombstones) == ((), 0, 0)


def test_the_history_and_a_join_prune_alike():
    history = pruned(plan_history(SNAPSHOT, "t"), IdBounds.values("id", [16]))
    assert [len(t.files) for t in history.tasks] == [1, 1, 1]
    join = plan_as_of_join(SNAPSHOT, "t", known_at="all_committed")
    reads = join.reads(keys=key_bounds({"id": (0, 2)}, join.id_types))
    assert [len(r.task.files) for r in (reads.first, *reads.later)] == [1, 0, 1]
    # keys of another type than the ids bound nothing
    assert key_bounds({"id": ("0", "2")}, join.id_types) == EVERY_ID


def test_only_the_python_type_of_the_column_is_taken():
    assert typed_id("long", 3) == 3 and typed_id("long", True) is None
    assert typed_id("long", 3.0) is None and typed_id("string", 3) is None
    assert typed_id("date", date(2024, 1, 1)) == date(2024, 1, 1)
    assert typed_id("date", day(1)) is None  # a datetime is not a date
    assert typed_id("decimal(10,2)", 3) == Decimal(3)
    assert typed_id("timestamp", day(1)) is None  # timestamps are not pruned by


def test_files_whose_ranges_overlap_are_not_clustered():
    plan = plan_state(SNAPSHOT, "t")
    assert id_ranges.clustered_by_id(plan.rows.base)
    assert not id_ranges.clustered_by_id(scan_task(revision(9, True, [(0, 9), (5, 14)]), "t", 0))
    assert id_ranges.clustered_by_id(plan.rows.newer[1])  # no logged ranges: nothing to gain


# -- the bounds are what they claim: exact for sets of integers ------------------------


ranges = st.lists(
    st.tuples(st.none() | st.integers(0, 20), st.none() | st.integers(0, 20)), max_size=4
)


def members(bounds: IdBounds) -> set[int]:
    """The ids in ``POINTS`` that ``bounds`` allows."""
    if not bounds.ranges:
        return set(POINTS)
    ((column, found),) = bounds.ranges
    assert column == "id"
    return {
        p
        for p in POINTS
        if any((lo is None or lo <= p) and (hi is None or p <= hi) for lo, hi in found)
    }


def as_set(pairs) -> set[int]:
    return {
        p
        for p in POINTS
        if any((lo is None or lo <= p) and (hi is None or p <= hi) for lo, hi in pairs)
    }


@settings(max_examples=examples(200), deadline=None)
@given(a=ranges, b=ranges, low=st.integers(0, 20), width=st.integers(0, 6))
def test_bounds_combine_as_sets_and_never_drop_a_file_holding_an_id(a, b, low, width):
    first, second = IdBounds.of("id", a), IdBounds.of("id", b)
    assert members(first) == as_set(a)
    assert members(first & second) == as_set(a) & as_set(b)
    assert members(first | second) == as_set(a) | as_set(b)
    assert members(first & EVERY_ID) == as_set(a) and members(first | EVERY_ID) == set(POINTS)
    # a file is kept exactly when its range holds an allowed id
    high = low + width
    holds = bool(as_set(a) & set(range(low, high + 1)))
    assert first.may_hold(("id",), stats("f", low, high)) == holds
    assert first.may_hold(("id",), stats("f", None, None))  # unknown: kept


# -- what a Polars filter says about the ids -------------------------------------------


def bounds(expression: pl.Expr, types=None) -> tuple:
    return polars_id_bounds(expression, types or {"id": "long", "s": "string"}).ranges


def test_polars_filters_bound_the_ids_they_name():
    id_, v, s = pl.col("id"), pl.col("v"), pl.col("s")
    assert bounds(id_.is_in([3, 1, None])) == (("id", ((1, 1), (3, 3))),)
    assert bounds(id_ == 5) == bounds(5 == id_) == (("id", ((5, 5),)),)
    assert bounds((id_ >= 3) & (id_ < 7)) == (("id", ((3, 7),)),)
    assert bounds(id_.is_between(1, 4, closed="none")) == (("id", ((1, 4),)),)
    assert bounds((id_ == 1) | (id_ == 9)) == (("id", ((1, 1), (9, 9))),)
    assert bounds(pl.lit(False) | (id_ == 9)) == (("id", ((9, 9),)),)  # built up from false
    assert bounds((v == 1) & (id_ < 3)) == (("id", ((None, 3),)),)
    assert bounds(s.is_in(["b", "a"])) == (("s", (("a", "a"), ("b", "b"))),)
    assert bounds(id_.is_in(pl.Series([2, 4], dtype=pl.UInt8))) == (("id", ((2, 2), (4, 4))),)
    either = pl.any_horizontal(
        pl.all_horizontal(id_ == 1, s == "x"), pl.all_horizontal(id_ == 4, s == "y")
    )
    assert bounds(either) == (("id", ((1, 1), (4, 4))), ("s", (("x", "x"), ("y", "y"))))
    day_ids = {"d": "date"}
    assert bounds(pl.col("d") == date(2024, 1, 2), day_ids) == (
        ("d", ((date(2024, 1, 2), date(2024, 1, 2)),)),
    )


def test_what_a_polars_filter_cannot_say_bounds_nothing():
    id_, v = pl.col("id"), pl.col("v")
    for expression in (
        ~(id_ == 1),  # a negation
        id_ != 1,
        v == 1,  # another column
        (v == 1) | (id_ < 3),  # either side may hold
        id_ == 1.5,  # a float against an integer id
        id_.is_in(pl.col("v")),
        (id_ + 1) == 3,
        pl.col("^id$") == 1,  # a pattern
        id_.cast(pl.Int32) == 3,
        id_.is_null(),
    ):
        assert bounds(expression) == (), expression


conditions = st.deferred(
    lambda: st.one_of(
        st.tuples(st.sampled_from(["==", "<", "<=", ">", ">=", "!="]), st.integers(-1, 21)).map(
            lambda t: {
                "==": pl.col("id") == t[1],
                "<": pl.col("id") < t[1],
                "<=": pl.col("id") <= t[1],
                ">": pl.col("id") > t[1],
                ">=": pl.col("id") >= t[1],
                "!=": pl.col("id") != t[1],
            }[t[0]]
        ),
        st.lists(st.integers(0, 20), max_size=4).map(lambda xs: pl.col("id").is_in(xs)),
        st.tuples(st.integers(0, 20), st.integers(0, 20)).map(
            lambda t: pl.col("id").is_between(*t)
        ),
        st.integers(0, 3).map(lambda x: pl.col("v") == x),
        st.tuples(conditions, conditions).map(lambda t: t[0] & t[1]),
        st.tuples(conditions, conditions).map(lambda t: t[0] | t[1]),
        conditions.map(lambda c: ~c),
    )
)


@settings(max_examples=examples(200), deadline=None)
@given(condition=conditions)
def test_a_polars_filter_never_excludes_an_id_it_keeps(condition):
    """Every id a row meeting the filter can have lies within the filter's bounds."""
    rows = pl.DataFrame({"id": [p for p in POINTS for _ in range(4)], "v": [0, 1, 2, 3] * 25})
    kept_ids = set(rows.filter(condition)["id"])
    assert kept_ids <= members(polars_id_bounds(condition, TYPES))


def test_a_streamed_merge_cuts_the_ids_where_the_base_files_start(monkeypatch):
    """The rule of ``ranges.id_ranges``: ranges start at the base's files (or inside a large
    file of integer ids), hold about ``RANGE_ROWS`` base rows, and are cut only when the
    newer revisions wrote enough rows, every file has a logged range and the base's files
    do not overlap."""
    monkeypatch.setattr(id_ranges, "RANGED_FROM_ROWS", 20)
    monkeypatch.setattr(id_ranges, "RANGE_ROWS", 10)
    major = revision(1, True, [(0, 4), (5, 9), (10, 14), (15, 19)])
    minor = revision(2, False, [(3, 3), (12, 18)])

    def cut(*history: Revision):
        return id_ranges.id_ranges(
            plan_state(DatasetSnapshot("mem://ds", LogView(history)), "t").rows
        )

    assert cut(major, minor) == ((None, 5), (5, 10), (10, 15), (15, None))
    monkeypatch.setattr(id_ranges, "RANGE_ROWS", 20)
    assert cut(major, minor) == ((None, 10), (10, None))
    monkeypatch.setattr(id_ranges, "RANGE_ROWS", 5)  # 10 rows of ids 0..9: two ranges in one file
    assert cut(revision(1, True, [(0, 9)]), minor) == ((None, 5), (5, None))
    assert cut(major, minor, revision(3, False, [(7, 8)], logged=False)) is None
    assert cut(revision(1, True, [(0, 9), (5, 14)]), minor) is None  # overlapping base
    assert cut(major, revision(2, False, [(3, 3)])) is None  # 10 newer rows: held at once
    assert cut(major) is None  # nothing on the base


def test_a_range_keeps_the_files_that_meet_it():
    task = scan_task(revision(2, False, [(3, 3), (12, 18), (19, 30)]), "t", 1)
    assert id_ranges.within(task, 10, 19).files == ("r2/t/part-1.parquet",)
    assert id_ranges.within(task, None, 4).rows == 10
    assert id_ranges.within(task, 18, None).files == task.files[1:]
