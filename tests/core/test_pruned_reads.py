"""Plans prune files by the id ranges the log records (``read/plan/pruning.py``): a filtered
read equals the unfiltered read filtered afterwards, on both executors, for the state, the
SCD2 history and a point-in-time join of a few entities, whatever the layout.

Histories are the differential test's (majors, minors with tombstones, carrying majors,
compactions, purges), written in random layouts: files of a few rows each (clustered by id
in majors, compactions and purges; a minor's as its rows came, overlapping), or one file
per write. Filters are random trees of comparisons, ``is_in`` and ``between`` on the id and
on a value column, under ``&``, ``|`` and negation, given to both engines (Spark as a
Column or as SQL text); what they say about the ids prunes the files, what they do not
keeps them.
"""

from __future__ import annotations

import random
import tempfile
from datetime import UTC, date, datetime, timedelta

import polars as pl
import pytest
from harness.dates import day
from harness.examples import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import RevisionsError
from revisions_assets.core.read.execute.spark_ids import spark_id_bounds
from revisions_assets.core.write import commit as commit_module

from .helpers import frame, input_files
from .test_reader_differential import SCHEMA, operations, polars_rows, spark_rows
from .test_reader_differential import apply as differential_apply

COLUMNS = ("id", "v")
compared = st.sampled_from(["==", "<", "<=", ">", ">="])
filters = st.deferred(
    lambda: st.one_of(
        st.tuples(st.just("cmp"), compared, st.sampled_from(COLUMNS), st.integers(-1, 10)),
        st.tuples(st.just("in"), st.sampled_from(COLUMNS), st.lists(st.integers(0, 9), max_size=3)),
        st.tuples(
            st.just("between"), st.sampled_from(COLUMNS), st.integers(0, 9), st.integers(0, 9)
        ),
        st.tuples(st.sampled_from(["and", "or"]), filters, filters),
        st.tuples(st.just("not"), filters),
    )
)


def spark_filter(spec):
    kind = spec[0]
    if kind == "cmp":
        _, op, column, k = spec
        return {"==": F.col(column) == k, "<": F.col(column) < k, "<=": F.col(column) <= k,
                ">": F.col(column) > k, ">=": F.col(column) >= k}[op]  # fmt: skip
    if kind == "in":
        return F.col(spec[1]).isin(spec[2])
    if kind == "between":
        return F.col(spec[1]).between(spec[2], spec[3])
    if kind == "not":
        return ~spark_filter(spec[1])
    left, right = spark_filter(spec[1]), spark_filter(spec[2])
    return left & right if kind == "and" else left | right


def sql_filter(spec) -> str:
    kind = spec[0]
    if kind == "cmp":
        _, op, column, k = spec
        return f"{column} {'=' if op == '==' else op} {k}"
    if kind == "in":
        return f"{spec[1]} IN ({', '.join(map(str, spec[2]))})" if spec[2] else "false"
    if kind == "between":
        return f"{spec[1]} BETWEEN {spec[2]} AND {spec[3]}"
    if kind == "not":
        return f"NOT ({sql_filter(spec[1])})"
    return f"({sql_filter(spec[1])}) {kind.upper()} ({sql_filter(spec[2])})"


def polars_filter(spec) -> pl.Expr:
    kind = spec[0]
    if kind == "cmp":
        _, op, column, k = spec
        return {"==": pl.col(column) == k, "<": pl.col(column) < k, "<=": pl.col(column) <= k,
                ">": pl.col(column) > k, ">=": pl.col(column) >= k}[op]  # fmt: skip
    if kind == "in":
        return pl.col(spec[1]).is_in(spec[2])
    if kind == "between":
        return pl.col(spec[1]).is_between(spec[2], spec[3])
    if kind == "not":
        return ~polars_filter(spec[1])
    left, right = polars_filter(spec[1]), polars_filter(spec[2])
    return left & right if kind == "and" else left | right


def apply(spark, ds: RevisionedDataset, n: int, op, shuffle: random.Random, start) -> None:
    """One operation of the differential test's, its rows in a drawn order (a minor's
    files then overlap in id range)."""
    stamp = lambda step: start + step * timedelta(milliseconds=300)  # noqa: E731
    differential_apply(spark, ds, n, op, stamp, shuffle.shuffle)


