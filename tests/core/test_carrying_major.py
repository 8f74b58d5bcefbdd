"""Carrying majors: a major whose files hold only its changed rows and tombstones on top of
the state it carries (``TableWrite.carries``), read as the complete new state.

Worked examples pin each way to write one (a skip-unchanged complete offer, ``carry=True``
with tombstones), the fallbacks to a complete major, the commit rules (CarriedStateError,
late backfills), change reads, SCD2 history, point-in-time joins, compaction and vacuum.
A property test checks random histories (reads, change reads, SCD2 history) against
tests/core/model.py, which knows nothing of carrying: there a carrying major is a complete
major holding the whole new state. The model names the major as the writer of every row;
the engine keeps the name of the revision that wrote a carried row, so ``Mirror.origin``
maps (carrying major, id) back to it.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import polars as pl
import pyarrow.parquet as pq
import pytest
from harness.dates import day, instant
from harness.examples import examples
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import (
    CarriedStateError,
    InvalidArgumentError,
    NoMajorRevisionError,
    RetentionError,
)

from .helpers import by_id, frame, input_files, top_dirs
from .model import (
    Model,
    ModelChanges,
    ModelNoMajorError,
    ModelRevision,
    scd2_history,
    unchanged_skipped,
    value_changes,
)

SCHEMA = "id long, v string"
WITH_DELETED = "id long, v string, _deleted boolean"
TOMB = None  # a tombstone in a step's rows
MAJORS = ("major", "skip", "carry", "carry_skip")
HISTORY = ["id", "v", "valid_from", "valid_to", "is_current", "is_deleted", "_revision"]


def event(value: str) -> None:
    """Hypothesis statistics, when run by Hypothesis (the worked tests share the Mirror)."""
    if currently_in_test_context():
        hypothesis_event(value)


def naive(t: datetime) -> datetime:
    """Spark collects timestamps as naive datetimes in the session time zone (UTC)."""
    return t.replace(tzinfo=None)


@dataclass
class Mirror:
    """One table ``t`` committed to the engine and to the model side by side.

    Kinds of step: ``major`` (complete), ``skip`` (a complete offer with skip_unchanged: a
    carrying major when there is state as of its time), ``carry`` / ``carry_skip``
    (``carry=True``, without / with skip_unchanged), ``minor`` / ``minor_skip``. Every commit
    checks the engine's outcome and record against the mirror's prediction; a refusal
    (CarriedStateError, NoMajorRevisionError) must leave both logs as they were.
    """

    spark: object
    ds: RevisionedDataset
    model: Model = field(default_factory=Model)
    #: (carrying major, id) -> the revision whose row it carries unchanged
    origin: dict[tuple[str, int], str] = field(default_factory=dict)
    #: model sequence of a carrying major -> the model sequences it carries
    carried: dict[int, frozenset[int]] = field(default_factory=dict)
    #: model sequence -> engine sequence (maintenance entries take engine sequences)
    engine_seq: dict[int, int] = field(default_factory=dict)

    def writer(self, name: str, i: int) -> str:
        return self.origin.get((name, i), name)

    def voids_carried(self, timestamp: datetime) -> bool:
        """Whether a major stamped ``timestamp`` would void a revision a carrying major
        stamped after it carries (the engine must refuse it)."""
        revs = self.model.revisions
        return any(
            revs[m - 1].timestamp > timestamp and any(revs[s - 1].timestamp <= timestamp for s in c)
            for m, c in self.carried.items()
        )

    def commit(self, name: str, timestamp: datetime, kind: str, rows: dict):
        is_major = kind in MAJORS
        carry = kind.startswith("carry")
        skip = kind in ("skip", "carry_skip", "minor_skip")
        tombs = any(v is TOMB for v in rows.values())
        assert not (tombs and kind in ("major", "skip")), "complete offers have no tombstones"
        data = sorted(rows.items())
        df = (
            frame(self.spark, [(i, v, v is TOMB) for i, v in data], WITH_DELETED)
            if tombs
            else frame(self.spark, data, SCHEMA)
        )

        def engine():
            return self.ds.commit(
                {"t": df}, timestamp, is_major, "v1", name, skip_unchanged=skip, carry=carry
            )

        head = self.ds.head_sequence
        if is_major and self.voids_carried(timestamp):
            event("commit refused: CarriedStateError")
            with pytest.raises(CarriedStateError, match="carries"):
                engine()
            assert self.ds.head_sequence == head
            return None
        try:
            before = self.model.state("t", as_of=timestamp)
        except ModelNoMajorError:
            before = None
        if carry and before is None:
            event("commit refused: nothing to carry")
            with pytest.raises(NoMajorRevisionError):
                engine()
            assert self.ds.head_sequence == head
            return None
        keyed = {(i,): None if v is TOMB else {"v": v} for i, v in rows.items()}
        if not is_major or kind == "major" or before is None:  # no carrying
            written = unchanged_skipped(self.model, "t", timestamp, keyed) if skip else keyed
            try:
                want = self.model.commit(name, timestamp, is_major, {"t": written})
            except ModelNoMajorError:
                with pytest.raises(NoMajorRevisionError):
                    engine()
                assert self.ds.head_sequence == head
                return None
            got = engine()
            if want is None:
                assert got is None, f"{name}: nothing to commit"
                return None
            w = got.tables["t"]
            assert w.carries == (), f"{name}: a complete major or a minor carries nothing"
            assert (w.rows, w.tombstones) == (
                len(written),
                sum(r is None for r in written.values()),
            ), f"{name}: rows written"
            self.engine_seq[want.sequence] = got.sequence
            return got

        # a carrying major: the model holds its whole new state
        event(f"carrying major: {kind}")
        state = {k[0]: row["v"] for k, (row, _rev) in before.rows.items()}
        origins = {k[0]: self.writer(rev.name, k[0]) for k, (_row, rev) in before.rows.items()}
        if kind == "skip":
            full = dict(rows)
            kept = {i for i, v in full.items() if i in state and state[i] == v}
            tombstones = len(set(state) - set(full))
            expect_rows = len(full) - len(kept) + tombstones
        else:
            full = dict(state)
            for i, v in rows.items():
                if v is TOMB:
                    full.pop(i, None)
                else:
                    full[i] = v
            dropped = {
                i
                for i, v in rows.items()
                if skip and v is not TOMB and i in state and state[i] == v
            }
            kept = (set(state) - set(rows)) | dropped
            tombstones = sum(v is TOMB for v in rows.values())
            expect_rows = len(rows) - len(dropped)
        carries = frozenset(r.sequence for r in before.live) | self.carried.get(
            before.major.sequence, frozenset()
        )
        got = engine()
        assert got is not None and got.is_major, f"{name}: a carrying major commits"
        w = got.tables["t"]
        assert sorted(w.carries) == sorted(self.engine_seq[s] for s in carries), f"{name}: carries"
        assert (w.rows, w.tombstones) == (expect_rows, tombstones), f"{name}: rows written"
        if kind == "skip":
            assert w.rows_offered == len(full), f"{name}: rows offered"
        rev = ModelRevision(
            name,
            timestamp,
            True,
            self.model.head + 1,
            {"t": {(i,): {"v": v} for i, v in full.items()}},
        )
        self.model.revisions.append(rev)
        self.carried[rev.sequence] = carries
        self.origin.update({(name, i): origins[i] for i in kept if i in full})
        # a deletion of the state before is carried too (a tombstone, or the absence from a
        # carrying major that carried or wrote one): it keeps its writer, unless this major
        # writes a tombstone of its own for it
        ever = {k[0] for r in self.model.revisions for k in r.tables["t"]}
        own = {i for i, v in rows.items() if v is TOMB}
        for i in ever - set(state) - set(full) - own:
            writers = [r for r in before.live if (i,) in r.tables["t"]]
            deleter = writers[-1] if writers else before.major
            self.origin[(name, i)] = self.writer(deleter.name, i)
        self.engine_seq[rev.sequence] = got.sequence
        return got

    # -- reads ---------------------------------------------------------------------------

    def expected(self, **where) -> dict[int, tuple[str, str]]:
        """{id: (v, the revision that wrote the row)} of the model's state."""
        state = self.model.state("t", **where)
        return {
            k[0]: (row["v"], self.writer(rev.name, k[0])) for k, (row, rev) in state.rows.items()
        }

    def read(self, **where) -> dict[int, tuple[str, str]]:
        return by_id(self.ds.read("t", with_revision=True, **where), "v", "_revision")

    def check_read(self, model_where: dict | None = None, **where) -> dict:
        """The engine's read equals the model's (same arguments unless ``model_where``)."""
        want = self.expected(**(where if model_where is None else model_where))
        got = self.read(**where)
        assert got == want, f"read({where})"
        return got

    def check_changes(self, **where):
        """A change read against the model: is_reset, the rows, and a reset's ``changed``
        (the entities whose values differ from the state at ``since``/``since_sequence``)."""
        if "since_sequence" in where:
            position = where["since_sequence"]
            expected = self.model.changes_since_sequence("t", position)
            before_where = {"at": position}
        else:
            since = where.get("since")
            expected = self.model.changes("t", since=since, until=where.get("until"))
            before_where = None if since is None else {"as_of": since}
        assert isinstance(expected, ModelChanges)
        try:
            before = None if before_where is None else self.model.state("t", **before_where)
        except ModelNoMajorError:
            before = None
        cs = self.ds.changes("t", **where)
        assert cs.is_reset == expected.is_reset, f"changes({where}): is_reset"
        want = {
            k[0]: (None, True) if row is None else (row["v"], False)
            for k, (row, _rev) in expected.rows.items()
        }
        rows = deleted_or_v(cs.df)
        assert rows == want, f"changes({where}): rows"
        got_changed = None
        if expected.is_reset:
            want_changed = {
                k[0]: (None, True) if row is None else (row["v"], False)
                for k, row in value_changes(self.model, "t", expected, before).items()
            }
            got_changed = deleted_or_v(cs.changed)
            assert got_changed == want_changed, f"changes({where}): changed"
        else:
            assert cs.changed is None
        return Seen(cs, cs.is_reset, rows, got_changed)

    def model_history(self) -> list[tuple]:
        """The model's SCD2 versions as HISTORY tuples, by (id, valid_from); carried rows
        and carried tombstones keep their writer."""
        versions = [
            (
                v.key[0],
                None if v.row is None else v.row["v"],
                naive(v.valid_from),
                None if v.valid_to is None else naive(v.valid_to),
                v.valid_to is None,
                v.row is None,
                self.writer(v.revision, v.key[0]),
            )
            for v in scd2_history(self.model, "t")
        ]
        return sorted(versions, key=lambda v: (v[0], v[2]))

    def check_history(self) -> None:
        """The SCD2 history by the engine and by ``DatasetReader`` equals the model's."""
        want = self.model_history()
        got = [tuple(r) for r in self.ds.history("t").select(*HISTORY).collect()]
        assert sorted(got, key=lambda v: (v[0], v[2])) == want, "history"
        reader = DatasetReader(self.ds.root).history("t").select(*HISTORY)
        reader = reader.with_columns(pl.col("valid_from", "valid_to").dt.replace_time_zone(None))
        assert sorted(reader.rows(), key=lambda v: (v[0], v[2])) == want, "reader: history"


