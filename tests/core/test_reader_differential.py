"""Differential property test: ``DatasetReader`` (Polars, no JVM) against ``RevisionedDataset``.

Random histories written by the Spark engine — majors, minors with tombstones, carrying
majors (``carry=True`` and skip-unchanged majors), out-of-order timestamps, compactions, a
purge, a vacuum — then every read kind (latest, as of, as known at, ``HEAD~n``, a sequence,
changes by time and by sequence, ``only_changed``, ``columns=`` (a projection) and
``compared_columns=`` (the columns whose changes count), history) must give the
same rows from both, or the same error with the same message. The scan value with a
random request (``as_of``, ``known_at``, ``at``, ``columns`` with ids, a filter on the ids
or on a value column, which must not resurrect older rows, ``with_revision``) gives the
same rows through every conversion both handles offer (``read``, ``to_arrow``, ``count``,
``plan_files``, and ``to_changes`` of a change read built from it, by time or by
sequence; ``to_pandas`` is ``to_arrow`` converted, on both), and the reader's
``to_batches`` gives what the engine reads by each way the reader merges (a tree of
anti-joins, one pass past ``FEW_TASKS`` revisions, one id range at a time; the other reads
by one of them, drawn). The engine
itself is held to the read rules by ``test_properties.py``; this test holds the reader to
the engine.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import polars as pl
import pyarrow as pa
import pytest
from harness.dates import EPOCH, day
from harness.examples import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import RevisionsError
from revisions_assets.core.read.execute import polars as polars_executor
from revisions_assets.core.read.plan import ranges
from revisions_assets.core.read.plan.requests import StatePlan
from revisions_assets.core.read.plan.spans import ALL_COMMITTED, EVENT

from .helpers import frame

SCHEMA = "id long, v long, w long, _deleted boolean"
TOMB = None


ids = st.integers(min_value=0, max_value=9)
values = st.integers(min_value=0, max_value=2)


@st.composite
def operations(draw):
    kind = draw(
        st.sampled_from(
            ["major", "minor", "minor", "minor", "carry", "skip_major", "compact", "purge"]
        )
    )
    if kind in ("compact", "purge"):
        return kind, 0, draw(st.sets(ids, min_size=1, max_size=2))
    pair = st.tuples(values, values)
    cell = pair if kind in ("major", "skip_major") else st.one_of(pair, st.just(TOMB))
    rows = draw(st.dictionaries(ids, cell, min_size=1, max_size=6))
    return kind, draw(st.integers(min_value=0, max_value=5)), rows


def apply(
    spark,
    ds: RevisionedDataset,
    n: int,
    op,
    stamp: Callable[[int], datetime] = day,
    order: Callable[[list], None] | None = None,
) -> None:
    """One operation on the engine, its revision stamped ``stamp(step)``, its rows in id
    order or put in ``order`` (in place); refusals (a carry without state, …) are part of
    life."""
    kind, step, rows = op
    try:
        if kind == "compact":
            ds.maintenance.compact("t")
        elif kind == "purge":
            ids_df = frame(spark, [(i,) for i in sorted(rows)], "id long")
            ds.maintenance.purge("t", ids_df, reason="erasure request")
        else:
            data = [
                (i, None, None, True) if v is TOMB else (i, *v, False)
                for i, v in sorted(rows.items())
            ]
            if order is not None:
                order(data)
            ds.commit(
                {"t": frame(spark, data, SCHEMA)},
                stamp(step + n // 2),
                is_major=kind in ("major", "carry", "skip_major"),
                name=f"r{n}",
                carry=kind == "carry",
                skip_unchanged=kind == "skip_major",
            )
        event(f"{kind}: applied")
    except RevisionsError as exc:
        event(f"{kind}: refused ({type(exc).__name__})")


def spark_rows(df) -> list[tuple]:
    """A Spark result as sorted tuples, timestamps as microseconds since 1970."""
    timestamps = {f.name for f in df.schema.fields if isinstance(f.dataType, TimestampType)}
    df = df.select([F.unix_micros(c).alias(c) if c in timestamps else F.col(c) for c in df.columns])
    return sorted((tuple(r) for r in df.collect()), key=repr)


def polars_rows(df: pl.DataFrame) -> list[tuple]:
    stamps = [c for c, t in df.schema.items() if isinstance(t, pl.Datetime)]
    df = df.with_columns(pl.col(c).dt.epoch("us") for c in stamps)
    return sorted(df.rows(), key=repr)


def same_outcome(engine_call, reader_call, compare) -> None:
    """Both succeed with equal results, or both fail with the same error and message."""
    try:
        expected = engine_call()
    except RevisionsError as exc:
        event(f"refused: {type(exc).__name__}")
        with pytest.raises(type(exc)) as caught:
            reader_call()
        assert str(caught.value) == str(exc)
        return
    compare(expected, reader_call())


def same_frame(spark_df, polars_df) -> None:
    assert polars_df.columns == spark_df.columns
    assert polars_rows(polars_df) == spark_rows(spark_df)


def same_frames(spark_df, polars_dfs) -> None:
    """Each Polars frame has the Spark frame's columns and rows (collected once)."""
    expected = spark_rows(spark_df)
    for polars_df in polars_dfs:
        assert polars_df.columns == spark_df.columns
        assert polars_rows(polars_df) == expected