def same(engine_call, filtered_call, rows) -> None:
    """Both succeed with equal rows, or both refuse alike."""
    try:
        expected = rows(filtered_call())
    except RevisionsError as exc:
        with pytest.raises(type(exc)):
            engine_call()
        return
    assert rows(engine_call()) == expected


@settings(
    max_examples=examples(2),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first=st.dictionaries(
        st.integers(0, 9), st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1
    ),
    ops=st.lists(operations(), min_size=2, max_size=4),
    file_rows=st.sampled_from([None, 1, 2, 3]),
    seed=st.integers(0, 2**16),
    spec=filters,
    as_sql=st.booleans(),
    data=st.data(),
)
def test_a_filtered_read_is_the_read_filtered(
    spark, first, ops, file_rows, seed, spec, as_sql, data
):
    start = datetime.now(UTC)
    shuffle = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        if file_rows is not None:  # files of a few rows: several per write
            patch.setattr(commit_module, "rows_per_file", lambda *_: file_rows)
        ds = RevisionedDataset(f"{tmp}/ds", spark=spark, id_columns=["id"], compact_after=None)
        apply(spark, ds, 0, ("major", 0, first), shuffle, start)
        for n, op in enumerate(ops, start=1):
            apply(spark, ds, n, op, shuffle, start)
        reader = DatasetReader(ds.root)
        engine_filter = sql_filter(spec) if as_sql else spark_filter(spec)
        reader_filter = polars_filter(spec)
        log = ds.revisions()
        as_of = data.draw(st.sampled_from([None, *(r.timestamp for r in log)]), label="as_of")
        options = {} if as_of is None else {"as_of": as_of}

        # the state: pruned by the filter, against the whole state filtered afterwards
        engine_scan = ds.scan("t", **options).filter(engine_filter)
        reader_scan = reader.scan("t", **options).filter(reader_filter)
        same(
            lambda: engine_scan.read(),
            lambda: ds.read("t", **options).where(engine_filter),
            spark_rows,
        )
        same(
            lambda: reader_scan.read(),
            lambda: reader.read("t", **options).filter(reader_filter),
            polars_rows,
        )
        try:
            planned = {p.sequence: len(p.paths) for p in reader_scan.plan_files()}
            whole = {p.sequence: len(p.paths) for p in reader.scan("t", **options).plan_files()}
        except RevisionsError:
            planned = whole = {}
        assert planned.keys() == whole.keys()
        assert all(planned[s] <= whole[s] for s in whole)
        if spec[:3] == ("cmp", "==", "id"):  # an id lies in one file of a clustered write
            clustered = {r.sequence for r in log if r.is_major or r.kind == "compaction"}
            assert all(planned[s] <= 1 for s in planned if s in clustered), planned
        event(f"files pruned: {sum(whole.values()) - sum(planned.values()) > 0}")

        # the SCD2 history
        same(
            lambda: ds.scan("t").filter(engine_filter).history().read(),
            lambda: ds.history("t").where(engine_filter),
            spark_rows,
        )
        same(
            lambda: reader.scan("t").filter(reader_filter).history().read(),
            lambda: reader.history("t").filter(reader_filter),
            polars_rows,
        )

        # a point-in-time join of the events of a few entities, against the same events
        # among others that span every id (whose range prunes nothing)
        few = data.draw(st.lists(st.integers(0, 9), min_size=1, max_size=3), label="entities")
        times = [
            start - timedelta(days=1),
            *(r.timestamp for r in log),
            *(r.committed_at for r in log),
        ]
        picked = data.draw(st.lists(st.sampled_from(times), min_size=1, max_size=4), label="at")
        events = [(k, t, n) for n, (k, t) in enumerate(zip(few * 4, picked, strict=False))]
        every = events + [(k, picked[0], 100 + n) for n, k in enumerate((-5, 20))]
        schema = "id long, at timestamp, n long"
        known_at = data.draw(st.sampled_from(["all_committed", "event"]), label="known_at")
        for join in [{"event_time": "at", "on": ["id"], "known_at": known_at}]:
            same(
                lambda join=join: ds.as_of_join(frame(spark, events, schema), "t", **join),
                lambda join=join: ds.as_of_join(frame(spark, every, schema), "t", **join).where(
                    F.col("n") < 100
                ),
                spark_rows,
            )
            polars_events = pl.DataFrame(events, schema=["id", "at", "n"], orient="row")
            polars_every = pl.DataFrame(every, schema=["id", "at", "n"], orient="row")
            same(
                lambda join=join, e=polars_events: reader.as_of_join(e, "t", **join),
                lambda join=join, e=polars_every: reader.as_of_join(e, "t", **join).filter(
                    pl.col("n") < 100
                ),
                polars_rows,
            )