@dataclass(frozen=True)
class Seen:
    """A change read and what it held: {id: (v, _deleted)} of its rows and (a reset's)
    ``changed``."""

    cs: object
    is_reset: bool
    rows: dict
    changed: dict | None


def deleted_or_v(df) -> dict[int, tuple[str | None, bool]]:
    """{id: (v, _deleted)} of a change read's frame; a deletion's values must be null."""
    out = by_id(df, "v", "_deleted")
    assert all(v is None for v, deleted in out.values() if deleted), "deletions carry values"
    return out


def mirror(spark, root: str, **kw) -> Mirror:
    return Mirror(spark, RevisionedDataset(root, spark=spark, id_columns=["id"], **kw))


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory) -> Mirror:
    """r1 major (day 0), r2 minor (day 1), r3 a carrying major (day 2, skip_unchanged),
    committed once; tests take a copy (``worked``).

    | r1 | day 0 | major    | 1a 2b 3c 4d                              |
    | r2 | day 1 | minor    | 2B 5e                                    |
    | r3 | day 2 | carrying | offers 1a 2B 3CC 5e 6f: writes 3CC 4† 6f |
    """
    m = mirror(spark, str(tmp_path_factory.mktemp("carrying") / "ds"), compact_after=None)
    m.commit("r1", day(0), "major", {1: "a", 2: "b", 3: "c", 4: "d"})
    m.commit("r2", day(1), "minor", {2: "B", 5: "e"})
    m.commit("r3", day(2), "skip", {1: "a", 2: "B", 3: "CC", 5: "e", 6: "f"})
    return m


