"""Differential property test: ``DatasetReader`` (Polars, no JVM) against ``RevisionedDataset``.

Random histories written by the Spark engine — majors, minors with tombstones, carrying
majors (``carry=True`` and skip-unchanged majors), out-of-order timestamps, compactions, a
purge, a vacuum — then every read kind (latest, as of, as known at, ``HEAD~n``, a sequence,
changes by time and by sequence, ``only_changed``, ``columns=``, history) must give the
same rows from both, or the same error with the same message; and the reader's lazy
forms — ``scan`` with a random projection and filter (a filter on a value column included:
it must not resurrect older rows), ``batches`` — give what ``read`` gives. The engine
itself is held to the read rules by ``test_properties.py``; this test holds the reader to
the engine.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from harness.dates import EPOCH, day
from harness.examples import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import RevisionsError

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


def apply(spark, ds: RevisionedDataset, n: int, op) -> None:
    """One operation on the engine; refusals (a carry without state, …) are part of life."""
    kind, step, rows = op
    try:
        if kind == "compact":
            ds.compact("t")
        elif kind == "purge":
            ids_df = frame(spark, [(i,) for i in sorted(rows)], "id long")
            ds.purge("t", ids_df, reason="erasure request")
        else:
            data = frame(
                spark,
                [
                    (i, None, None, True) if v is TOMB else (i, *v, False)
                    for i, v in sorted(rows.items())
                ],
                SCHEMA,
            )
            ds.commit(
                {"t": data},
                day(step + n // 2),
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


def same_changes(cs, pcs) -> None:
    assert (pcs.is_reset, pcs.until_sequence) == (cs.is_reset, cs.until_sequence)
    assert [r.name for r in pcs.revisions] == [r.name for r in cs.revisions]
    same_frame(cs.df, pcs.df)
    assert (pcs.changed is None) == (cs.changed is None)
    if cs.changed is not None:
        same_frame(cs.changed, pcs.changed)
    event(f"changes: {'reset' if cs.is_reset else 'window'} of {pcs.df.height} rows")


@settings(
    max_examples=examples(4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first=st.dictionaries(ids, st.tuples(values, values), min_size=1, max_size=6),
    ops=st.lists(operations(), min_size=3, max_size=7),
    data=st.data(),
)
def test_reader_matches_engine(spark, first, ops, data):
    with tempfile.TemporaryDirectory() as tmp:
        ds = RevisionedDataset(f"{tmp}/ds", spark=spark, id_columns=["id"], compact_after=None)
        apply(spark, ds, 0, ("major", 0, first))
        for n, op in enumerate(ops, start=1):
            apply(spark, ds, n, op)
        horizon = data.draw(st.integers(1, ds.head_sequence), label="vacuum horizon")
        committed = ds.revisions()[horizon - 1].committed_at
        report = ds.vacuum(
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

        # some columns: changes of them only, their history, a projection and a filter
        columns = data.draw(st.lists(st.sampled_from(["v", "w"]), unique=True), label="columns")
        picked = columns or None
        same_outcome(
            lambda: ds.changes(
                "t", since_sequence=since_sequence, only_changed=True, columns=picked
            ),
            lambda: reader.changes(
                "t", since_sequence=since_sequence, only_changed=True, columns=picked
            ),
            same_changes,
        )
        same_outcome(
            lambda: ds.history("t", columns=picked),
            lambda: reader.history("t", columns=picked),
            same_frame,
        )
        column, bound = data.draw(
            st.tuples(st.sampled_from(["id", "v", "w"]), st.integers(0, 3)), label="filter"
        )
        known_at = ds.revisions()[data.draw(st.integers(0, head - 1), label="known at")]

        def projected(df):
            return df.select("id", *columns) if columns else df

        same_outcome(
            lambda: projected(
                ds.read("t", known_at=known_at.committed_at).where(F.col(column) < bound)
            ),
            lambda: reader.read(
                "t", columns=picked, known_at=known_at.committed_at, filter=pl.col(column) < bound
            ),
            same_frame,
        )
        same_outcome(
            lambda: projected(ds.read("t").where(F.col(column) < bound)),
            lambda: projected(reader.scan("t").filter(pl.col(column) < bound)).collect(),
            same_frame,
        )
        same_outcome(
            lambda: ds.read("t", columns=picked),
            lambda: pl.from_arrow(reader.batches("t", columns=picked, batch_size=2).read_all()),
            same_frame,
        )


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
