"""Point-in-time joins: ``as_of_join`` against worked examples and the model.

Revisions are staged through the log layer with chosen commit times (no Spark job per
revision), so the commit axis can be laid out exactly: backfills committed after the
events they correct, majors committed after their logical time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from harness.dates import HOUR, day, instant
from harness.examples import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from revisions_assets import RevisionedDataset
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
from revisions_assets.core.read.plan.spans import EVENT, visible_spans

from .helpers import micros, stage_revision
from .model import Model, as_of_join

EVENTS_SCHEMA = "id long, at timestamp, label string"


def stage(
    ds: RevisionedDataset, model: Model | None, name, timestamp, is_major, rows, committed_at
):
    """One revision in the dataset and the model, if any (``rows``: {id: v or None for a
    tombstone})."""
    log = RevisionLog(ds.storage)
    log.refresh()
    staged = {(k,): (None if v is None else {"v": v}) for k, v in rows.items()}
    stage_revision(log, ds.root, name, timestamp, is_major, staged, committed_at=committed_at)
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
    stage(ds, model, "r0", day(0), True, {1: 0, 2: 0, 3: 0}, day(0) + HOUR)
    stage(ds, model, "r1", day(1), False, {1: 10, 2: None}, day(1) + HOUR)
    stage(ds, model, "r2", day(3), True, {1: 30, 3: 30}, day(3) + HOUR)
    stage(ds, model, "r3", day(1), False, {1: 11}, day(5))
    stage(ds, model, "r4", day(2), False, {3: 22}, day(5) + HOUR)
    return ds


#: (id, event time) -> v (and revision) with known_at None, "event", day 4
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
    events = spark.createDataFrame(
        [(k, t, f"e{n}") for n, ((k, t), *_) in enumerate(WORKED)], EVENTS_SCHEMA
    )
    for column, known_at in enumerate([None, EVENT, day(4)], start=1):
        out = corrected.as_of_join(events, "t", event_time="at", on=["id"], known_at=known_at)
        assert out.columns == ["id", "at", "label", "v", "_revision"]
        rows = out.collect()
        got = {r.label: (r.v, r._revision) for r in rows}
        assert len(got) == len(WORKED) == len(rows)  # one row per event, duplicates kept
        want = {f"e{n}": row[column] or (None, None) for n, row in enumerate(WORKED)}
        assert got == want, f"known_at={known_at}"


def test_known_at_before_any_commit_gives_nulls_and_mapping_on(spark, corrected):
    events = spark.createDataFrame([(1, day(4))], "plane long, at timestamp")
    out = corrected.as_of_join(
        events, "t", event_time="at", on={"plane": "id"}, known_at="2019-12-31T00:00:00Z"
    )
    assert out.columns == ["plane", "at", "v", "_revision"]
    assert [(r.plane, r.v, r._revision) for r in out.collect()] == [(1, None, None)]
    late = corrected.as_of_join(events, "t", event_time="at", on={"plane": "id"})
    assert [(r.v, r._revision) for r in late.collect()] == [(30, "r2")]


def test_compactions_are_not_read(spark, corrected):
    events = spark.createDataFrame([(1, day(1.5), "a"), (3, day(4), "b")], EVENTS_SCHEMA)
    stage(corrected, None, "r5", day(4), False, {3: 40}, day(6))  # on top of r2
    before = corrected.as_of_join(events, "t", event_time="at", on=["id"]).collect()
    assert [(r.v, r._revision) for r in before] == [(11, "r3"), (40, "r5")]
    assert corrected.compact("t") is not None
    after = corrected.as_of_join(events, "t", event_time="at", on=["id"])
    assert sorted(after.collect()) == sorted(before)
    compaction = corrected.revisions()[-1]
    assert not any(compaction.name in f for f in after.inputFiles())


def test_vacuumed_revisions_fail_only_when_needed(spark, corrected):
    corrected.vacuum(retain=timedelta(0), now=day(3) + HOUR, keep_majors=False)
    late = spark.createDataFrame([(1, day(4), "late")], EVENTS_SCHEMA)
    out = corrected.as_of_join(late, "t", event_time="at", on=["id"])
    assert [(r.v, r._revision) for r in out.collect()] == [(30, "r2")]
    early = spark.createDataFrame([(1, day(0.5), "early")], EVENTS_SCHEMA)
    with pytest.raises(RetentionError, match="as_of_join of table 't'.*revision 'r0'"):
        corrected.as_of_join(early, "t", event_time="at", on=["id"])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"event_time": "when"}, InvalidArgumentError, "event_time 'when' is not a column"),
        ({"event_time": "label"}, ArgumentTypeError, "'label' must be a timestamp.*string"),
        ({"event_time": 3}, ArgumentTypeError, "event_time must be a string"),
        ({"on": ["plane"]}, IdColumnsError, "event column 'plane'"),
        ({"on": {"id": "tail"}}, IdColumnsError, "'tail', which is not an id column"),
        ({"on": 5}, ArgumentTypeError, "on must be a list"),
        ({"known_at": datetime(2020, 1, 2)}, NaiveTimestampError, "known_at"),
        ({"known_at": 12}, ArgumentTypeError, "known_at must be None, 'event'"),
        ({"known_at": "events"}, InvalidArgumentError, "known_at"),
    ],
)
def test_bad_arguments(spark, corrected, kwargs, error, match):
    events = spark.createDataFrame([(1, day(1), "x")], EVENTS_SCHEMA)
    args = {"event_time": "at", "on": ["id"], **kwargs}
    with pytest.raises(error, match=match):
        corrected.as_of_join(events, "t", **args)


def test_clashing_columns_and_wrong_frames(spark, corrected):
    events = spark.createDataFrame([(1, day(1), 5)], "id long, at timestamp, V long")
    with pytest.raises(DuplicateColumnError, match="events_df already has column 'V'"):
        corrected.as_of_join(events, "t", event_time="at", on=["id"])
    with pytest.raises(ArgumentTypeError, match="events_df must be a Spark DataFrame"):
        corrected.as_of_join(events.toPandas(), "t", event_time="at", on=["id"])


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
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=histories(), data=st.data())
def test_engine_matches_model(spark, tmp_path_factory, history, data):
    root = str(tmp_path_factory.mktemp("bitemporal") / "ds")
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    model = Model()
    committed_at = {}
    for n, (step, commit_step, is_major, rows) in enumerate(history, start=1):
        committed_at[n] = instant(commit_step, HOUR, START)
        stage(ds, model, f"r{n}", instant(step, HOUR, START), is_major, rows, committed_at[n])
    # event and knowledge times on the same hour grid: ties with timestamps and commits
    times = st.integers(-1, 16).map(lambda step: instant(step, HOUR, START))
    events = data.draw(st.lists(st.tuples(st.integers(0, 4), times), min_size=1, max_size=8))
    fixed = data.draw(times, label="known_at")
    frame = spark.createDataFrame(
        [(k, t, n) for n, (k, t) in enumerate(events)], "id long, at timestamp, n long"
    )
    modes = {"latest": None, "event": EVENT, "fixed": fixed}
    joined = None
    for mode, known_at in modes.items():
        out = ds.as_of_join(frame, "t", event_time="at", on=["id"], known_at=known_at)
        out = out.withColumn("mode", F.lit(mode))
        joined = out if joined is None else joined.unionByName(out)
    got = {(r.mode, r.n): (r.v, r._revision) for r in joined.collect()}
    for mode, known_at in modes.items():
        want = as_of_join(model, "t", [((k,), t) for k, t in events], committed_at, known_at)
        for n, expected in enumerate(want):
            row = (expected[0]["v"], expected[1].name) if expected else (None, None)
            assert got[(mode, n)] == row, (mode, events[n])
    event(f"commits after their logical time: {any(c > s for s, c, *_ in history)}")


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