@pytest.fixture
def worked(spark, built, root) -> Mirror:
    """A copy of ``built`` at ``root`` (data file paths are relative to the root)."""
    shutil.copytree(built.ds.root, root)
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    return Mirror(
        spark,
        ds,
        copy.deepcopy(built.model),
        dict(built.origin),
        dict(built.carried),
        dict(built.engine_seq),
    )


R1 = {1: ("a", "r1"), 2: ("b", "r1"), 3: ("c", "r1"), 4: ("d", "r1")}
R2 = {**R1, 2: ("B", "r2"), 5: ("e", "r2")}
R3 = {1: ("a", "r1"), 2: ("B", "r2"), 3: ("CC", "r3"), 5: ("e", "r2"), 6: ("f", "r3")}


# -- the worked example -----------------------------------------------------------------------


def test_worked_example_record_reads_and_changes(spark, worked):
    m = worked
    ds = m.ds
    r3 = ds.revision("r3")
    w = r3.tables["t"]
    assert (r3.is_major, r3.sequence, w.carries) == (True, 3, (1, 2))
    assert (w.rows, w.tombstones, w.rows_offered) == (3, 1, 5)
    assert ds.inspect.log().set_index("name").loc["r3", "rows"] == 3
    # its files hold the changed rows and a tombstone for the entity the offer lacks
    files = [pq.read_table(f"{ds.root}/{f}").to_pylist() for f in w.files]
    written = {r["id"]: (r["v"], r["_deleted"]) for rows in files for r in rows}
    assert written == {3: ("CC", False), 4: (None, True), 6: ("f", False)}

    # reads: carried rows keep the name of the revision that wrote them
    assert m.check_read() == R3
    assert m.check_read(as_of=day(1.5)) == R2
    assert m.check_read(as_of=day(0.5)) == R1
    assert m.check_read(at="HEAD~1") == R2
    with pytest.raises(NoMajorRevisionError):
        ds.read("t", as_of=day(-1))

    # changes since a position before the carrying major: a reset whose `changed` is exact
    seen = m.check_changes(since_sequence=2)
    assert (seen.is_reset, seen.cs.until_sequence) == (True, 3)
    assert seen.rows == {i: (v, False) for i, (v, _) in R3.items()}
    assert seen.changed == {3: ("CC", False), 4: (None, True), 6: ("f", False)}
    # since the carrying major itself: nothing, no reset
    seen = m.check_changes(since_sequence=3)
    assert (seen.is_reset, seen.changed, seen.rows) == (False, None, {})
    # with revision columns, `changed` keeps the frame's columns
    cs = ds.changes("t", since_sequence=2, with_revision=True)
    assert cs.changed.columns == cs.df.columns
    revisions = by_id(cs.changed, "_revision", "_deleted")
    assert {i: r for i, (r, deleted) in revisions.items() if not deleted} == {3: "r3", 6: "r3"}

    # a minor on top, then a consumer several revisions behind gets everything since
    m.commit("r4", day(3), "minor", {1: "A", 2: TOMB})
    head = {1: ("A", "r4"), 3: ("CC", "r3"), 5: ("e", "r2"), 6: ("f", "r3")}
    assert m.check_read() == head
    assert m.check_changes(since_sequence=1).changed == {
        1: ("A", False),
        2: (None, True),
        3: ("CC", False),
        4: (None, True),
        5: ("e", False),
        6: ("f", False),
    }
    assert m.check_changes(since_sequence=2).changed == {  # 5 is r2's: no change here
        1: ("A", False),
        2: (None, True),
        3: ("CC", False),
        4: (None, True),
        6: ("f", False),
    }
    seen = m.check_changes(since_sequence=3)
    assert (seen.is_reset, seen.rows) == (False, {1: ("A", False), 2: (None, True)})
    # since a time: the same, by logical time
    assert sorted(m.check_changes(since=day(1), until=day(3)).changed) == [1, 2, 3, 4, 6]

    # an unchanged complete offer still commits a major (it records the version), empty
    r5 = m.commit("r5", day(4), "skip", {i: v for i, (v, _) in head.items()})
    assert (r5.tables["t"].rows, r5.tables["t"].carries) == (0, (1, 2, 3, 4))
    assert m.check_read() == head
    # an empty offer commits nothing
    empty = frame(spark, [], SCHEMA)
    assert ds.commit({"t": empty}, day(5), True, "v2", skip_unchanged=True) is None
    assert ds.head_sequence == 5


