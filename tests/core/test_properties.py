"""Property test: random revision histories, engine reads and changes against tests/core/model.py.

Histories mix majors, minors and carrying majors (``carry=True``, and majors committed
with ``skip_unchanged``) over two tables sharing one dataset, a small id space (so
revisions overlap), tombstones, and timestamps drawn from a handful of instants (so
collisions and out-of-order backfills are the norm). Each example uses a fresh dataset root.

Compactions, vacuums (docs/concepts/lifecycle.md) and purges are inserted at random points of the
engine's
history. Compactions and vacuums are never told to the model: every read must equal the
model's read of the data revisions alone, except that a read the retention horizon does not
cover may raise RetentionError instead (a read it covers never may). A purge removes the
entities from every revision of the model, so each read after it must be the read before
it without them: the latest read is compared so at the purge, every read kind (latest, as
of, ``HEAD~n``, changes, SCD2 history) against the model at the end, by the engine, by
``DatasetReader`` and by the ``format("revisions")`` data source's planning and tasks
(tests/spark_source/helpers.py: its reads split in parts). Maintenance entries take
sequences in the engine's log, so positions are mapped: the model's sequence n is the
engine's n-th data revision.
"""

from __future__ import annotations

import bisect
import copy
import tempfile
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import pytest
from harness.dates import instant
from harness.examples import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from spark_source.helpers import source_rows

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import (
    CarriedStateError,
    NoMajorRevisionError,
    RetentionError,
    UnknownRevisionError,
    UnknownTableError,
)
from revisions_assets.core.read.plan.refs import resolve_position
from revisions_assets.core.read.plan.requests import plan_history

from .helpers import frame, micros
from .model import (
    Model,
    ModelChanges,
    ModelNoMajorError,
    ModelUnknownRevisionError,
    scd2_history,
)

TABLES = ("a", "b")
SCHEMA = "id long, v long, _deleted boolean"
TOMB = None


ids = st.integers(min_value=0, max_value=15)
values = st.integers(min_value=0, max_value=3)


#: kinds of commit: a complete major, a minor, a carrying major written with carry=True
#: (rows name what changes) or with skip_unchanged (rows are the complete new state)
KINDS = st.sampled_from(["major"] * 3 + ["minor"] * 4 + ["carry"] * 2 + ["skip"] * 2)
MAJORS = ("major", "carry", "skip")


@st.composite
def revision_specs(draw, kind=KINDS, allow_empty=True):
    """(kind, timestamp step, {table: {id: value or TOMB}}) with tombstones in minors and
    carry=True majors only.

    Any table of a major or minor may be empty (unless ``allow_empty`` is false): an empty
    table of a two-table major empties it, of a minor is left out, and all tables empty
    commit nothing. Carrying majors have rows in every table."""
    kind = draw(kind)
    cell = values if kind in ("major", "skip") else st.one_of(values, values, st.just(TOMB))
    written = draw(st.sets(st.sampled_from(TABLES), min_size=1, max_size=2))
    empty = allow_empty and kind in ("major", "minor")
    rows = st.dictionaries(ids, cell, min_size=int(not empty), max_size=5)
    tables = {t: draw(st.one_of(st.just({}), rows) if empty else rows) for t in sorted(written)}
    if len(tables) > 1 and any(not r for r in tables.values()):
        event(f"two tables, one or both empty, in a {kind}")
    return kind, 2 * draw(st.integers(min_value=0, max_value=4)), tables


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
    unwritten = (UnknownTableError,) if not model.table_revisions(table) else ()
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
    """The engine's read and the reader's equal the model's (rows, and each row's revision)."""
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
    assert got == want, f"read({table!r}, {where}) differs from docs/concepts/read-semantics.md"
    polars = DatasetReader(engine.ds.root).read(table, with_revision=True, **where)
    stamps = polars["_revision_timestamp"].dt.epoch("us")
    columns = [polars[c] for c in ("id", "v", "_revision", "_revision_sequence")]
    rows = [(*r[:4], s) for r, s in zip(zip(*columns, strict=True), stamps, strict=True)]
    assert {r[0]: tuple(r[1:]) for r in rows} == want, f"reader: read({table!r}, {where})"
    source = source_rows(engine.ds.root, table=table, with_revision=True, **where).to_pylist()
    got = {r["id"]: (r["v"], r["_revision"], r["_revision_sequence"]) for r in source}
    assert len(got) == len(source), "format('revisions'): duplicate ids in a read"
    assert got == {k: v[:3] for k, v in want.items()}, f"format('revisions'): {where}"


