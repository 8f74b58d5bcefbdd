"""Property test: random revision histories, engine reads and changes against tests/core/model.py.

Histories mix majors and minors over two tables sharing one dataset, a small id space (so
revisions overlap), tombstones, and timestamps drawn from a handful of instants (so
collisions and out-of-order backfills are the norm). Each example uses a fresh dataset root.

Compactions and vacuums (SPEC §8) are inserted at random points of the engine's history
and never told to the model: every read must equal the model's read of the data revisions
alone, except that a read the retention horizon does not cover may raise RetentionError
instead (a read it covers never may). Maintenance entries take sequences in the engine's
log, so positions are mapped: the model's sequence n is the engine's n-th data revision.
"""

from __future__ import annotations

import bisect
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import (
    NoMajorRevisionError,
    RetentionError,
    UnknownRevisionError,
    UnknownTableError,
)
from revisions_assets.core.read.plan.refs import resolve_position

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
    """(is_major, timestamp step, {table: {id: value or TOMB}}) with tombstones in minors only.

    Any table may be empty (unless ``allow_empty`` is false): an empty table of a two-table
    major empties it, of a minor is left out, and all tables empty commit nothing."""
    is_major = draw(st.booleans() if is_major is None else is_major)
    cell = values if is_major else st.one_of(values, values, st.just(TOMB))
    written = draw(st.sets(st.sampled_from(TABLES), min_size=1, max_size=2))
    rows = st.dictionaries(ids, cell, min_size=int(not allow_empty), max_size=5)
    tables = {
        t: draw(st.one_of(st.just({}), rows) if allow_empty else rows) for t in sorted(written)
    }
    if len(tables) > 1 and any(not r for r in tables.values()):
        event(f"two tables, one or both empty, in a {'major' if is_major else 'minor'}")
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


@dataclass
class Engine:
    """The engine's dataset, its retention horizon so far, and the position map to the model."""

    ds: RevisionedDataset
    horizon_sequence: int = 0
    horizon_time: datetime | None = None
    consumer: int | None = None  # keep_after_sequence given to every vacuum
    vacuums: int = 0
    data: list[int] = field(default_factory=list)  # engine sequence of model sequence n + 1

    def sync(self) -> None:
        self.data = [r.sequence for r in self.ds.revisions() if r.is_data]

    def model_position(self, sequence: int) -> int:
        """The model's sequence for an engine position: the data revisions up to it."""
        return bisect.bisect_right(self.data, sequence)

    def engine_sequence(self, model_sequence: int) -> int:
        return self.data[model_sequence - 1]

    def covers(self, *, pinned: int | None = None, time: datetime | None = None) -> bool:
        """Whether the retention horizon covers a read pinned at ``pinned`` as of ``time``."""
        if pinned is not None and pinned < self.horizon_sequence:
            return False
        return time is None or self.horizon_time is None or time >= self.horizon_time


def retained(engine: Engine, covered: bool, check, *args, **kwargs) -> None:
    """Run a check; outside the horizon, RetentionError is an allowed outcome."""
    if covered:
        check(*args, **kwargs)
        return
    try:
        check(*args, **kwargs)
    except RetentionError:
        event("read refused: retention")