def test_changed_leaves_out_entities_absent_before_and_after(worked):
    """A tombstone on top of a carrying major for an entity neither state has: a reset's
    ``changed`` must not report it (with a complete major in place of r3 it does not)."""
    m = worked
    m.commit("gone", day(3), "minor", {7: TOMB})  # 7 never existed
    seen = m.check_changes(since_sequence=2)
    assert seen.is_reset and seen.changed == {3: ("CC", False), 4: (None, True), 6: ("f", False)}


# -- carry=True: what a consumer that re-scored only `changed` commits -------------------------


def test_carry_true_keeps_what_its_rows_do_not_name(spark, root):
    m = mirror(spark, root, compact_after=None)
    ds = m.ds
    m.commit("m1", day(0), "major", {1: "a", 2: "b", 3: "c", 4: "d"})
    m.commit("n1", day(1), "minor", {4: "D"})
    c1 = m.commit("c1", day(2), "carry", {2: "X", 4: TOMB, 7: "g", 9: TOMB})
    w = c1.tables["t"]
    assert (w.carries, w.rows, w.tombstones) == ((1, 2), 4, 2)
    assert m.check_read() == {1: ("a", "m1"), 2: ("X", "c1"), 3: ("c", "m1"), 7: ("g", "c1")}
    # without skip_unchanged a row equal to the kept one is written all the same
    c2 = m.commit("c2", day(3), "carry", {1: "a"})
    assert (c2.tables["t"].rows, c2.tables["t"].carries) == (1, (1, 2, 3))
    assert m.check_read()[1] == ("a", "c2")
    # with it, that row is dropped
    rows = frame(spark, [(1, "a", False), (2, "Y", False), (3, None, True)], WITH_DELETED)
    c3 = ds.commit(
        {"t": rows},
        day(4),
        True,
        "v3",
        "c3",
        carry=True,
        skip_unchanged=True,
    )
    w = c3.tables["t"]
    assert (w.carries, w.rows, w.tombstones) == ((1, 2, 3, 4), 2, 1)
    head = {1: ("a", "c2"), 2: ("Y", "c3"), 7: ("g", "c1")}
    assert m.read() == head
    tombs = frame(spark, [(7, True)], "id long, _deleted boolean")  # only the ids
    only_tombs = ds.commit({"t": tombs}, day(5), True, "v3", "c4", carry=True)
    assert (only_tombs.tables["t"].rows, only_tombs.tables["t"].tombstones) == (1, 1)
    assert m.read() == {1: ("a", "c2"), 2: ("Y", "c3")}
    # zero rows: the major still commits (it records the version) and keeps everything
    none = ds.commit({"t": frame(spark, [], WITH_DELETED)}, day(6), True, "v4", "c5", carry=True)
    assert none is not None and (none.tables["t"].rows, none.version) == (0, "v4")
    assert none.tables["t"].carries == (1, 2, 3, 4, 5, 6)
    assert m.read() == {1: ("a", "c2"), 2: ("Y", "c3")}
    cs = ds.changes("t", since_sequence=4)
    assert cs.is_reset and deleted_or_v(cs.changed) == {
        2: ("Y", False),
        3: (None, True),
        7: (None, True),
    }


