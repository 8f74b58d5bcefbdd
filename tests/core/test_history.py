"""SCD2 history (ds.history): worked scenarios and a property test against tests/core/model.py.

Revisions are staged through the log layer (helpers.stage_revision: real files and log
entries, no Spark job per commit), so the property test can afford many histories. The
natural property is checked directly too: the versions valid at T are read(as_of=T).
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta

import pytest
from harness.dates import day, instant
from harness.examples import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import NoMajorRevisionError, RetentionError
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage

from .helpers import frame, stage_revision
from .model import Model, ModelNoMajorError, scd2_history

COLUMNS = ["id", "v", "valid_from", "valid_to", "is_current", "is_deleted", "_revision"]
TOMB = object()  # a tombstone in a staged revision


def in_order(rows) -> list[tuple]:
    """Versions sorted by entity, then valid_from (values may be None: not a sort key)."""
    return sorted(rows, key=lambda v: (v[0], v[2]))


def stage(root: str, revisions) -> tuple[RevisionedDataset, Model]:
    """Stage (name, timestamp, is_major, {id: v or None}) revisions; mirror them in the model.

    A minor before any major is skipped, as the engine refuses it (and so does the model).
    """
    log = RevisionLog(open_storage(root))
    model = Model()
    for name, stamp, is_major, rows in revisions:
        keyed = {(i,): None if v is TOMB else {"v": v} for i, v in rows.items()}
        try:
            model.commit(name, stamp, is_major, {"t": keyed})
        except ModelNoMajorError:
            continue
        stage_revision(log, root, name, stamp, is_major, keyed)
    log.after_commit()
    return RevisionedDataset(root, read_only=True), model


def versions(df) -> list[tuple]:
    """The history as sorted tuples (id, v, from, to, current, deleted, revision)."""
    return in_order(tuple(r) for r in df.select(*COLUMNS).collect())


def model_versions(model: Model, until=None) -> list[tuple]:
    return in_order(
        (
            v.key[0],
            None if v.row is None else v.row["v"],
            v.valid_from.replace(tzinfo=None),
            None if v.valid_to is None else v.valid_to.replace(tzinfo=None),
            v.valid_to is None,
            v.row is None,
            v.revision,
        )
        for v in scd2_history(model, "t", until)
    )


def naive(t: datetime) -> datetime:
    """Spark collects timestamps as naive datetimes in the session time zone (UTC)."""
    return t.replace(tzinfo=None)


def test_deletions_majors_resurrection_and_a_backfill(spark, root):
    d = {n: naive(day(n)) for n in (0, 1, 1.5, 2, 3)}
    ds, _ = stage(
        root,
        [
            ("r1", day(0), True, {1: 10, 2: 20, 3: 30}),
            ("r2", day(1), False, {1: 11, 2: TOMB}),
            # 1 unchanged (no new version), 2 re-created, 3 dropped, 4 new
            ("r3", day(2), True, {1: 11, 2: 20, 4: 40}),
            ("r4", day(3), False, {3: 30, 4: TOMB}),  # 3 comes back with its old values
            ("r5", day(1.5), False, {1: 15}),  # committed last, placed at its logical time
        ],
    )
    ds_history = ds.history("t")
    assert ds_history.columns == COLUMNS
    assert versions(ds_history) == in_order(
        [
            (1, 10, d[0], d[1], False, False, "r1"),
            (1, 11, d[1], d[1.5], False, False, "r2"),
            (1, 15, d[1.5], d[2], False, False, "r5"),
            (1, 11, d[2], None, True, False, "r3"),
            (2, 20, d[0], d[1], False, False, "r1"),
            (2, None, d[1], d[2], False, True, "r2"),
            (2, 20, d[2], None, True, False, "r3"),  # resurrection: a new version
            (3, 30, d[0], d[2], False, False, "r1"),
            (3, None, d[2], d[3], False, True, "r3"),  # the major no longer contains it
            (3, 30, d[3], None, True, False, "r4"),
            (4, 40, d[2], d[3], False, False, "r3"),
            (4, None, d[3], None, True, True, "r4"),
        ]
    )
    # as known at day 1.5, and only what is still valid after day 2
    assert versions(ds.history("t", until=day(1.5))) == [
        (1, 10, d[0], d[1], False, False, "r1"),
        (1, 11, d[1], d[1.5], False, False, "r2"),
        (1, 15, d[1.5], None, True, False, "r5"),
        (2, 20, d[0], d[1], False, False, "r1"),
        (2, None, d[1], None, True, True, "r2"),
        (3, 30, d[0], None, True, False, "r1"),
    ]
    assert [r[:2] for r in versions(ds.history("t", since=day(2)))] == [
        (1, 11),
        (2, 20),
        (3, None),
        (3, 30),
        (4, 40),
        (4, None),
    ]
    assert ds.history("t", until=day(-1)).count() == 0  # before the first major: no versions


def test_an_unchanged_major_opens_no_version_and_nulls_compare_as_values(spark, root):
    ds, _ = stage(
        root,
        [
            ("m1", day(0), True, {1: None, 2: 5}),
            ("m2", day(1), True, {1: None, 2: 5}),
            ("m3", day(2), True, {1: None, 2: 6}),
        ],
    )
    assert [(r[0], r[1], r[6]) for r in versions(ds.history("t"))] == [
        (1, None, "m1"),
        (2, 5, "m1"),
        (2, 6, "m3"),
    ]


def test_history_since_a_time_after_compaction_and_vacuum(spark, root):
    """The routine upkeep (compact, then vacuum) removes the minors a compaction holds: a
    history since a time at or after the retention horizon starts from the state the
    compaction holds; versions already open then are reported from that time."""
    d = {n: naive(day(n)) for n in (0, 1, 2, 3)}
    staged, _ = stage(
        root,
        [
            ("m", day(0), True, {1: 10, 2: 20, 3: 30}),
            ("n1", day(1), False, {1: 11}),
            ("n2", day(2), False, {2: TOMB}),
        ],
    )
    ds = RevisionedDataset(root, spark=spark, compact_after=None)
    compaction = ds.maintenance.compact()
    full = versions(ds.history("t", since=day(2.5)))
    ds.commit({"t": frame(spark, [(3, 33), (4, 40)], "id long, v long")}, day(3), False, "v1", "n3")
    report = ds.maintenance.vacuum(retain=timedelta(0), now=compaction.committed_at)
    assert report.revisions == ("n1", "n2") and report.horizon.timestamp == day(2)
    reader = DatasetReader(root)
    since = versions(ds.history("t", since=day(2.5)))
    assert since == [
        (1, 11, d[2], None, True, False, "n1"),  # open since day 1: reported from day 2
        (3, 30, d[2], d[3], False, False, "m"),  # open since day 0
        (3, 33, d[3], None, True, False, "n3"),
        (4, 40, d[3], None, True, False, "n3"),
    ]  # 2, deleted at day 2, is absent from the state the history starts from
    assert [v[:2] for v in full] == [(1, 11), (2, None), (3, 30)]  # before the vacuum
    polars = reader.history("t", since=day(2.5)).select(COLUMNS).rows()
    assert (
        in_order((i, v, naive(f), t and naive(t), *rest) for i, v, f, t, *rest in polars) == since
    )
    assert versions(ds.history("t", since=day(2))) == since
    for early in (day(1.5), None):
        with pytest.raises(RetentionError, match=r"'n[12]'.*can start at 2020-01-03T00:00:00"):
            ds.history("t", since=early)
        with pytest.raises(RetentionError, match=r"can start at 2020-01-03T00:00:00"):
            reader.history("t", since=early)


# -- the property test ----------------------------------------------------------------------


@st.composite
def histories(draw):
    """Revisions of one table: mostly a major first, majors and minors, tombstones in minors,
    null values, a handful of instants (collisions and out-of-order backfills are common)."""
    count = draw(st.integers(min_value=1, max_value=6))
    out = []
    for n in range(count):
        is_major = draw(st.booleans()) if n else draw(st.sampled_from([True, True, True, False]))
        cell = st.one_of(st.integers(0, 2), st.none())
        if not is_major:
            cell = st.one_of(cell, st.just(TOMB))
        rows = draw(st.dictionaries(st.integers(0, 5), cell, min_size=1, max_size=5))
        out.append((f"r{n}", instant(2 * draw(st.integers(0, 4))), is_major, rows))
    return out


@settings(
    max_examples=examples(8),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(revisions=histories(), data=st.data())
def test_history_matches_the_model_and_the_reads(spark, revisions, data):
    with tempfile.TemporaryDirectory() as tmp:
        ds, model = stage(f"{tmp}/ds", revisions)
        if not model.revisions:
            return
        stamps = [r.timestamp for r in model.revisions]
        event(f"out-of-order timestamps: {stamps != sorted(stamps)}")
        step = data.draw(st.one_of(st.none(), st.integers(-1, 9)), label="until step")
        until = None if step is None else instant(step)
        got = versions(ds.history("t", until=until))
        assert got == model_versions(model, until), f"history(until={until})"
        event(f"deletion rows: {any(v[5] for v in got)}")

        # the versions valid at T <= until are exactly the state as of T: a state depends
        # only on the revisions stamped up to T, so the history as known at until has them
        at = instant(data.draw(st.integers(-1, 9 if step is None else step), label="T"))
        valid = {
            v[0]: v[1]
            for v in got
            if not v[5] and v[2] <= naive(at) and (v[3] is None or naive(at) < v[3])
        }
        try:
            state = {r[0]: r[1] for r in ds.read("t", as_of=at).select("id", "v").collect()}
        except NoMajorRevisionError:
            state = {}
        assert valid == state, f"versions valid at {at} != read(as_of={at})"