def same_changes(cs, pcs) -> None:
    assert (pcs.is_reset, pcs.until_sequence) == (cs.is_reset, cs.until_sequence)
    assert [r.name for r in pcs.revisions] == [r.name for r in cs.revisions]
    same_frame(cs.df, pcs.df)
    assert (pcs.changed is None) == (cs.changed is None)
    if cs.changed is not None:
        same_frame(cs.changed, pcs.changed)
    event(f"changes: {'reset' if cs.is_reset else 'window'} of {pcs.df.height} rows")


#: how the reader merges: a tree of anti-joins, one pass (past FEW_TASKS revisions on a base),
#: or by id range (ranges of about one base row, from one newer row on)
MERGES = ("tree", "one pass", "by id range")


def merging(patch: pytest.MonkeyPatch, merge: str) -> None:
    """Make the reader merge as ``merge`` says, whatever the size of the history."""
    if merge == "one pass":
        patch.setattr(polars_executor, "FEW_TASKS", 0)
    if merge == "by id range":
        patch.setattr(ranges, "RANGE_ROWS", 1)
        patch.setattr(ranges, "RANGED_FROM_ROWS", 1)


@settings(
    max_examples=examples(3),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first=st.dictionaries(ids, st.tuples(values, values), min_size=1, max_size=6),
    ops=st.lists(operations(), min_size=3, max_size=7),
    data=st.data(),
)
def test_reader_matches_engine(spark, first, ops, data, monkeypatch):
    # the reader's merge, drawn first (the scan's batches below are read by every merge)
    merge = data.draw(st.sampled_from(MERGES), label="Polars merge")
    event(f"Polars merge: {merge}")
    merging(monkeypatch, merge)
    with tempfile.TemporaryDirectory() as tmp:
        ds = RevisionedDataset(f"{tmp}/ds", spark=spark, id_columns=["id"], compact_after=None)
        apply(spark, ds, 0, ("major", 0, first))
        for n, op in enumerate(ops, start=1):
            apply(spark, ds, n, op)
        horizon = data.draw(st.integers(1, ds.head_sequence), label="vacuum horizon")
        committed = ds.revisions()[horizon - 1].committed_at
        report = ds.maintenance.vacuum(
            retain=timedelta(0),
            now=committed + timedelta(microseconds=1),
            keep_majors=data.draw(st.booleans(), label="keep majors"),
            grace=timedelta(0),
        )
        event(f"vacuum removed revisions: {bool(report.revisions)}")
        reader = DatasetReader(f"{tmp}/ds")
        head = ds.head_sequence

        # state reads: latest, as of every day, HEAD~n, a sequence
        same_outcome(
            lambda: ds.read("t", with_revision=True),
            lambda: reader.read("t", with_revision=True),
            same_frame,
        )
        for k in range(-1, 9):
            same_outcome(
                lambda k=k: ds.read("t", as_of=day(k)),
                lambda k=k: reader.read("t", as_of=day(k)),
                same_frame,
            )
        back = data.draw(st.integers(0, 3), label="HEAD~n")
        pinned = data.draw(st.integers(0, head), label="at sequence")
        for at in (f"HEAD~{back}", pinned):
            same_outcome(
                lambda at=at: ds.read("t", at=at, with_revision=True),
                lambda at=at: reader.read("t", at=at, with_revision=True),
                same_frame,
            )

        # change reads by time and by sequence, with and without only_changed
        since = data.draw(st.integers(-1, 7), label="since day")
        until = data.draw(st.one_of(st.none(), st.integers(since, 8)), label="until day")
        since_sequence = data.draw(st.integers(0, head), label="since_sequence")
        only_changed = data.draw(st.booleans(), label="only_changed")
        for kwargs in (
            {"since": day(since), "until": day(until) if until is not None else None},
            {"since_sequence": since_sequence},
            {"since": day(since), "at": "HEAD~1"},
        ):
            same_outcome(
                lambda kw=kwargs: ds.changes("t", only_changed=only_changed, **kw),
                lambda kw=kwargs: reader.changes("t", only_changed=only_changed, **kw),
                same_changes,
            )

        # the SCD2 history, whole and known at a time
        same_outcome(lambda: ds.history("t"), lambda: reader.history("t"), same_frame)
        same_outcome(
            lambda: ds.history("t", since=day(since), until=day(since + 2)),
            lambda: reader.history("t", since=day(since), until=day(since + 2)),
            same_frame,
        )

        # some columns (ids included): changes of them only, their history, projected
        names = st.lists(st.sampled_from(["id", "v", "w"]), unique=True)
        picked = data.draw(names, label="columns") or None
        counted = data.draw(names, label="compared_columns") or None
        same_outcome(
            lambda: ds.changes(
                "t",
                since_sequence=since_sequence,
                only_changed=True,
                columns=picked,
                compared_columns=counted,
            ),
            lambda: reader.changes(
                "t",
                since_sequence=since_sequence,
                only_changed=True,
                columns=picked,
                compared_columns=counted,
            ),
            same_changes,
        )
        same_outcome(
            lambda: ds.history("t", columns=picked),
            lambda: reader.history("t", columns=picked),
            same_frame,
        )

        # the scan value: a random request on each handle, run by every conversion both offer
        column, bound = data.draw(
            st.tuples(st.sampled_from(["id", "v", "w"]), st.integers(0, 3)), label="filter"
        )
        committed = [r.committed_at for r in ds.revisions()]
        drawn = data.draw(
            st.fixed_dictionaries(
                {
                    "as_of": st.none() | st.integers(-1, 8).map(day),
                    "known_at": st.none() | st.sampled_from(committed),
                    "at": st.none()
                    | st.integers(0, head)
                    | st.integers(0, 3).map(lambda n: f"HEAD~{n}"),
                    "with_revision": st.booleans(),
                }
            ),
            label="scan options",
        )
        options = {k: v for k, v in drawn.items() if v not in (None, False)}
        event(f"scan options: {sorted(options)}")
        filtered = data.draw(st.booleans(), label="filter the scan")

        def scan(handle, condition):
            built = handle.scan("t", columns=picked, **options)
            return built.filter(condition) if filtered else built

        engine_scan = lambda: scan(ds, F.col(column) < bound)  # noqa: E731
        reader_scan = lambda: scan(reader, pl.col(column) < bound)  # noqa: E731

        def batches(merge: str) -> pl.DataFrame:
            with pytest.MonkeyPatch.context() as patch:
                merging(patch, merge)
                scanned = reader_scan()
                if merge == "by id range" and isinstance(scanned._plan, StatePlan):
                    cut = ranges.id_ranges(scanned._plan.rows)
                    event(f"id ranges of the scan: {0 if cut is None else len(cut)}")
                return pl.from_arrow(scanned.to_batches(batch_size=2).read_all())

        same_outcome(
            lambda: engine_scan().read(),
            lambda: [reader_scan().read(), *(batches(m) for m in MERGES)],
            same_frames,
        )
        same_outcome(
            lambda: arrow_rows(engine_scan().to_arrow()),
            lambda: arrow_rows(reader_scan().to_arrow()),
            lambda a, b: a == b,
        )
        same_outcome(lambda: engine_scan().count(), lambda: reader_scan().count(), int.__eq__)
        same_outcome(
            lambda: engine_scan().plan_files(),
            lambda: reader_scan().plan_files(),
            lambda a, b: a == b,
        )
        # a change read built from a scan: its at, known_at, columns and with_revision carry
        window = data.draw(
            st.sampled_from(
                [{"since": day(since)}, {"since": day(since), "until": day(since + 3)}, {}]
            ),
            label="change window",
        )
        window = {**window, "only_changed": only_changed, "compared_columns": counted}
        carried = {k: v for k, v in options.items() if k != "as_of"}
        same_outcome(
            lambda: ds.scan("t", columns=picked, **carried).changes(**window).to_changes(),
            lambda: reader.scan("t", columns=picked, **carried).changes(**window).to_changes(),
            same_changes,
        )
        same_outcome(
            lambda: ds.scan("t").changes(since_sequence=since_sequence).plan_files(),
            lambda: reader.scan("t").changes(since_sequence=since_sequence).plan_files(),
            lambda a, b: a == b,
        )


