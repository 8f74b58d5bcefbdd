"""The guarantees of the lifecycle operations against concurrent work (README "Purge",
"Lifecycle"): a purge gives up when a commit lands between its scan and its entry; a
compaction gives up when a purge lands between its snapshot and its entry, so an erasure is
never undone; a failed policy compaction never fails the commit it follows; a vacuum racing
commits loses nothing and removes nothing a commit or a read at the head needs.

Races are interleaved deterministically: the second command runs at a chosen point of the
first (``harness.race_points.landing_at``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from harness.dates import day
from harness.examples import examples
from harness.race_points import POINTS, landing_at
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.cli import cli
from revisions_assets.core.dataset import DatasetMaintenance
from revisions_assets.core.errors import (
    CarriedStateError,
    CommitConflictError,
    RetentionError,
    StorageError,
)
from revisions_assets.core.log.records import CompactedRange, Revision
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.log.view import LogView
from revisions_assets.core.maintain import compaction
from revisions_assets.core.maintain.purge import Purge
from revisions_assets.core.storage.backends import open_storage
from revisions_assets.core.write.conflicts import ReadSet

from .helpers import frame, stage_revision, tree
from .legacy_layout import write_legacy
from .model import Model

SCHEMA = "id long, v long"


def test_a_purge_gives_up_when_a_commit_lands_after_its_scan(spark, root, monkeypatch):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    ds.commit({"t": frame(spark, [(1, 10), (2, 20)], SCHEMA)}, day(0), is_major=True)
    other = RevisionedDataset(root, spark=spark, id_columns=["id"])
    scan = Purge._scan

    def scan_then_a_commit_lands(self, *args, **kwargs):
        hits = scan(self, *args, **kwargs)
        # another writer's minor lands while the purge rewrites the files it found
        other.commit({"t": frame(spark, [(1, 11)], SCHEMA)}, day(1), is_major=False, name="late")
        return hits

    monkeypatch.setattr(Purge, "_scan", scan_then_a_commit_lands)
    with pytest.raises(CommitConflictError, match="purge of table 't' gave up"):
        ds.maintenance.purge("t", frame(spark, [(1,)], "id long"), reason="erasure request")
    assert [r.name for r in ds.revisions()][-1] == "late"  # the commit, no purge entry
    assert not [p for p in tree(root) if p.startswith("purge-")]  # its rewrites removed
    monkeypatch.undo()
    ds.maintenance.purge(
        "t", frame(spark, [(1,)], "id long"), reason="erasure request"
    )  # run it again
    assert sorted(ds.read("t").toPandas()["id"]) == [2]


def test_a_failed_policy_compaction_never_fails_the_commit(spark, root, monkeypatch, caplog):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=1)
    ds.commit({"t": frame(spark, [(1, 10)], SCHEMA)}, day(0), is_major=True)
    ds.commit({"t": frame(spark, [(2, 20)], SCHEMA)}, day(1), is_major=False)

    def disk_full(storage, name):
        raise StorageError(f"{storage.uri}/{name}: no space left on device")

    monkeypatch.setattr(compaction, "claim_folder", disk_full)
    record = ds.commit({"t": frame(spark, [(3, 30)], SCHEMA)}, day(2), is_major=False)
    assert record is not None and ds.maintenance.last_compactions == ()
    assert ds.revisions()[-1].name == record.name  # committed, nothing compacted
    assert "compaction after revision" in caplog.text and "no space left" in caplog.text
    assert sorted(ds.read("t").toPandas()["id"]) == [1, 2, 3]


def test_a_vacuum_racing_commits_loses_nothing(spark, root):
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=3)
    ds.commit({"t": frame(spark, [(0, 0)], SCHEMA)}, day(0), is_major=True)
    commits, errors = 12, []

    def writer() -> None:
        mine = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=3)
        try:
            for n in range(1, commits + 1):
                mine.commit({"t": frame(spark, [(n, n)], SCHEMA)}, day(n), is_major=False)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    vacuums = 0
    while thread.is_alive():
        RevisionedDataset(root, spark=spark).maintenance.vacuum(retain=timedelta(0))
        vacuums += 1
    thread.join()
    assert errors == []
    log = ds.inspect.log()
    kinds = list(log["kind"])
    # the race happened: vacuum entries landed between the writer's commits
    first, last = kinds.index("minor"), len(kinds) - 1 - kinds[::-1].index("minor")
    assert "vacuum" in kinds[first:last], kinds
    assert sorted(ds.read("t").toPandas()["id"]) == list(range(commits + 1))
    assert [f for f in ds.maintenance.verify() if f.severity == "error"] == []
    assert vacuums > 1


def test_an_import_gives_up_when_another_writer_commits_to_its_root(spark, tmp_path, monkeypatch):
    """The import's own compactions (the ``compact_after`` policy, here after every revision)
    are its own; a commit of another writer between two of its revisions stops it."""
    src, root = tmp_path / "original", str(tmp_path / "imported")
    revisions = [  # one featurizer: a major, two minors
        (name, day(n), n == 0, "", {"f": pd.DataFrame({"id": [n, 9], "v": [n, n]}).set_index("id")})
        for n, name in enumerate(["revision_0", "revision_2", "revision_4"])
    ]
    write_legacy(src, revisions)
    monkeypatch.setattr(DatasetMaintenance, "compaction_due", lambda self, table: True)
    import_commit = RevisionedDataset._import_commit
    calls = []

    def another_writer_before_the_third(self, *args, **kwargs):
        calls.append(args)
        if len(calls) == 3:
            other = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
            other.commit({"x": frame(spark, [(1, 1)], SCHEMA)}, day(9), True, name="other")
        return import_commit(self, *args, **kwargs)

    monkeypatch.setattr(RevisionedDataset, "_import_commit", another_writer_before_the_third)
    with pytest.raises(CommitConflictError) as conflict:
        RevisionedDataset.import_legacy(src, root, spark=spark)
    message = str(conflict.value)
    assert "the import of revision 'revision_4' gave up: major 'other' (sequence 4)" in message
    assert "import into a new root" in message
    log = RevisionedDataset(root, spark=spark).inspect.log()
    # its own compaction (after revision_2) did not stop it
    assert list(log["kind"]) == ["major", "minor", "compaction", "major"]
    assert list(log["name"])[:2] == ["revision_0", "revision_2"] and log["name"][3] == "other"
    assert not Path(root, "revision_4").exists()  # nothing of it left


def ids_stored(root: str) -> set[int]:
    """Every id in every data file under ``root``, whatever the log says."""
    return {
        i
        for path in Path(root).glob("*/*/*.parquet")
        for i in pq.read_table(path, columns=["id"]).column("id").to_pylist()
    }


def every_read_lacks(ds: RevisionedDataset, root: str, purged: set[int], rows: int) -> None:
    """No read of table ``t`` returns the purged ids, on both engines (the one plan of each
    read is run by Spark for the latest state, by Polars at every position and for the
    changes and history), and ``describe`` counts the ``rows`` left."""
    assert not purged & {r.id for r in ds.read("t").select("id").collect()}
    reader = DatasetReader(root)
    for sequence in range(1, reader.head_sequence + 1):
        assert not purged & set(reader.read("t", at=sequence)["id"])
    assert not purged & set(reader.read("t")["id"])
    assert not purged & set(reader.changes("t", since_sequence=0).df["id"])
    assert not purged & set(reader.history("t")["id"])
    described = CliRunner().invoke(cli, ["describe", root, "t", "--json"])
    assert described.exit_code == 0, described.output
    assert json.loads(described.stdout)[0]["rows"] == rows


PURGED = {2, 5}


def compaction_racing_a_purge(spark, root: str) -> tuple[RevisionedDataset, list]:
    """Ids 1-7 of table ``t`` in two revisions, then a compaction during which a purge of
    ids 2 and 5 lands: the handle, and the purge entry that landed."""
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    ds.commit({"t": frame(spark, [(i, i) for i in range(1, 7)], SCHEMA)}, day(0), True)
    ds.commit({"t": frame(spark, [(5, 50), (7, 70)], SCHEMA)}, day(1), False)
    other = RevisionedDataset(root, spark=spark, compact_after=None)

    def purge():
        ids = frame(spark, [(i,) for i in sorted(PURGED)], "id long")
        return other.maintenance.purge("t", ids, reason="erasure request")

    with landing_at("append", purge) as landed:
        try:
            ds.maintenance.compact()
        finally:
            assert [r.kind for r in landed] == ["purge"]  # it landed while the compaction ran
    return ds, landed


def test_a_compaction_racing_a_purge_never_brings_the_ids_back(spark, root):
    """Issue 52: a purge committed between a compaction's snapshot and its entry. The
    compaction read the files before the purge: committed, its files would serve every
    read with the erased rows, and outlive the vacuum that deletes the purged files."""
    purged = PURGED
    with pytest.raises(CommitConflictError) as conflict:
        compaction_racing_a_purge(spark, root)
    ds = RevisionedDataset(root, spark=spark, compact_after=None)
    landed = [ds.revisions()[-1]]
    message = str(conflict.value)
    assert f"purge {landed[0].name!r} (sequence 3) purged table 't'" in message
    assert "nothing was committed: run the compaction again" in message
    assert [r.kind for r in ds.revisions()] == ["major", "minor", "purge"]
    assert not [p for p in tree(root) if p.startswith("compaction-")]  # its folder removed
    every_read_lacks(ds, root, purged, rows=5)

    ds.maintenance.vacuum(retain=timedelta(0))
    assert not purged & ids_stored(root)  # the erasure reached storage
    every_read_lacks(ds, root, purged, rows=5)
    compacted = ds.maintenance.compact()  # run again: it reads the purged files
    assert compacted is not None and compacted.replaces["t"].read_at == 4
    every_read_lacks(ds, root, purged, rows=5)
    assert ds.maintenance.verify() == []


def earlier_release(monkeypatch) -> None:
    """The engine as an earlier release ran it: no conflict check, no ``read_at``
    recorded, no compaction seen as one that missed a purge."""
    monkeypatch.setattr(ReadSet, "conflict", lambda self, record: None)
    to_doc = CompactedRange.to_doc
    monkeypatch.setattr(
        CompactedRange,
        "to_doc",
        lambda self: {k: v for k, v in to_doc(self).items() if k != "read_at"},
    )
    monkeypatch.setattr(LogView, "_missed_purge", lambda self, compaction, history: None)


def test_a_compaction_an_earlier_release_committed_after_a_purge_is_never_read(
    spark, root, monkeypatch
):
    """The log issue 52 left behind: the racing compaction committed, holding the erased
    ids. Reads never use it; verify reports it; a vacuum deletes its files. Where the earlier
    release's vacuum also removed the revisions it holds, reads refuse rather than return
    the erased rows, and running the purge again plus a vacuum erase them from storage."""
    earlier_release(monkeypatch)
    _ds, (purge,) = compaction_racing_a_purge(spark, root)
    bad = RevisionedDataset(root, spark=spark, compact_after=None).revisions()[-1]
    assert bad.kind == "compaction" and bad.replaces["t"].read_at is None
    assert PURGED <= {r.id for r in _ds.read("t").select("id").collect()}  # the bug, as it was
    vacuumed = shutil.copytree(root, f"{root}-vacuumed")
    RevisionedDataset(vacuumed, spark=spark).maintenance.vacuum(retain=timedelta(0))
    monkeypatch.undo()

    ds = RevisionedDataset(root, spark=spark, compact_after=None)
    every_read_lacks(ds, root, PURGED, rows=5)
    (finding,) = ds.maintenance.verify()
    assert (finding.kind, finding.severity, finding.path) == (
        "compaction_missed_purge",
        "error",
        bad.name,
    )
    assert f"purge {purge.name!r} (sequence 3)" in finding.message
    ds.maintenance.vacuum(retain=timedelta(0))
    assert not PURGED & ids_stored(root)
    assert ds.maintenance.verify() == []
    every_read_lacks(ds, root, PURGED, rows=5)

    # the earlier release's vacuum removed the revisions and the purged files: the
    # compaction holds the only copy of the state, with the erased rows
    ds = RevisionedDataset(vacuumed, spark=spark, compact_after=None)
    with pytest.raises(RetentionError):
        ds.read("t")
    with pytest.raises(RetentionError):
        DatasetReader(vacuumed).read("t")
    assert {(f.kind, f.path) for f in ds.maintenance.verify()} >= {
        ("compaction_missed_purge", bad.name)
    }
    ids = frame(spark, [(i,) for i in sorted(PURGED)], "id long")
    again = ds.maintenance.purge("t", ids, reason="erasure request, again")
    assert [s.sequence for s in again.purge.swaps["t"]] == [bad.sequence]
    ds.maintenance.vacuum(retain=timedelta(0))
    assert not PURGED & ids_stored(vacuumed)
    ds.commit({"t": frame(spark, [(1, 1)], SCHEMA)}, day(2), True)  # the repair's new major
    assert [r.id for r in ds.read("t").select("id").collect()] == [1]


# -- every pair of commands that rewrite state, interleaved ------------------------------------

#: the commands a race interleaves: maintenance, and commits that read the state they
#: rewrite (a skip-unchanged minor, a carrying major by carry=True or by skip_unchanged)
RACERS = ("compact", "purge", "vacuum", "minor", "skip minor", "major", "carry major", "skip major")
#: each purge erases its own id: the first command's 2, the second's 5 (both in the history)
ERASES = {"first": 2, "second": 5}
#: the rows each commit offers (never an id a purge erases); a carry=True major's None
#: deletes; a skip_unchanged major's rows are the complete new state
OFFERS = {
    "minor": {1: 11, 9: 11},
    "skip minor": {0: 0, 1: 12, 3: 0},
    "major": {0: 13, 6: 13},
    "carry major": {1: 14, 4: None},
    "skip major": {0: 0, 1: 15, 3: 0, 4: 0, 6: 0, 7: 0},
}
#: the history the race starts from: a major of ids 0-7, a minor; then, as drawn, a
#: compaction of both or a second major (which the minor's ids leave voided)
HISTORIES = ("two revisions", "compacted", "a second major")


def history(spark, root: str, shape: str, model: Model) -> None:
    """Stage the history (no Spark job but the compaction) into ``root`` and the model."""
    log = RevisionLog(open_storage(root))
    revisions = [
        ("r0", day(0), True, {i: 0 for i in range(8)}),
        ("r1", day(1), False, {1: 1, 5: 1, 8: 1}),
    ]
    if shape == "a second major":
        revisions.append(("r2", day(2), True, {i: 2 for i in range(8)}))
    for name, stamp, major, rows in revisions:
        stage_revision(log, root, name, stamp, major, {(i,): {"v": v} for i, v in rows.items()})
        model.commit(name, stamp, major, {"t": {(i,): {"v": v} for i, v in rows.items()}})
    log.after_commit()
    if shape == "compacted":
        RevisionedDataset(root, spark=spark, compact_after=None).maintenance.compact()


def racer(spark, root: str, command: str, role: str, stamp) -> Callable[[], object]:
    """One command on a handle of its own; a commit is named after its command and role."""

    def run() -> object:
        ds = RevisionedDataset(root, spark=spark, compact_after=None)
        if command == "compact":
            return ds.maintenance.compact()
        if command == "purge":
            ids = frame(spark, [(ERASES[role],)], "id long")
            return ds.maintenance.purge("t", ids, reason=f"{role} erasure")
        if command == "vacuum":
            return ds.maintenance.vacuum(retain=timedelta(0)).entry
        rows = [(i, v, v is None) for i, v in OFFERS[command].items()]
        return ds.commit(
            {"t": frame(spark, rows, "id long, v long, _deleted boolean")},
            stamp,
            is_major=command.endswith("major"),
            name=f"{role}-{command.replace(' ', '-')}",
            carry=command == "carry major",
            skip_unchanged=command.startswith("skip"),
        )

    return run


def expected_outcome(first: str, second: Revision | None, first_stamp) -> str | None:
    """How the first command ends, by the conflict table (docs/concepts/lifecycle.md) given
    what the second committed in the middle of it: ``committed`` (or nothing to do),
    ``conflict`` (CommitConflictError) or ``carried`` (CarriedStateError, as when the second
    ran first); None where it depends on more than the kinds (a vacuum that may or may not
    remove an entry a purge rewrites)."""
    if second is None or first == "vacuum":
        return "committed"
    kind, before = second.kind, second.is_data and second.timestamp <= first_stamp
    if first.endswith("major") and second.is_major and not before and second.tables["t"].carries:
        return "carried"  # it would void what the second carries, whichever ran first
    if first == "purge":
        return None if kind == "vacuum" else "conflict"  # any entry of its table since its scan
    if kind == "purge":  # they read the rows it erased
        return "conflict" if first in ("compact", "skip minor", "skip major") else "committed"
    # a carrying major would void what it should carry; a major replaced the state a
    # skip-unchanged minor compared with
    voided = before and (
        first in ("carry major", "skip major") or (first == "skip minor" and second.is_major)
    )
    return "conflict" if voided else "committed"


def apply_to_model(model: Model, records: Sequence[Revision]) -> None:
    """The data revisions and purges among ``records`` (committed in this order)."""
    for record in records:
        if record.kind == "purge":
            model.purge("t", [(ERASES[record.purge.reason.split()[0]],)])
            continue
        if not record.is_data:
            continue
        command = record.name.split("-", 1)[1].replace("-", " ")
        rows = {(i,): None if v is None else {"v": v} for i, v in OFFERS[command].items()}
        if command.endswith("major") and command != "major":
            model.carrying_major(
                record.name, record.timestamp, {"t": rows}, complete=command == "skip major"
            )
        else:
            model.commit(record.name, record.timestamp, record.is_major, {"t": rows})


def model_rows(model: Model) -> dict[int, int]:
    return {k[0]: row["v"] for k, (row, _rev) in model.state("t").rows.items()}


@settings(
    max_examples=examples(3),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# found exploring: a carrying major stamped after a major lands in the middle of it; the
# major would void what the carrying major carries (CarriedStateError, in either order)
@example(
    first="major", second="carry major", point="write", shape="two revisions", second_earlier=False
)
@given(
    first=st.sampled_from(RACERS),
    second=st.sampled_from(RACERS),
    point=st.sampled_from(POINTS),
    shape=st.sampled_from(HISTORIES),
    second_earlier=st.booleans(),
)
def test_every_pair_of_commands_interleaved(spark, first, second, point, shape, second_earlier):
    """The second command runs at a point of the first (after its snapshot, before it
    writes; or once it wrote, before its entry). The first commits or gives up with
    CommitConflictError exactly as the conflict table says, leaving nothing behind; the
    state read on both engines is the model's with the committed entries in log order;
    no read returns an erased id, and after a vacuum no stored file holds one."""
    with tempfile.TemporaryDirectory() as tmp:
        root, model = f"{tmp}/ds", Model()
        history(spark, root, shape, model)
        before = RevisionedDataset(root, spark=spark).head_sequence
        first_stamp = day(5)
        second_stamp = day(4) if second_earlier else day(6)
        land = racer(spark, root, second, "second", second_stamp)
        with landing_at(point, land) as landed:
            try:
                racer(spark, root, first, "first", first_stamp)()
                outcome = "committed"
            except CommitConflictError:
                outcome = "conflict"
            except CarriedStateError:
                outcome = "carried"
        landed_entry = landed[0] if landed else None
        event(f"{first} then {second} at {point}: {outcome if landed else 'nothing landed'}")
        expected = expected_outcome(first, landed_entry, first_stamp)
        assert expected in (None, outcome), (first, landed_entry, outcome)
        ds = RevisionedDataset(root, spark=spark, compact_after=None)
        records = ds.revisions()[before:]
        if outcome != "committed":  # nothing of the first committed, nothing of it left
            assert records == ([landed_entry] if landed_entry is not None else [])
        assert ds.maintenance.verify() == []
        apply_to_model(model, records)
        erased = {ERASES[r.purge.reason.split()[0]] for r in records if r.kind == "purge"}
        want = model_rows(model)
        assert not erased & set(want)
        got = {r.id: r.v for r in ds.read("t").collect()}
        assert got == want, f"{first} then {second} at {point}: {outcome}"
        reader = DatasetReader(root)
        assert dict(reader.read("t").select("id", "v").rows()) == want
        reads = [lambda s=s: reader.read("t", at=s) for s in range(1, reader.head_sequence + 1)]
        for read in [*reads, lambda: reader.history("t")]:
            try:
                assert not erased & set(read()["id"])
            except RetentionError:
                pass  # a vacuum of the race removed what that read needs
        ds.maintenance.vacuum(retain=timedelta(0))
        assert not erased & ids_stored(root)
        assert {r.id: r.v for r in ds.read("t").collect()} == want


def test_a_commit_whose_folder_a_vacuum_deleted_meanwhile_gives_up(spark, root):
    """A vacuum whose grace period passes while a commit writes deletes the commit's folder
    as an orphan (no entry references it yet): the commit must not append an entry whose
    files are gone. It gives up, naming the vacuum, and every read is what it was."""
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    ds.commit({"t": frame(spark, [(1, 10), (2, 20)], SCHEMA)}, day(0), is_major=True)
    other = RevisionedDataset(root, spark=spark, compact_after=None)
    vacuum = lambda: other.maintenance.vacuum(retain=timedelta(0), grace=timedelta(0))  # noqa: E731
    with landing_at("append", vacuum) as landed, pytest.raises(CommitConflictError) as conflict:
        ds.commit({"t": frame(spark, [(3, 30)], SCHEMA)}, day(1), is_major=False, name="late")
    (report,) = landed
    assert report.orphans == ("late",)
    assert "deleted its folder 'late' while it was written" in str(conflict.value)
    assert [r.kind for r in ds.revisions()] == ["major", "vacuum"]
    assert sorted(DatasetReader(root).read("t").rows()) == [(1, 10), (2, 20)]
    assert ds.maintenance.verify() == []