def test_carry_true_errors(spark, root):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    rows = frame(spark, [(1, "a")], SCHEMA)
    with pytest.raises(NoMajorRevisionError, match="carry"):
        ds.commit({"t": rows}, day(1), True, "v1", carry=True)  # an empty dataset
    assert ds.head_sequence == 0
    ds.commit({"t": rows}, day(1), True, "v1")
    with pytest.raises(InvalidArgumentError, match="carry=True is for majors"):
        ds.commit({"t": rows}, day(2), False, "v1", carry=True)
    with pytest.raises(NoMajorRevisionError):
        ds.commit({"t": rows}, day(0), True, "v1", carry=True)  # no state as of day 0
    with pytest.raises(NoMajorRevisionError, match="carry"):  # a table without state
        ds.commit({"u": rows}, day(2), True, "v1", carry=True)
    assert ds.head_sequence == 1


# -- fallbacks: complete majors --------------------------------------------------------------


def test_a_major_with_nothing_to_carry_is_complete(spark, root):
    ds = RevisionedDataset(
        root, spark=spark, id_columns=["id"], skip_unchanged=True, compact_after=None
    )
    wide = "id long, v string, w long"
    first = ds.commit({"t": frame(spark, [(1, "a", 1), (2, "b", 2)], wide)}, day(1), True, "v1")
    assert (first.tables["t"].carries, first.tables["t"].rows) == ((), 2)
    # stamped before every major: no state as of its time
    early = ds.commit({"t": frame(spark, [(1, "a", 1)], wide)}, day(0), True, "v1", "early")
    assert (early.tables["t"].carries, early.tables["t"].rows) == ((), 1)
    assert by_id(ds.read("t", as_of=day(0.5)), "v", "w") == {1: ("a", 1)}
    # a dropped column: the carried rows could not read as rows of the new state
    narrow = frame(spark, [(1, "a"), (3, "c")], SCHEMA)
    dropped = ds.commit({"t": narrow}, day(2), True, "v2", "dropped")
    w = dropped.tables["t"]
    assert (w.carries, w.rows, w.tombstones) == ((), 2, 0)
    df = ds.read("t", with_revision=True)
    assert "w" not in df.columns
    assert by_id(df, "v", "_revision") == {1: ("a", "dropped"), 3: ("c", "dropped")}
    # the next skip major carries again (same schema)
    again = ds.commit({"t": narrow}, day(3), True, "v3", "again")
    assert (again.tables["t"].carries, again.tables["t"].rows) == ((3,), 0)
    cs = ds.changes("t", since_sequence=1)
    assert cs.is_reset and deleted_or_v(cs.changed) == {
        1: ("a", False),
        2: (None, True),
        3: ("c", False),
    }


# -- commit rules: earlier-stamped majors and minors ------------------------------------------