def test_spark_filters_bound_the_ids_they_name(spark):
    types = {"id": "long", "s": "string", "d": "date"}

    def bounds(condition) -> tuple:
        return spark_id_bounds(spark, condition, types).ranges

    assert bounds(F.col("id").isin(3, 1)) == bounds("id IN (1, 3)") == (("id", ((1, 1), (3, 3))),)
    assert bounds(F.col("id") == 5) == bounds(F.lit(5) == F.col("id")) == (("id", ((5, 5),)),)
    assert bounds("id <=> 5 AND s = 'x'") == (("id", ((5, 5),)), ("s", (("x", "x"),)))
    assert bounds((F.col("id") >= 3) & (F.col("v") < 7)) == (("id", ((3, None),)),)
    assert bounds("id BETWEEN 2 AND 4 OR id = 9") == (("id", ((2, 4), (9, 9))),)
    assert bounds(F.col("id").between(2, 4)) == (("id", ((2, 4),)),)
    either = F.lit(False) | (F.lit(True) & (F.col("id") == 2))  # as the CLI builds one
    assert bounds(either) == (("id", ((2, 2),)),)
    assert bounds("d = DATE '2024-01-02'") == (("d", ((date(2024, 1, 2), date(2024, 1, 2)),)),)
    assert bounds("id IN (1, NULL)") == (("id", ((1, 1),)),)
    for nothing in (
        "NOT (id = 1)",
        "id != 1",
        "v = 1 OR id = 1",
        "id = 1.5",  # a decimal against an integer id
        "id = '7'",  # Spark casts the text: not read
        "ID = 3",  # another spelling of the name
        "id + 1 = 3",
        F.col("id").isin(F.col("v")),
        "t.id = 1",
    ):
        assert bounds(nothing) == (), nothing


def test_a_lookup_hands_spark_and_polars_only_the_files_that_hold_its_ids(spark, tmp_path):
    """A major clustered into files of 10 ids (from rows in reverse order), a minor: a
    lookup of two ids plans the one file of the major that holds both, on both handles,
    and Spark reads no other."""
    ds = RevisionedDataset(str(tmp_path / "ds"), spark=spark, id_columns=["id"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(commit_module, "rows_per_file", lambda *_: 10)
        major = frame(spark, [(i, i, i, False) for i in reversed(range(50))], SCHEMA)
        ds.commit({"t": major}, day(0), is_major=True)
    ds.commit({"t": frame(spark, [(3, 0, 0, False), (4, 0, 0, False)], SCHEMA)}, day(1), False)
    reader = DatasetReader(ds.root)
    wanted = [F.col("id").isin(12, 17), "id IN (12, 17)"]
    planned = [ds.scan("t").filter(w).plan_files() for w in wanted]
    assert (
        planned[0]
        == planned[1]
        == reader.scan("t").filter(pl.col("id").is_in([12, 17])).plan_files()
    )
    major_files, minor_files = (p.paths for p in planned[0])
    assert len(major_files) == 1 and minor_files == ()  # the minor's range misses both ids
    assert input_files(ds.scan("t").filter(wanted[0]).read(), ds.root) == set(major_files)
    assert sorted(map(tuple, ds.scan("t").filter(wanted[1]).read().collect())) == [
        (12, 12, 12),
        (17, 17, 17),
    ]