def arrow_rows(table) -> list[tuple]:
    """An Arrow table's rows, sorted, instants as microseconds since 1970 (both handles give
    them in UTC)."""
    assert all(t.tz == "UTC" for t in table.schema.types if pa.types.is_timestamp(t) and t.tz)
    return polars_rows(pl.from_arrow(table))


@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first=st.dictionaries(ids, st.tuples(values, values), min_size=1, max_size=6),
    ops=st.lists(operations(), min_size=2, max_size=5),
    data=st.data(),
)
def test_as_of_join_matches_engine(spark, first, ops, data):
    start = datetime.now(UTC)

    def stamp(step: int) -> datetime:  # logical times among the commits' own
        return start + step * timedelta(milliseconds=400)

    with tempfile.TemporaryDirectory() as tmp:
        ds = RevisionedDataset(f"{tmp}/ds", spark=spark, id_columns=["id"], compact_after=None)
        apply(spark, ds, 0, ("major", 0, first), stamp)
        for n, op in enumerate(ops, start=1):
            apply(spark, ds, n, op, stamp)
        log = ds.revisions()
        if data.draw(st.booleans(), label="vacuum"):
            horizon = data.draw(st.integers(1, len(log)), label="vacuum horizon")
            report = ds.maintenance.vacuum(
                retain=timedelta(0),
                now=log[horizon - 1].committed_at + timedelta(microseconds=1),
                keep_majors=False,
                grace=timedelta(0),
            )
            event(f"vacuum removed revisions: {bool(report.revisions)}")
        reader = DatasetReader(f"{tmp}/ds")
        # event and knowledge times on every clock's tick, and just before: ties included
        tick = timedelta(microseconds=1)
        moments = sorted(
            {t - d for r in log for t in (r.timestamp, r.committed_at) for d in (tick * 0, tick)}
            | {start - timedelta(days=1), log[-1].committed_at + timedelta(days=1)}
        )
        times = st.sampled_from(moments)
        events = data.draw(st.lists(st.tuples(ids, times), min_size=1, max_size=12), label="ev")
        rows = [(k, t, n) for n, (k, t) in enumerate(events)]
        spark_events = frame(spark, rows, "id long, at timestamp, n long")
        polars_events = pl.DataFrame(rows, schema=["id", "at", "n"], orient="row")
        columns = data.draw(st.sampled_from([None, ["v"], ["w"], []]), label="columns")
        for known_at in (ALL_COMMITTED, EVENT, data.draw(times, label="known_at")):
            join = {"event_time": "at", "on": ["id"], "known_at": known_at, "columns": columns}
            same_outcome(
                lambda join=join: ds.as_of_join(spark_events, "t", **join),
                lambda join=join: reader.as_of_join(polars_events, "t", **join),
                same_frame,
            )
        late = any(r.committed_at > s.timestamp for r in log for s in log if s.key > r.key)
        event(f"a revision stamped before an earlier commit: {late}")