def check_history(engine: Engine, model, table: str, since: datetime | None) -> None:
    """The SCD2 history since ``since``, by the engine and the reader, against the model's.

    After a vacuum, a history starts from the state at the time its plan names
    (``starts_at``, at or before ``since``): a version open then is reported from it, with
    the revision whose row holds then, and a deletion open then (even one made then) is
    left out: the state before it is not retained."""
    ds = engine.ds
    if not model.table_revisions(table):
        with pytest.raises(UnknownTableError):
            ds.history(table, since=since)
        return
    expected, df = scd2_history(model, table), ds.history(table, since=since)
    plan = plan_history(ds.snapshot(), table, since=since)
    start = plan.starts_at
    assert start is None or (since is not None and start <= since)
    event(f"history: {'from a start' if start else 'whole'}")
    want = set()
    for v in expected:
        if v.valid_to is not None and since is not None and v.valid_to <= since:
            continue
        opened, revision = v.valid_from, v.revision
        if start is not None and opened <= start:
            if v.row is None:
                continue
            opened, revision = start, model.state(table, as_of=start).rows[v.key][1].name
        value = None if v.row is None else v.row["v"]
        want.add((v.key[0], value, micros(opened), v.valid_to and micros(v.valid_to), revision))
    columns = "id", "v", "unix_micros(valid_from)", "unix_micros(valid_to)", "_revision"
    got = [tuple(r) for r in df.selectExpr(*columns).collect()]
    assert len(got) == len(set(got)) and set(got) == want, f"history({table!r}, since={since})"
    polars = DatasetReader(ds.root).history(table, since=since)
    polars = polars.with_columns(
        polars["valid_from"].dt.epoch("us"), polars["valid_to"].dt.epoch("us")
    )
    assert set(polars.select("id", "v", "valid_from", "valid_to", "_revision").rows()) == want
    source = source_rows(ds.root, table=table, history=True, since=since).to_pylist()
    got = {
        (
            r["id"],
            r["v"],
            micros(r["valid_from"]),
            r["valid_to"] and micros(r["valid_to"]),
            r["_revision"],
        )
        for r in source
    }
    assert len(got) == len(source) and got == want, f"format('revisions'): history({since})"


def check_changes(ds, model, table, model_call, engine_call, what, options):
    """``options``: the read's options, which the Spark data source reads alike."""
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
    assert got == want, f"{what} differs from docs/concepts/read-semantics.md"
    source = source_rows(ds.root, table=table, changes=True, **options).to_pylist()
    assert {r["_reset"] for r in source} <= {cs.is_reset}, f"format('revisions'): {what}"
    rows = {r["id"]: (None if r["_deleted"] else r["v"], r["_deleted"]) for r in source}
    assert len(rows) == len(source) and rows == want, f"format('revisions'): {what}"
    if not expected.is_reset:
        got_names = {getattr(r, "name", r) for r in cs.revisions}
        assert got_names == {r.name for r in expected.revisions}, f"{what}: revisions"
    return cs


def refused_by_retention(ds, tables, timestamp, is_major) -> bool:
    """Whether a major is stamped before removed data of a table it writes
    (docs/concepts/lifecycle.md)."""
    if not is_major:
        return False
    log = ds.inspect.log()
    removed = log[log["vacuumed"] & log["kind"].isin(["major", "minor"])]
    return any(
        table in written and stamp > timestamp
        for written, stamp in zip(removed["tables"], removed["timestamp"], strict=True)
        for table in tables
    )