def test_earlier_stamped_major_refused_backfill_minor_voided(spark, worked):
    m = worked
    ds = m.ds
    # a major stamped between r1 and r3 would void r1 and r2, which r3 carries
    for skip in (False, True):
        with pytest.raises(CarriedStateError, match=r"'r3'.*stamp the major at or after"):
            ds.commit(
                {"t": frame(spark, [(1, "x")], SCHEMA)}, day(1.5), True, "v9", skip_unchanged=skip
            )
        with pytest.raises(CarriedStateError):
            ds.commit({"t": frame(spark, [(1, "x")], SCHEMA)}, day(0), True, "v9")
    assert ds.head_sequence == 3
    # before everything r3 carries: allowed, it governs only until r1's time
    m.commit("r0", day(-1), "major", {9: "z"})
    assert m.check_read(as_of=day(-0.5)) == {9: ("z", "r0")}
    assert m.check_read() == R3
    # a backfill minor committed after r3, stamped before it: voided as of r3's time on,
    # while the revisions r3 carries stay (2 is r2's again, 8 is gone)
    backfill = m.commit("late", day(1.5), "minor", {2: "L", 3: "C3", 8: "h"})
    assert backfill.sequence == 5
    assert m.check_read(as_of=day(2)) == R3
    late = {**R2, 2: ("L", "late"), 3: ("C3", "late"), 8: ("h", "late")}
    assert m.check_read(as_of=day(1.9)) == late
    # a consumer at r3 never sees the voided backfill; one before r3 gets r3's reset
    seen = m.check_changes(since_sequence=4)
    assert (seen.is_reset, seen.rows) == (False, {})
    seen = m.check_changes(since_sequence=2)
    assert seen.changed == {3: ("CC", False), 4: (None, True), 6: ("f", False)}
    seen = m.check_changes(since=day(1.7))  # the state at 1.7 had the backfill
    assert seen.changed == {
        2: ("B", False),
        3: ("CC", False),
        4: (None, True),
        6: ("f", False),
        8: (None, True),
    }
    # a major at r3's time (a later key) voids r3 and what it carries: allowed
    m.commit("r6", day(2), "major", {1: "q"})
    assert m.check_read() == {1: ("q", "r6")}
    assert m.check_read(at="HEAD~1") == R3


def test_history_and_as_of_join_across_a_carrying_major_and_a_backfill(spark, worked):
    m = worked
    m.commit("late", day(1.5), "minor", {2: "L", 8: "h"})
    ds = m.ds
    d = {n: naive(day(n)) for n in (0, 1, 1.5, 2)}
    got = [tuple(r) for r in ds.history("t").select(*HISTORY).collect()]
    want = [  # SCD2 versions, in logical time
        (1, "a", d[0], None, True, False, "r1"),
        (2, "b", d[0], d[1], False, False, "r1"),
        (2, "B", d[1], d[1.5], False, False, "r2"),
        (2, "L", d[1.5], d[2], False, False, "late"),
        (2, "B", d[2], None, True, False, "r2"),  # the carried row again
        (3, "c", d[0], d[2], False, False, "r1"),
        (3, "CC", d[2], None, True, False, "r3"),
        (4, "d", d[0], d[2], False, False, "r1"),
        (4, None, d[2], None, True, True, "r3"),
        (5, "e", d[1], None, True, False, "r2"),
        (6, "f", d[2], None, True, False, "r3"),
        (8, "h", d[1.5], d[2], False, False, "late"),
        (8, None, d[2], None, True, True, "r3"),
    ]
    assert sorted(got, key=lambda v: (v[0], v[2])) == want
    assert m.model_history() == want  # the model agrees

    events = [
        (2, 0.5, "b", "r1"),
        (2, 1.2, "B", "r2"),
        (2, 1.5, "L", "late"),
        (2, 1.8, "L", "late"),
        (2, 2, "B", "r2"),
        (2, 3, "B", "r2"),
        (3, 1.8, "c", "r1"),
        (3, 2.5, "CC", "r3"),
        (4, 2.5, None, None),
        (5, 2.5, "e", "r2"),
        (8, 1.7, "h", "late"),
        (8, 2.5, None, None),
    ]
    at = frame(
        spark,
        [(i, day(t), f"e{n}") for n, (i, t, _, _) in enumerate(events)],
        "id long, at timestamp, label string",
    )
    out = ds.as_of_join(at, "t", event_time="at", on=["id"], known_at="all_committed")
    got = {r.label: (r.v, r._revision) for r in out.collect()}
    assert got == {f"e{n}": (v, rev) for n, (_, _, v, rev) in enumerate(events)}
    for n, (i, t, v, rev) in enumerate(events):  # each equals the state read at its time
        assert m.expected(as_of=day(t)).get(i, (None, None)) == (v, rev), f"event e{n}"
    # as known when r3 was committed: the backfill is unknown
    known = ds.revision("r3").committed_at
    out = ds.as_of_join(at, "t", event_time="at", on=["id"], known_at=known)
    got = {r.label: (r.v, r._revision) for r in out.collect()}
    assert got["e3"] == ("B", "r2") and got["e10"] == (None, None)
    assert got["e4"] == ("B", "r2") and got["e7"] == ("CC", "r3")