def test_types_round_trip(spark, root):
    """Every column type the engine accepts reads back with the same values."""
    from decimal import Decimal

    rows = [
        (
            1,
            "a",
            1.5,
            datetime(2024, 1, 1, 12, 0, 0, 123456, tzinfo=UTC),
            datetime(2024, 1, 1, 12, 0, 0, 654321),
            Decimal("12345678.90"),
            datetime(2024, 1, 2).date(),
            [1, 2],
            (7, "s"),
            b"\x00\x01",
            True,
        ),
        (2, None, None, None, None, None, None, None, None, None, None),
    ]
    schema = (
        "id long, s string, x double, t timestamp, n timestamp_ntz, d decimal(12,2), "
        "dd date, arr array<int>, st struct<a:int,b:string>, "
        "bin binary, flag boolean"
    )
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    ds.commit({"t": frame(spark, rows, schema)}, EPOCH, is_major=True)
    got = DatasetReader(root).read("t").sort("id")
    assert got.schema["t"] == pl.Datetime("us", "UTC")
    assert got.schema["n"] == pl.Datetime("us")
    assert got.schema["d"] == pl.Decimal(12, 2)
    first = got.row(0, named=True)
    assert first["t"] == rows[0][3]
    assert first["n"] == rows[0][4]
    assert first["d"] == Decimal("12345678.90")
    assert first["arr"] == [1, 2]
    assert first["st"] == {"a": 7, "b": "s"}
    assert first["bin"] == b"\x00\x01"
    assert got.row(1, named=True)["s"] is None
    assert got.to_pandas()["id"].tolist() == [1, 2]
