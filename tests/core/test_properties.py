"""Property test: random revision histories, engine reads and changes against tests/core/model.py.

Histories mix majors and minors over two tables sharing one dataset, a small id space (so
revisions overlap), tombstones, and timestamps drawn from a handful of instants (so
collisions and out-of-order backfills are the norm). Each example uses a fresh dataset root.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import (
    NoMajorRevisionError,
    UnknownRevisionError,
    UnknownTableError,
)

from .helpers import EPOCH, frame, micros
from .model import Model, ModelChanges, ModelNoMajorError, ModelUnknownRevisionError

TABLES = ("a", "b")
SCHEMA = "id long, v long, _deleted boolean"
TOMB = None


def instant(k: int) -> datetime:
    """Half-day steps from 2020-01-01: revisions use even k, queries any k."""
    return EPOCH + timedelta(hours=12 * k)


ids = st.integers(min_value=0, max_value=15)
values = st.integers(min_value=0, max_value=3)


@st.composite
def revision_specs(draw, is_major=None, allow_empty=True):
    """(is_major, timestamp step, {table: {id: value or TOMB}}) with tombstones in minors only."""
    is_major = draw(st.booleans() if is_major is None else is_major)
    cell = values if is_major else st.one_of(values, values, st.just(TOMB))
    written = draw(st.sets(st.sampled_from(TABLES), min_size=1, max_size=2))
    tables = {
        t: draw(
            st.dictionaries(
                ids, cell, min_size=int(not allow_empty or len(written) > 1), max_size=5
            )
        )
        for t in sorted(written)
    }
    return is_major, 2 * draw(st.integers(min_value=0, max_value=4)), tables


def engine_frame(spark, rows: dict):
    return frame(
        spark,
        [(i, None, True) if v is TOMB else (i, v, False) for i, v in sorted(rows.items())],
        SCHEMA,
    )


def expect_same_outcome(model, table, model_call, engine_call):
    """Run both; if the model refuses, the engine must refuse with the matching error.

    A table nothing has written yet may also be refused as unknown.
    """
    unwritten = (UnknownTableError,) if not model.history(table) else ()
    try:
        expected = model_call()
    except ModelNoMajorError:
        event("read refused: no major")
        with pytest.raises((NoMajorRevisionError, *unwritten)):
            engine_call()
        return None, None
    except ModelUnknownRevisionError:
        event("read refused: unknown position")
        with pytest.raises((UnknownRevisionError, *unwritten)):
            engine_call()
        return None, None
    return expected, engine_call()


def check_read(ds, model, table, **where):
    expected, df = expect_same_outcome(
        model,
        table,
        lambda: model.state(table, **where),
        lambda: ds.read(table, with_revision=True, **where),
    )
    if expected is None:
        return
    assert "_deleted" not in df.columns
    rows = df.selectExpr(
        "id", "v", "_revision", "_revision_sequence", "unix_micros(_revision_timestamp)"
    ).collect()
    got = {r[0]: tuple(r[1:]) for r in rows}
    assert len(got) == len(rows), "duplicate ids in a read"
    want = {
        k[0]: (row["v"], rev.name, rev.sequence, micros(rev.timestamp))
        for k, (row, rev) in expected.rows.items()
    }
    assert got == want, f"read({table!r}, {where}) differs from SPEC §3"


def check_changes(ds, model, table, model_call, engine_call, what):
    expected, cs = expect_same_outcome(model, table, model_call, engine_call)
    if expected is None:
        return
    assert isinstance(expected, ModelChanges)
    assert cs.is_reset == expected.is_reset, f"{what}: is_reset"
    kind = "by sequence" if "since_sequence" in what else "by time"
    event(f"changes {kind}: {'reset' if cs.is_reset else 'window'}")
    got = {
        r["id"]: (None if r["_deleted"] else r["v"], bool(r["_deleted"]))
        for r in cs.df.select("id", "v", "_deleted").collect()
    }
    want = {
        k[0]: (None, True) if row is None else (row["v"], False)
        for k, (row, _rev) in expected.rows.items()
    }
    assert got == want, f"{what} differs from SPEC §3"
    if not expected.is_reset:
        got_names = {getattr(r, "name", r) for r in cs.revisions}
        assert got_names == {r.name for r in expected.revisions}, f"{what}: revisions"
    return cs


def commit_one(spark, ds, model, name, timestamp, is_major, tables):
    """Commit to both; the engine must return the model's revision, None, or the same refusal."""

    def engine_commit():
        return ds.commit(
            {t: engine_frame(spark, rows) for t, rows in tables.items()},
            timestamp=timestamp,
            is_major=is_major,
            version="v",
            name=name,
        )

    model_tables = {
        t: {(i,): None if v is TOMB else {"v": v} for i, v in rows.items()}
        for t, rows in tables.items()
    }
    try:
        want = model.commit(name, timestamp, is_major, model_tables)
    except ModelNoMajorError:
        with pytest.raises(NoMajorRevisionError):
            engine_commit()
        return
    if want is None:
        # an empty minor on a table without a major: NoData or the missing-major error
        # are both faithful to SPEC §4; nothing may be committed either way
        try:
            assert engine_commit() is None
        except NoMajorRevisionError:
            assert not is_major
        return
    got = engine_commit()
    assert (got.name, got.sequence, got.is_major) == (name, want.sequence, is_major)
    assert set(got.tables) == set(want.tables)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    # mostly a major first (else every minor is refused), then a few of anything
    first=revision_specs(is_major=st.sampled_from([True, True, True, False]), allow_empty=False),
    rest=st.lists(revision_specs(), min_size=1, max_size=4),
    data=st.data(),
)
def test_engine_matches_model(spark, first, rest, data):
    specs = [first, *rest]
    with tempfile.TemporaryDirectory() as tmp:
        ds = RevisionedDataset(f"{tmp}/ds", spark=spark, id_columns=["id"])
        model = Model()
        for n, (is_major, step, tables) in enumerate(specs):
            commit_one(spark, ds, model, f"rev{n}", instant(step), is_major, tables)
        assert ds.head_sequence == model.head
        stamps = [r.timestamp for r in model.revisions]
        event(f"committed revisions: {model.head}")
        event(f"out-of-order timestamps: {stamps != sorted(stamps)}")
        assert list(ds.log()["name"]) == [r.name for r in model.revisions]

        for table in TABLES:
            check_read(ds, model, table)
        table = data.draw(st.sampled_from(TABLES), label="table")
        as_of = instant(data.draw(st.integers(min_value=-1, max_value=9), label="as_of step"))
        check_read(ds, model, table, as_of=as_of)
        hist = model.history(table)
        at = data.draw(
            st.one_of(
                st.integers(min_value=1, max_value=max(model.head, 1)),
                st.integers(min_value=0, max_value=len(hist)).map(lambda n: f"HEAD~{n}"),
                st.sampled_from([r.name for r in model.revisions] or ["HEAD"]),
            ),
            label="at",
        )
        check_read(ds, model, table, at=at)

        bounds = st.one_of(st.none(), st.integers(min_value=-1, max_value=9).map(instant))
        since, until = data.draw(bounds, label="since"), data.draw(bounds, label="until")
        if since is not None and until is not None and since > until:
            since, until = until, since
        check_changes(
            ds,
            model,
            table,
            lambda: model.changes(table, since=since, until=until),
            lambda: ds.changes(table, since=since, until=until),
            f"changes({table!r}, since={since}, until={until})",
        )
        s = data.draw(st.integers(min_value=0, max_value=model.head), label="since_sequence")
        h = data.draw(
            st.one_of(st.none(), st.integers(min_value=s, max_value=model.head)),
            label="until_sequence",
        )
        cs = check_changes(
            ds,
            model,
            table,
            lambda: model.changes_since_sequence(table, s, h),
            lambda: ds.changes(table, since_sequence=s, until_sequence=h),
            f"changes({table!r}, since_sequence={s}, until_sequence={h})",
        )
        if cs is not None:  # a consumer records until_sequence: it must be the pinned head
            assert (cs.since_sequence, cs.until_sequence) == (s, model.head if h is None else h)