@pytest.mark.parametrize("kind", ["skip", "carry"])
def test_a_carried_deletion_keeps_the_major_that_made_it(spark, root, kind):
    """r0, a major, no longer holds the id 1 that r1, a major stamped earlier (committed
    after it), wrote: id 1 is deleted at r0's time, by r0. r2, a carrying major of r0's
    timestamp, carries that state: the deletion keeps r0 as its revision, in the engine's
    history and the reader's (both were r2's: the major governing at that time)."""
    m = mirror(spark, root, compact_after=None)
    m.commit("r0", instant(2), "major", {0: "a"})
    m.commit("r1", instant(1), "skip", {0: "a", 1: "b"})  # no state then: written complete
    m.commit("r2", instant(2), kind, {0: "c"})
    assert m.model_history()[-1] == (1, None, naive(instant(2)), None, True, True, "r0")
    m.check_history()


# -- compaction and vacuum --------------------------------------------------------------------


def test_compaction_after_a_carrying_major_reads_the_same(spark, worked):
    m = worked
    m.commit("late", day(1.5), "minor", {2: "L", 8: "h"})
    m.commit("r5", day(3), "minor", {1: "A", 3: TOMB})
    ds = m.ds
    reads = [{}, {"as_of": day(1.7)}]
    before = [m.check_read(**where) for where in reads]
    assert before[0] == {1: ("A", "r5"), 2: ("B", "r2"), 5: ("e", "r2"), 6: ("f", "r3")}
    assert before[1][2] == ("L", "late")
    changed = m.check_changes(since_sequence=2).changed
    compaction = ds.maintenance.compact("t")
    assert compaction is not None and compaction.kind == "compaction"
    assert [m.read(**where) for where in reads] == before
    assert compaction.name in top_dirs(input_files(ds.read("t"), ds.root))
    assert deleted_or_v(ds.changes("t", since_sequence=2).changed) == changed
    cs = ds.changes("t", since_sequence=4)  # after the backfill: r5
    assert (cs.is_reset, deleted_or_v(cs.df)) == (False, {1: ("A", False), 3: (None, True)})
    # a backfill after the compaction, and another carrying major on top of both
    m.commit("late2", day(2.5), "minor", {5: "E"})
    assert m.check_read()[5] == ("E", "late2")
    c2 = m.commit("r7", day(4), "carry", {6: "F"})
    # the data revisions of the state as of day 4 (the compaction, 6, is none)
    assert sorted(c2.tables["t"].carries) == [1, 2, 3, 5, 7]
    assert m.check_read() == {
        1: ("A", "r5"),
        2: ("B", "r2"),
        5: ("E", "late2"),
        6: ("F", "r7"),
    }


def test_vacuum_keeps_the_carried_state(spark, tmp_path, worked):
    m = worked
    m.commit("late", day(1.5), "minor", {2: "L", 8: "h"})
    m.commit("r5", day(3), "minor", {1: "A"})
    ds = m.ds
    head = m.check_read()
    dry = ds.maintenance.vacuum(retain=timedelta(0), keep_majors=False, dry_run=True)
    assert dry.revisions == ("late",)  # voided at head; r1 and r2 are carried
    report = ds.maintenance.vacuum(retain=timedelta(0), keep_majors=False)
    assert report.revisions == ("late",) and report.horizon.sequence == 5
    assert m.read() == head
    assert m.read(as_of=day(3)) == head
    assert m.read(as_of=day(2)) == R3  # the horizon's time is day 3: beyond it, but kept
    seen = m.check_changes(since_sequence=2)  # model: the data revisions only
    assert seen.is_reset and sorted(seen.changed) == [1, 3, 4, 6]
    cs = ds.changes("t", since_sequence=4)
    assert (cs.is_reset, deleted_or_v(cs.df)) == (False, {1: ("A", False)})
    with pytest.raises(RetentionError, match="'late'"):
        ds.read("t", as_of=day(1.7))
    # a second vacuum finds nothing more to remove
    assert (
        ds.maintenance.vacuum(retain=timedelta(0), keep_majors=False, dry_run=True).revisions == ()
    )

    # carried files a vacuum removed: a skip major at that time is written complete
    other = mirror(spark, str(tmp_path / "other"), compact_after=None)
    other.commit("a1", day(0), "major", {1: "a", 2: "b"})
    other.commit("a2", day(1), "minor", {2: "B"})
    other.commit("a3", day(2), "major", {1: "x"})
    assert other.ds.maintenance.vacuum(retain=timedelta(0), keep_majors=False).revisions == (
        "a1",
        "a2",
    )
    back = other.ds.commit(
        {"t": frame(spark, [(1, "a"), (3, "c")], SCHEMA)},
        day(1.5),
        True,
        "v2",
        "a4",
        skip_unchanged=True,
    )
    assert (back.tables["t"].carries, back.tables["t"].rows) == ((), 2)
    assert by_id(other.ds.read("t", as_of=day(1.7)), "v") == {1: ("a",), 3: ("c",)}
    assert by_id(other.ds.read("t"), "v") == {1: ("x",)}


