"""Point-in-time joins: ``as_of_join`` on both engines against worked examples and the model.

Revisions are staged through the log layer with chosen commit times (no Spark job per
revision), so the commit axis can be laid out exactly: backfills committed after the
events they correct, majors committed after their logical time. ``DatasetReader`` runs the
same plans in Polars: it is held to the model here without a JVM, and to the engine on
engine-written histories in ``test_reader_differential.py``.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest
from harness.dates import HOUR, day, instant
from harness.examples import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import (
    ArgumentTypeError,
    DuplicateColumnError,
    IdColumnsError,
    InvalidArgumentError,
    NaiveTimestampError,
    NoMajorRevisionError,
    RetentionError,
)
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.read.plan.spans import ALL_COMMITTED, EVENT, visible_spans
from revisions_assets.core.storage.backends import open_storage

from .helpers import frame, micros, stage_revision
from .model import Model, as_of_join

EVENTS_SCHEMA = "id long, at timestamp, label string"


def stage(root: str, model: Model | None, name, timestamp, is_major, rows, committed_at):
    """One revision in the dataset at ``root`` and the model, if any (``rows``: {id: v or
    None for a tombstone})."""
    log = RevisionLog(open_storage(root))
    log.refresh()
    staged = {(k,): (None if v is None else {"v": v}) for k, v in rows.items()}
    stage_revision(log, root, name, timestamp, is_major, staged, committed_at=committed_at)
    if model is not None:
        model.commit(name, timestamp, is_major, {"t": staged})


@pytest.fixture
def corrected(spark, root):
    """A history with corrected and out-of-order backfills, a tombstone and a late major.

    | name | timestamp | major | committed   | rows                 |
    | r0   | day 0     | yes   | day 0 +1h   | 1,2,3 -> 0           |
    | r1   | day 1     | no    | day 1 +1h   | 1 -> 10, 2 deleted   |
    | r2   | day 3     | yes   | day 3 +1h   | 1,3 -> 30            |
    | r3   | day 1     | no    | day 5       | 1 -> 11 (correction) |
    | r4   | day 2     | no    | day 5 +1h   | 3 -> 22 (backfill)   |
    """
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    model = Model()
    stage(root, model, "r0", day(0), True, {1: 0, 2: 0, 3: 0}, day(0) + HOUR)
    stage(root, model, "r1", day(1), False, {1: 10, 2: None}, day(1) + HOUR)
    stage(root, model, "r2", day(3), True, {1: 30, 3: 30}, day(3) + HOUR)
    stage(root, model, "r3", day(1), False, {1: 11}, day(5))
    stage(root, model, "r4", day(2), False, {3: 22}, day(5) + HOUR)
    return ds


#: (id, event time) -> v (and revision) with known_at "all_committed", "event", day 4
WORKED = [
    ((1, day(1.5)), (11, "r3"), (10, "r1"), (10, "r1")),  # the correction leaks only later
    ((1, day(1.5)), (11, "r3"), (10, "r1"), (10, "r1")),  # a duplicate event stays
    ((2, day(1.5)), None, None, None),  # deleted by r1
    ((2, day(0.5)), (0, "r0"), (0, "r0"), (0, "r0")),
    ((1, day(0) + HOUR / 2), (0, "r0"), None, (0, "r0")),  # r0 not committed yet
    ((1, day(0) + HOUR), (0, "r0"), (0, "r0"), (0, "r0")),  # known_at is inclusive
    ((3, day(2.5)), (22, "r4"), (0, "r0"), (0, "r0")),  # out-of-order backfill
    ((1, day(3) + HOUR / 2), (30, "r2"), (10, "r1"), (30, "r2")),  # major not committed yet
    ((1, day(4)), (30, "r2"), (30, "r2"), (30, "r2")),  # r3 is voided by r2
    ((2, day(4)), None, None, None),  # not in the major
    ((9, day(4)), None, None, None),  # never written
    ((1, day(-1)), None, None, None),  # before the first major
]


def test_worked_example(spark, corrected):
    rows = [(k, t, f"e{n}") for n, ((k, t), *_) in enumerate(WORKED)]
    events = frame(spark, rows, EVENTS_SCHEMA)
    reader = DatasetReader(corrected.root)
    polars_events = pl.DataFrame(rows, schema=["id", "at", "label"], orient="row")
    for column, known_at in enumerate([ALL_COMMITTED, EVENT, day(4)], start=1):
        want = {f"e{n}": row[column] or (None, None) for n, row in enumerate(WORKED)}
        out = corrected.as_of_join(events, "t", event_time="at", on=["id"], known_at=known_at)
        assert out.columns == ["id", "at", "label", "v", "_revision"]
        collected = out.collect()
        got = {r.label: (r.v, r._revision) for r in collected}
        assert len(got) == len(WORKED) == len(collected)  # one row per event, duplicates kept
        assert got == want, f"known_at={known_at}"
        # the same plan in Polars, without a JVM
        joined = reader.as_of_join(
            polars_events, "t", event_time="at", on=["id"], known_at=known_at
        )
        assert joined.columns == out.columns and joined.height == len(WORKED)
        assert {r[2]: (r[3], r[4]) for r in joined.rows()} == want, f"known_at={known_at}"


def test_the_default_is_what_was_known_at_each_event(spark, corrected):
    """Leaving ``known_at`` out answers as production knew it at each event's time, on
    both engines; ``known_at=None``, the old spelling of everything committed, still means
    that for this release, with a FutureWarning naming ``"all_committed"``."""
    rows = [(k, t, f"e{n}") for n, ((k, t), *_) in enumerate(WORKED)]
    events = frame(spark, rows, EVENTS_SCHEMA)
    seen = {f"e{n}": row[2] or (None, None) for n, row in enumerate(WORKED)}
    out = corrected.as_of_join(events, "t", event_time="at", on=["id"])
    assert {r.label: (r.v, r._revision) for r in out.collect()} == seen
    reader = DatasetReader(corrected.root)
    lazy = pl.LazyFrame(rows, schema=["id", "at", "label"], orient="row")
    joined = reader.as_of_join(lazy, "t", event_time="at", on=["id"])
    assert isinstance(joined, pl.LazyFrame)  # lazy events, a lazy join (it streams)
    assert {r[2]: (r[3], r[4]) for r in joined.collect().rows()} == seen
    with pytest.warns(FutureWarning, match="known_at='all_committed'"):
        old = reader.as_of_join(lazy.collect(), "t", event_time="at", on=["id"], known_at=None)
    assert {r[2]: (r[3], r[4]) for r in old.rows()} == {
        f"e{n}": row[1] or (None, None) for n, row in enumerate(WORKED)
    }


def test_known_at_before_any_commit_gives_nulls_and_mapping_on(spark, corrected):
    events = frame(spark, [(1, day(4))], "plane long, at timestamp")
    out = corrected.as_of_join(
        events, "t", event_time="at", on={"plane": "id"}, known_at="2019-12-31T00:00:00Z"
    )
    assert out.columns == ["plane", "at", "v", "_revision"]
    assert [(r.plane, r.v, r._revision) for r in out.collect()] == [(1, None, None)]
    late = corrected.as_of_join(events, "t", event_time="at", on={"plane": "id"})
    assert [(r.v, r._revision) for r in late.collect()] == [(30, "r2")]  # known at the event


def test_compactions_are_not_read(spark, corrected):
    events = frame(spark, [(1, day(1.5), "a"), (3, day(4), "b")], EVENTS_SCHEMA)
    stage(corrected.root, None, "r5", day(4), False, {3: 40}, day(6))  # on top of r2
    join = {"event_time": "at", "on": ["id"], "known_at": ALL_COMMITTED}
    before = corrected.as_of_join(events, "t", **join).collect()
    assert [(r.v, r._revision) for r in before] == [(11, "r3"), (40, "r5")]
    assert corrected.maintenance.compact("t") is not None
    after = corrected.as_of_join(events, "t", **join)
    assert sorted(after.collect()) == sorted(before)
    compaction = corrected.revisions()[-1]
    assert not any(compaction.name in f for f in after.inputFiles())


def test_vacuumed_revisions_fail_only_when_needed(spark, corrected):
    corrected.maintenance.vacuum(retain=timedelta(0), now=day(3) + HOUR, keep_majors=False)
    reader = DatasetReader(corrected.root)
    late = frame(spark, [(1, day(4), "late")], EVENTS_SCHEMA)
    out = corrected.as_of_join(late, "t", event_time="at", on=["id"])
    assert [(r.v, r._revision) for r in out.collect()] == [(30, "r2")]
    joined = reader.as_of_join(late.toPandas().assign(at=[day(4)]), "t", event_time="at", on=["id"])
    assert joined.select("v", "_revision").rows() == [(30, "r2")]
    early = frame(spark, [(1, day(0.5), "early")], EVENTS_SCHEMA)
    with pytest.raises(
        RetentionError, match="as_of_join of table 't'.*revision 'r0'"
    ) as spark_error:
        corrected.as_of_join(early, "t", event_time="at", on=["id"])
    with pytest.raises(RetentionError) as polars_error:
        reader.as_of_join(
            pl.DataFrame({"id": [1], "at": [day(0.5)]}), "t", event_time="at", on=["id"]
        )
    assert str(polars_error.value) == str(spark_error.value)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"event_time": "when"}, InvalidArgumentError, "event_time 'when' is not a column"),
        ({"event_time": "label"}, ArgumentTypeError, "'label' must be a (timestamp|datetime)"),
        ({"event_time": 3}, ArgumentTypeError, "event_time must be a string"),
        ({"on": ["plane"]}, IdColumnsError, "event column 'plane'"),
        ({"on": {"id": "tail"}}, IdColumnsError, "'tail', which is not an id column"),
        ({"on": 5}, ArgumentTypeError, "on must be a list"),
        ({"known_at": datetime(2020, 1, 2)}, NaiveTimestampError, "known_at"),
        ({"known_at": 12}, ArgumentTypeError, "known_at must be 'event', 'all_committed'"),
        ({"known_at": "events"}, InvalidArgumentError, "known_at"),
        ({"columns": ["w"]}, InvalidArgumentError, r"columns \['w'\] are not columns of table"),
    ],
)
def test_bad_arguments(spark, corrected, kwargs, error, match):
    args = {"event_time": "at", "on": ["id"], **kwargs}
    events = frame(spark, [(1, day(1), "x")], EVENTS_SCHEMA)
    with pytest.raises(error, match=match):
        corrected.as_of_join(events, "t", **args)
    polars_events = pl.DataFrame({"id": [1], "at": [day(1)], "label": ["x"]})
    with pytest.raises(error, match=match):
        DatasetReader(corrected.root).as_of_join(polars_events, "t", **args)


def test_clashing_columns_and_wrong_frames(spark, corrected):
    events = frame(spark, [(1, day(1), 5)], "id long, at timestamp, V long")
    with pytest.raises(DuplicateColumnError, match="events_df already has column 'V'"):
        corrected.as_of_join(events, "t", event_time="at", on=["id"])
    with pytest.raises(ArgumentTypeError, match="events_df must be a Spark DataFrame"):
        corrected.as_of_join(events.toPandas(), "t", event_time="at", on=["id"])
    reader = DatasetReader(corrected.root)
    with pytest.raises(DuplicateColumnError, match="events_df already has column 'V'"):
        reader.as_of_join(events.toPandas(), "t", event_time="at", on=["id"])
    with pytest.raises(ArgumentTypeError, match="events_df must be a Polars DataFrame"):
        reader.as_of_join([(1, day(1))], "t", event_time="at", on=["id"])
    naive = pl.DataFrame({"id": [1], "at": [datetime(2020, 1, 2)]})
    with pytest.raises(ArgumentTypeError, match="'at' must be a datetime with a time zone"):
        reader.as_of_join(naive, "t", event_time="at", on=["id"])
    # columns= picks what is added (here none of the clashing ones); pandas events work
    aware = events.toPandas().assign(at=lambda df: df["at"].dt.tz_localize("UTC"))
    out = reader.as_of_join(
        aware, "t", event_time="at", on=["id"], known_at=ALL_COMMITTED, columns=[]
    )
    assert out.columns == ["id", "at", "V", "_revision"]
    assert out.rows() == [(1, day(1), 5, "r3")]


# -- the visible spans (pure) --------------------------------------------------------------


def test_visible_spans_of_the_worked_example(corrected):
    history = corrected.revisions("t")

    def spans(known_at):
        return {
            s.revision.name: (s.start_us, s.end_us) for s in visible_spans(history, "t", known_at)
        }

    m = micros
    assert spans(None) == {
        "r0": (m(day(0)), m(day(3))),
        "r1": (m(day(1)), m(day(3))),
        "r3": (m(day(1)), m(day(3))),
        "r4": (m(day(2)), m(day(3))),
        "r2": (m(day(3)), None),
    }
    # what production saw: each revision from its commit, until r2 was committed
    assert spans(EVENT) == {
        "r0": (m(day(0) + HOUR), m(day(3) + HOUR)),
        "r1": (m(day(1) + HOUR), m(day(3) + HOUR)),
        "r2": (m(day(3) + HOUR), None),
    }
    assert spans(day(1) + HOUR) == {"r0": (m(day(0)), None), "r1": (m(day(1)), None)}


# -- against the model ---------------------------------------------------------------------

#: day 0 of the property test's hourly steps
START = datetime(2024, 1, 1, tzinfo=UTC)


@st.composite
def histories(draw):
    """Revisions as (timestamp step, commit delay, major, {id: v or None}); commit times grow."""
    count = draw(st.integers(min_value=1, max_value=6))
    out, committed = [], 0
    for n in range(count):
        committed += draw(st.integers(min_value=0, max_value=3))
        rows = draw(
            st.dictionaries(
                st.integers(0, 3), st.one_of(st.none(), st.integers(0, 9)), min_size=1, max_size=3
            )
        )
        is_major = n == 0 or draw(st.booleans())
        if is_major:
            rows = {k: (v if v is not None else 0) for k, v in rows.items()}
        out.append((draw(st.integers(0, 12)), committed, is_major, rows))
    return out


@settings(
    max_examples=examples(10),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=histories(), data=st.data())
def test_engine_matches_model(spark, tmp_path_factory, history, data):
    root = str(tmp_path_factory.mktemp("bitemporal") / "ds")
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    model, committed_at = staged_history(root, history)
    events, fixed = draw_events(data)
    events_df = frame(
        spark, [(k, t, n) for n, (k, t) in enumerate(events)], "id long, at timestamp, n long"
    )
    modes = {"latest": ALL_COMMITTED, "event": EVENT, "fixed": fixed}
    joined = None
    for mode, known_at in modes.items():
        out = ds.as_of_join(events_df, "t", event_time="at", on=["id"], known_at=known_at)
        out = out.withColumn("mode", F.lit(mode))
        joined = out if joined is None else joined.unionByName(out)
    got = {(r.mode, r.n): (r.v, r._revision) for r in joined.collect()}
    for mode, known_at in modes.items():
        want = as_of_join(model, "t", [((k,), t) for k, t in events], committed_at, known_at)
        for n, expected in enumerate(want):
            row = (expected[0]["v"], expected[1].name) if expected else (None, None)
            assert got[(mode, n)] == row, (mode, events[n])
    event(f"commits after their logical time: {any(c > s for s, c, *_ in history)}")


@settings(max_examples=40, deadline=None)
@given(history=histories(), data=st.data())
def test_reader_matches_model(history, data):
    """``DatasetReader.as_of_join`` (Polars, no JVM) against the model: cheap, so many
    histories."""
    with tempfile.TemporaryDirectory() as tmp:
        model, committed_at = staged_history(f"{tmp}/ds", history)
        events, fixed = draw_events(data)
        reader = DatasetReader(f"{tmp}/ds")
        frame = pl.DataFrame(
            {"id": [k for k, _ in events], "at": [t for _, t in events]},
            schema={"id": pl.Int64, "at": pl.Datetime("us", "UTC")},
        ).with_row_index("n")
        for known_at in (ALL_COMMITTED, EVENT, fixed):
            out = reader.as_of_join(frame, "t", event_time="at", on=["id"], known_at=known_at)
            got = {r["n"]: (r["v"], r["_revision"]) for r in out.iter_rows(named=True)}
            want = as_of_join(model, "t", [((k,), t) for k, t in events], committed_at, known_at)
            for n, expected in enumerate(want):
                row = (expected[0]["v"], expected[1].name) if expected else (None, None)
                assert got[n] == row, (known_at, events[n])


def staged_history(root: str, history) -> tuple[Model, dict[int, datetime]]:
    """``history`` (see ``histories``) staged at ``root`` and in a model, with its commit
    times by sequence."""
    model = Model()
    committed_at = {}
    for n, (step, commit_step, is_major, rows) in enumerate(history, start=1):
        committed_at[n] = instant(commit_step, HOUR, START)
        stage(root, model, f"r{n}", instant(step, HOUR, START), is_major, rows, committed_at[n])
    return model, committed_at


def draw_events(data) -> tuple[list[tuple[int, datetime]], datetime]:
    """Events (id, time) and a knowledge time, on the hour grid of the histories: ties with
    timestamps and commits."""
    times = st.integers(-1, 16).map(lambda step: instant(step, HOUR, START))
    events = data.draw(st.lists(st.tuples(st.integers(0, 4), times), min_size=1, max_size=8))
    return events, data.draw(times, label="known_at")


# -- known_at on reads: the state as of a logical time, as known at a commit time ------------


def test_reads_as_known_at_a_commit_time(corrected):
    """``known_at`` keeps the revisions committed by then: on day 4 the correction r3 and
    the backfill r4 (committed on day 5) do not exist yet, on both engines; changes and the
    history follow the same rule; with monotone commit times it equals the pin at the last
    commit by then."""
    from revisions_assets import DatasetReader

    ds = corrected
    reader = DatasetReader(ds.root)
    known = day(4)

    def state(df) -> dict:
        return {r["id"]: r["v"] for r in df.collect()}

    assert state(ds.read("t", as_of=day(1.5))) == {1: 11, 3: 0}  # as known now
    assert state(ds.read("t", as_of=day(1.5), known_at=known)) == {1: 10, 3: 0}
    assert dict(reader.read("t", as_of=day(1.5), known_at=known).rows()) == {1: 10, 3: 0}
    assert state(ds.read("t", as_of=day(2.5), known_at=known)) == {1: 10, 3: 0}
    assert state(ds.read("t", as_of=day(2.5))) == {1: 11, 3: 22}
    assert state(ds.read("t", as_of=day(2.5), known_at=known)) == state(
        ds.read("t", as_of=day(2.5), at="r2")
    )
    # nothing known before the first commit
    with pytest.raises(NoMajorRevisionError, match="as known at"):
        ds.read("t", known_at=day(0))
    # changes and history as known then
    window = ds.changes("t", since=day(0.5), until=day(2.5), known_at=known)
    assert [r.name for r in window.revisions] == ["r1"]
    history = reader.history("t", known_at=known)
    assert set(history["_revision"]) <= {"r0", "r1", "r2"}
    assert ds.history("t", known_at=known).count() == history.height