def commit_one(spark, engine: Engine, model, name, timestamp, kind, tables):
    """Commit to both; the engine must return the model's revision, None, or the same refusal."""
    ds = engine.ds

    def engine_commit():
        return ds.commit(
            {t: engine_frame(spark, rows) for t, rows in tables.items()},
            timestamp=timestamp,
            is_major=kind in MAJORS,
            version="v",
            name=name,
            carry=kind == "carry",
            skip_unchanged=kind == "skip",
        )

    head = ds.head_sequence
    refusals = []
    if any(tables.values()) and refused_by_retention(ds, tables, timestamp, kind in MAJORS):
        refusals.append(RetentionError)
    if kind in MAJORS and model.voids_carried(tables, timestamp):
        refusals.append(CarriedStateError)
    if refusals:
        event(f"commit refused: {refusals[0].__name__}")
        with pytest.raises(tuple(refusals)):
            engine_commit()
        assert ds.head_sequence == head
        return
    model_tables = {
        t: {(i,): None if v is TOMB else {"v": v} for i, v in rows.items()}
        for t, rows in tables.items()
    }
    if kind in ("carry", "skip"):
        commit_carrying(engine, model, name, timestamp, kind, model_tables, engine_commit)
        return
    try:
        want = model.commit(name, timestamp, kind == "major", model_tables)
    except ModelNoMajorError:
        with pytest.raises(NoMajorRevisionError):
            engine_commit()
        return
    if want is None:
        # an empty minor on a table without a major: NoData or the missing-major error
        # are both faithful to docs/guides/engine.md; nothing may be committed either way
        try:
            assert engine_commit() is None
        except NoMajorRevisionError:
            assert kind == "minor"
        return
    got = engine_commit()
    assert (got.name, got.is_major) == (name, kind == "major")
    assert set(got.tables) == set(want.tables)


def commit_carrying(engine: Engine, model, name, timestamp, kind, tables, engine_commit) -> None:
    """A carrying major: the engine must carry what the model carries. Where a vacuum
    removed carried files, carry=True may be refused and a skip_unchanged major is written
    complete (docs/guides/versions.md), which the model then mirrors."""
    engine.sync()
    removed = set(engine.ds.inspect.log().query("vacuumed")["sequence"])
    probe = copy.deepcopy(model)
    try:
        want = probe.carrying_major(name, timestamp, tables, complete=kind == "skip")
    except ModelNoMajorError:
        event("commit refused: nothing to carry")
        with pytest.raises(NoMajorRevisionError):
            engine_commit()
        return
    carried = {t: {engine.engine_sequence(s) for s in c} for t, c in want.carries.items()}
    try:
        got = engine_commit()
    except RetentionError:
        assert kind == "carry" and removed & set().union(*carried.values())
        event("commit refused: carried files removed")
        return
    event(f"carrying major: {kind}")
    complete = {t for t, c in carried.items() if not got.tables[t].carries}
    assert all(not got.tables[t].carries for t in set(tables) - set(carried)), f"{name}: carries"
    for table, sequences in carried.items():
        if table in complete:  # written complete: its carried files are gone
            assert kind == "skip" and removed & sequences, f"{name}: {table} not carried"
        else:
            assert set(got.tables[table].carries) == sequences, f"{name}: {table} carries"
    if complete:
        event("skip_unchanged major written complete")
        model.revisions.append(
            replace(
                want,
                tables={**want.tables, **{t: tables[t] for t in complete}},
                carries={t: c for t, c in want.carries.items() if t not in complete},
            )
        )
    else:
        model.revisions.append(want)
    assert got.name == name and got.is_major