def check_read(engine: Engine, model, table, model_where: dict, **where):
    expected, df = expect_same_outcome(
        model,
        table,
        lambda: model.state(table, **model_where),
        lambda: engine.ds.read(table, with_revision=True, **where),
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
        k[0]: (row["v"], rev.name, engine.engine_sequence(rev.sequence), micros(rev.timestamp))
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


def refused_by_retention(ds, tables, timestamp, is_major) -> bool:
    """Whether a major is stamped before removed data of a table it writes (SPEC §8)."""
    if not is_major:
        return False
    log = ds.log()
    removed = log[log["vacuumed"] & log["kind"].isin(["major", "minor"])]
    return any(
        table in written and stamp > timestamp
        for written, stamp in zip(removed["tables"], removed["timestamp"], strict=True)
        for table in tables
    )


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

    if any(tables.values()) and refused_by_retention(ds, tables, timestamp, is_major):
        event("commit refused: major before removed data")
        with pytest.raises(RetentionError):
            engine_commit()
        return
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
    assert (got.name, got.is_major) == (name, is_major)
    assert set(got.tables) == set(want.tables)


#: what happens after a commit: mostly nothing, sometimes a compaction or a vacuum
MAINTENANCE = st.sampled_from(["none", "none", "compact", "compact", "vacuum", "vacuum"])


def maintain(engine: Engine, data, op: str) -> None:
    ds = engine.ds
    if op == "compact":
        table = data.draw(st.sampled_from([None, *TABLES]), label="compact table")
        try:
            compaction = ds.compact(table)
        except UnknownTableError:
            assert table not in {t for r in ds.revisions() if r.is_data for t in r.tables}
            return
        event(f"compaction: {'committed' if compaction else 'nothing to do'}")
    elif op == "vacuum" and ds.revisions():
        records = ds.revisions()
        at = data.draw(  # mostly near the head, where there is something to remove
            st.one_of(
                st.integers(min_value=max(len(records) - 2, 0), max_value=len(records)),
                st.integers(min_value=0, max_value=len(records)),
            ),
            label="vacuum horizon",
        )
        # the horizon is the newest commit at or before now - retain: put it at sequence `at`
        now = records[at - 1].committed_at if at else records[0].committed_at - timedelta(1)
        if engine.vacuums == 0 and data.draw(st.booleans(), label="consumer"):
            # a consumer at this position from now on: every vacuum keeps its next read
            engine.consumer = data.draw(st.integers(0, len(records)), label="consumer position")
        engine.vacuums += 1
        report = ds.vacuum(
            retain=timedelta(0),
            now=now,
            keep_majors=data.draw(st.booleans(), label="keep majors"),
            keep_after_sequence=engine.consumer,
        )
        assert report.horizon.sequence == at
        engine.horizon_sequence = max(engine.horizon_sequence, at)
        if report.horizon.timestamp is not None:
            stamps = [engine.horizon_time, report.horizon.timestamp]
            engine.horizon_time = max(t for t in stamps if t is not None)
        event(f"vacuum removed {min(len(report.revisions), 3)}+ revisions")
    engine.sync()


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    # mostly a major first (else every minor is refused), then a few of anything
    first=revision_specs(is_major=st.sampled_from([True, True, True, False]), allow_empty=False),
    rest=st.lists(revision_specs(), min_size=2, max_size=5),
    data=st.data(),
)
def test_engine_matches_model(spark, first, rest, data):
    # after the first revision (which may be refused), a table's first write is a major
    # when a coin says so: histories long enough to compact and vacuum, refusals still seen
    seen = set(first[2]) if first[0] else set()
    specs = [first]
    for is_major, step, tables in rest:
        if not is_major and not set(tables) <= seen and data.draw(st.booleans(), label="fix"):
            is_major = True
        seen |= set(tables) if is_major else set()
        specs.append((is_major, step, tables))
    with tempfile.TemporaryDirectory() as tmp:
        ds = RevisionedDataset(f"{tmp}/ds", spark=spark, id_columns=["id"], compact_after=None)
        engine = Engine(ds)
        model = Model()
        for n, (is_major, step, tables) in enumerate(specs):
            # a drift of n half-days: later commits are mostly, not always, later in time
            commit_one(spark, ds, model, f"rev{n}", instant(step + n), is_major, tables)
            maintain(engine, data, data.draw(MAINTENANCE, label="maintenance"))
        engine.sync()
        assert [ds.revisions()[s - 1].name for s in engine.data] == [
            r.name for r in model.revisions
        ]
        log = ds.log()
        assert list(log["sequence"]) == list(range(1, len(log) + 1))
        stamps = [r.timestamp for r in model.revisions]
        event(f"committed revisions: {model.head}")
        event(f"out-of-order timestamps: {stamps != sorted(stamps)}")
        event(f"maintenance entries: {len(log) - model.head}")

        for table in TABLES:
            retained(engine, True, check_read, engine, model, table, {})
        table = data.draw(st.sampled_from(TABLES), label="table")
        steps = st.integers(min_value=-1, max_value=9 + len(specs))
        as_of = instant(data.draw(steps, label="as_of step"))
        retained(
            engine,
            engine.covers(time=as_of),
            check_read,
            engine,
            model,
            table,
            {"as_of": as_of},
            as_of=as_of,
        )
        records = ds.revisions()
        at = data.draw(
            st.one_of(
                st.integers(min_value=1, max_value=max(len(records), 1)),
                st.integers(min_value=0, max_value=len(model.history(table))).map(
                    lambda n: f"HEAD~{n}"
                ),
                st.sampled_from([r.name for r in records] or ["HEAD"]),
            ),
            label="at",
        )
        try:
            pinned = resolve_position(records, table, at)
        except (UnknownRevisionError, UnknownTableError):
            pinned = None
        if isinstance(at, int):  # beyond the engine's log: beyond the model's too
            model_at = engine.model_position(at) if at <= len(records) else model.head + 1
        elif at.startswith("HEAD") or any(r.name == at for r in model.revisions):
            model_at = at
        else:  # the name of a maintenance entry: the data revisions before it
            model_at = engine.model_position(pinned)
        retained(
            engine,
            engine.covers(pinned=pinned),
            check_read,
            engine,
            model,
            table,
            {"at": model_at},
            at=at,
        )

        bounds = st.one_of(st.none(), steps.map(instant))
        since, until = data.draw(bounds, label="since"), data.draw(bounds, label="until")
        if since is not None and until is not None and since > until:
            since, until = until, since
        retained(
            engine,
            engine.covers(time=since) if since is not None else engine.covers(time=until),
            check_changes,
            ds,
            model,
            table,
            lambda: model.changes(table, since=since, until=until),
            lambda: ds.changes(table, since=since, until=until),
            f"changes({table!r}, since={since}, until={until})",
        )
        head = len(records)
        s = data.draw(st.integers(min_value=0, max_value=head), label="since_sequence")
        h = data.draw(
            st.one_of(st.none(), st.integers(min_value=s, max_value=head)),
            label="until_sequence",
        )
        consumer_reads = [(s, h)] + (
            [(engine.consumer, None)] if engine.consumer is not None else []
        )
        for n, (since_seq, until_seq) in enumerate(consumer_reads):
            mh = None if until_seq is None else engine.model_position(until_seq)
            cs = []

            def consume(since_seq=since_seq, until_seq=until_seq, mh=mh, cs=cs):
                cs.append(
                    check_changes(
                        ds,
                        model,
                        table,
                        lambda: model.changes_since_sequence(
                            table, engine.model_position(since_seq), mh
                        ),
                        lambda: ds.changes(
                            table, since_sequence=since_seq, until_sequence=until_seq
                        ),
                        f"changes({table!r}, since_sequence={since_seq}, "
                        f"until_sequence={until_seq})",
                    )
                )

            # the consumer's position (n == 1) was kept by every vacuum
            retained(engine, n == 1 or engine.covers(pinned=since_seq), consume)
            if cs and cs[0] is not None:  # a consumer records until_sequence: the pinned head
                want = head if until_seq is None else until_seq
                assert (cs[0].since_sequence, cs[0].until_sequence) == (since_seq, want)