def test_a_carrying_major_after_compaction_and_vacuum(spark, worked):
    """The routine maintenance (compact, then vacuum) removes carried files a compaction
    holds; a later carrying major must still commit: carried through the compaction, or
    (skip_unchanged) written complete. Either way the reads are the new state."""
    m = worked
    ds = m.ds
    m.commit("r4", day(3), "minor", {3: "C"})
    assert ds.maintenance.compact("t") is not None
    report = ds.maintenance.vacuum(retain=timedelta(0), keep_majors=False)
    assert {"r1", "r2"} <= set(report.revisions)  # the compaction holds their rows
    assert m.read() == {**R3, 3: ("C", "r4")}
    position = ds.head_sequence
    offer = frame(spark, [(1, "a"), (2, "X"), (3, "C"), (5, "e")], SCHEMA)
    ds.commit({"t": offer}, day(4), True, "v2", "r5", skip_unchanged=True)
    assert by_id(ds.read("t"), "v") == {1: ("a",), 2: ("X",), 3: ("C",), 5: ("e",)}
    cs = ds.changes("t", since_sequence=position)
    assert cs.is_reset and deleted_or_v(cs.changed) == {2: ("X", False), 6: (None, True)}
    rows = frame(spark, [(1, None, True), (7, "g", False)], WITH_DELETED)
    r6 = ds.commit({"t": rows}, day(5), True, "v3", "r6", carry=True)
    assert r6.tables["t"].carries  # carry=True never writes a complete major
    assert by_id(ds.read("t"), "v") == {2: ("X",), 3: ("C",), 5: ("e",), 7: ("g",)}


# -- against the model --------------------------------------------------------------------------


#: the kind of each step after the first (a complete major): carrying majors are common
KIND = st.sampled_from(
    ["major", *["skip"] * 3, *["carry"] * 2, "carry_skip", *["minor"] * 2, "minor_skip"]
)
IDS = st.integers(min_value=0, max_value=6)
VALUES = st.sampled_from(["a", "b", "c"])


@st.composite
def steps(draw, first: bool = False):
    kind = "major" if first else draw(KIND)
    cell = VALUES if kind in ("major", "skip") else st.one_of(VALUES, VALUES, st.just(TOMB))
    rows = draw(
        st.dictionaries(IDS, cell, min_size=0 if kind.startswith("carry") else 1, max_size=5)
    )
    return kind, draw(st.integers(min_value=0, max_value=4)), rows


@settings(
    max_examples=examples(4),
    deadline=None,
    # shrinking replays Spark commits for minutes; a failure prints its example unshrunk
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(first=steps(first=True), rest=st.lists(steps(), min_size=2, max_size=3), data=st.data())
def test_carrying_majors_match_the_model(spark, first, rest, data):
    with tempfile.TemporaryDirectory() as tmp:
        m = mirror(spark, f"{tmp}/ds", compact_after=None)
        for n, (kind, step, rows) in enumerate([first, *rest]):
            # a drift of n half-days: later commits are mostly, not always, later in time
            m.commit(f"r{n}", instant(2 * step + n), kind, rows)
        assert [r.name for r in m.ds.revisions()] == [r.name for r in m.model.revisions]
        stamps = [r.timestamp for r in m.model.revisions]
        event(f"out-of-order timestamps: {stamps != sorted(stamps)}")
        event(f"carrying majors: {min(len(m.carried), 2)}")

        def outcome(check, engine, **where):
            """The check, or when the model has no major there, the engine's refusal."""
            try:
                return check(**where)
            except ModelNoMajorError:
                event("refused: no major")
                with pytest.raises(NoMajorRevisionError):
                    engine("t", **where)
                return None

        read, changes = m.ds.read, m.ds.changes
        outcome(m.check_read, read)
        as_of = instant(data.draw(st.integers(min_value=-1, max_value=14), label="as_of"))
        outcome(m.check_read, read, as_of=as_of)
        at = data.draw(st.integers(min_value=1, max_value=m.model.head), label="at")
        outcome(m.check_read, read, at=at)
        since = data.draw(st.integers(min_value=0, max_value=m.model.head), label="since_seq")
        cs = outcome(m.check_changes, changes, since_sequence=since)
        if cs is not None:
            event(f"changes by sequence: {'reset' if cs.is_reset else 'window'}")
        t = instant(data.draw(st.integers(min_value=-1, max_value=14), label="since"))
        outcome(m.check_changes, changes, since=t)
        m.check_history()