def purge_one(spark, engine: Engine, model, data) -> None:
    """Purge a few entities from a table: the latest reads of the engine and the reader are
    the reads before without them, and the model drops them from every revision."""
    ds = engine.ds
    table = data.draw(st.sampled_from(TABLES), label="purge table")
    purged = data.draw(st.sets(ids, min_size=1, max_size=3), label="purged ids")
    if table not in {t for r in ds.revisions() if r.is_data for t in r.tables}:
        with pytest.raises(UnknownTableError):
            ds.maintenance.purge(
                table, engine_frame(spark, dict.fromkeys(purged, 0)).select("id"), reason="x"
            )
        return

    def latest():
        try:
            spark_rows = ds.read(table, with_revision=True).select("id", "v", "_revision")
            reader_rows = DatasetReader(ds.root).read(table, with_revision=True)
            reader_rows = reader_rows.select("id", "v", "_revision").rows()
            return {tuple(r) for r in spark_rows.collect()}, set(reader_rows)
        except (NoMajorRevisionError, RetentionError):
            return None

    before = latest()
    entry = ds.maintenance.purge(
        table, engine_frame(spark, dict.fromkeys(purged, 0)).select("id"), reason="x"
    )
    # no live file holds the ids: nothing is committed (the model drops them from removed
    # revisions only, which no read may use)
    assert entry is None or (entry.kind == "purge" and entry.purge.entities == len(purged))
    model.purge(table, [(i,) for i in purged])
    after = latest()
    if before is not None:
        assert after == tuple({r for r in rows if r[0] not in purged} for rows in before)
    event(f"purge: {'nothing held them' if entry is None else 'rows removed'}")


#: what happens after a commit: mostly nothing, sometimes a compaction, a vacuum or a purge
MAINTENANCE = st.sampled_from(["none", "none", "compact", "compact", "vacuum", "vacuum", "purge"])


def maintain(spark, engine: Engine, model, data, op: str) -> None:
    ds = engine.ds
    if op == "purge":
        purge_one(spark, engine, model, data)
    elif op == "compact":
        table = data.draw(st.sampled_from([None, *TABLES]), label="compact table")
        try:
            compaction = ds.maintenance.compact(table)
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
        report = ds.maintenance.vacuum(
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
    max_examples=examples(6),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    # mostly a major first (else every minor is refused), then a few of anything
    first=revision_specs(
        kind=st.sampled_from(["major", "major", "major", "minor"]), allow_empty=False
    ),
    rest=st.lists(revision_specs(), min_size=2, max_size=5),
    data=st.data(),
)
def test_engine_matches_model(spark, first, rest, data):
    # after the first revision (which may be refused), a table's first write is a major
    # when a coin says so: histories long enough to compact and vacuum, refusals still seen
    seen = set(first[2]) if first[0] == "major" else set()
    specs = [first]
    for kind, step, tables in rest:
        unseen = not set(tables) <= seen
        if kind in ("minor", "carry") and unseen and data.draw(st.booleans(), label="fix"):
            kind = "major"
        seen |= set(tables) if kind in MAJORS else set()
        specs.append((kind, step, tables))
    with tempfile.TemporaryDirectory() as tmp:
        ds = RevisionedDataset(f"{tmp}/ds", spark=spark, id_columns=["id"], compact_after=None)
        engine = Engine(ds)
        model = Model()
        for n, (kind, step, tables) in enumerate(specs):
            # a drift of n half-days: later commits are mostly, not always, later in time
            commit_one(spark, engine, model, f"rev{n}", instant(step + n), kind, tables)
            maintain(spark, engine, model, data, data.draw(MAINTENANCE, label="maintenance"))
        engine.sync()
        assert [ds.revisions()[s - 1].name for s in engine.data] == [
            r.name for r in model.revisions
        ]
        log = ds.inspect.log()
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
                st.integers(min_value=0, max_value=len(model.table_revisions(table))).map(
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
        # the history since the retention horizon's time, where a vacuum set one, else since
        start = (
            engine.horizon_time
            if engine.horizon_time and data.draw(st.booleans(), label="since the horizon")
            else since
        )
        retained(
            engine,
            engine.horizon_time is None if start is None else engine.covers(time=start),
            check_history,
            engine,
            model,
            table,
            start,
        )
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
            {"since": since, "until": until},
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
                        {"since_sequence": since_seq, "until_sequence": until_seq},
                    )
                )

            # the consumer's position (n == 1) was kept by every vacuum
            retained(engine, n == 1 or engine.covers(pinned=since_seq), consume)
            if cs and cs[0] is not None:  # a consumer records until_sequence: the pinned head
                want = head if until_seq is None else until_seq
                assert (cs[0].since_sequence, cs[0].until_sequence) == (since_seq, want)
