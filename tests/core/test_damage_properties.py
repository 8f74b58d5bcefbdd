"""Property test: no maintenance command turns repairable damage into loss.

A random history is built as in test_properties.py (majors, minors, carrying majors,
compactions, vacuums and purges over two tables, through its ``commit_one`` and
``maintain``). Then one file is damaged as storage and people damage them: a data file a
live entry references, or a log entry, is truncated, deleted or overwritten with garbage,
or the newest log entry is lost; or the folder of a live data file is moved (its revision
or compaction folder renamed, or its table folder moved into another folder) and aged past
vacuum's grace period; or a data file is rewritten with the same rows and schema but other
values (with or without the ``.crc`` of its old bytes). First, as drawn, two commands race
on the intact history (``RACES``). Every maintenance command runs on the damaged copy —
vacuum (retention 0, no grace), compact, purge, verify --deep — each refusing (a
``RevisionsError``) or doing what it does. Then the damaged file is restored from its copy
(a moved folder moved back): every read (latest, at every position, as of every time,
changes since every position, the SCD2 history, all through ``DatasetReader``) must equal
the read before the damage, less the entities a purge removed, or be refused with
RetentionError where a vacuum's horizon no longer covers it; and ``verify`` finds no error.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from harness.dates import instant
from harness.examples import examples
from harness.race_points import POINTS, landing_at
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import (
    CommitConflictError,
    NoMajorRevisionError,
    RetentionError,
    RevisionsError,
    UnknownTableError,
)
from revisions_assets.core.log.layout import entry_path
from revisions_assets.core.maintain.verify import verify

from .model import Model
from .test_damaged_values import change_values
from .test_properties import (
    MAINTENANCE,
    TABLES,
    Engine,
    commit_one,
    engine_frame,
    ids,
    maintain,
    revision_specs,
)

#: damage that moves a live data file's folder, as people do (restored by moving it back)
MOVES = ("rename a folder", "move a table folder")
#: a data file rewritten with the same rows and schema, other values: with the ``.crc``
#: sidecar of its old bytes kept (the local filesystem), or without one (as on S3)
VALUES = ("change values", "change values, keep the .crc")
DAMAGE = st.sampled_from(
    ["truncate", "delete", "garbage", "lose the newest entry", *MOVES, *VALUES]
)

Outcome = tuple  # ("rows", frozenset of row tuples) or ("refused", error class name)


#: the columns a state or history read is compared on (the row and who wrote it)
ROW = ("id", "v", "_revision")


def outcome(read, columns, **where) -> Outcome:
    """The rows of one read (a ChangeSet's ``df``), or the error that refused it."""
    try:
        frame = read(**where)
        return ("rows", frozenset(getattr(frame, "df", frame).select(*columns).rows()))
    except RevisionsError as exc:
        return ("refused", type(exc).__name__)


def every_read(root: str) -> dict[tuple, Outcome]:
    """Each read of each table through ``DatasetReader``, keyed by what it asks."""
    reader = DatasetReader(root)
    data = [r for r in reader.revisions() if r.is_data]
    reads: dict[tuple, Outcome] = {}
    for table in TABLES:
        if not any(table in r.tables for r in data):
            continue
        state = {"table": table, "with_revision": True}
        reads["latest", table, None] = outcome(reader.read, ROW, **state)
        for r in data:
            reads["at", table, r.sequence] = outcome(reader.read, ROW, at=r.sequence, **state)
            reads["as_of", table, r.timestamp] = outcome(
                reader.read, ROW, as_of=r.timestamp, **state
            )
            reads["changes", table, r.sequence] = outcome(
                reader.changes, ("id", "v", "_deleted"), table=table, since_sequence=r.sequence
            )
        reads["history", table, None] = outcome(
            reader.history, ("id", "v", "valid_from", "_revision"), table=table
        )
    return reads


def damage_targets(root: Path, ds: RevisionedDataset) -> list[str]:
    """The files whose damage a maintenance command could make worse: the data files live
    entries reference, and the log entries."""
    view = ds.snapshot().view
    live = sorted(view.live_files())
    return live + [entry_path(s) for s in range(1, view.head + 1)]


def move_away(root: Path, path: str, how: str, into: str, now: datetime) -> Callable[[], object]:
    """Move the folder of data file ``path``: its revision or compaction folder renamed
    (``mv X X.moved``), or its table folder moved into folder ``into`` (``mv X/t Y/``),
    then aged past vacuum's grace period at ``now``. Returns what moves it back."""
    folder, table = path.split("/")[:2]
    if how == "rename a folder":
        source, moved = root / folder, root / f"{folder}.moved"
    else:
        source, moved = root / folder / table, root / into / table
        moved = moved / table if moved.exists() else moved  # as mv puts it
        moved.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(source, moved)
    old = (now - timedelta(days=1)).timestamp()
    for aged in [moved, *moved.rglob("*")]:
        os.utime(aged, (old, old))

    def back() -> object:
        source.parent.mkdir(parents=True, exist_ok=True)  # a vacuum may have removed the rest
        return shutil.move(moved, source)

    return back


def maintain_damaged(
    spark, root: str, now: datetime, purged: set[int], table: str
) -> tuple[tuple[int, datetime | None], object]:
    """Every maintenance command on the damaged copy, each on a fresh handle: vacuum (no
    grace, its horizon the newest commit at or before ``now``), compact, purge, verify
    --deep. Returns the horizon of the vacuum entry committed ((0, None) if none) and the
    purge entry (None if none was committed)."""
    horizon, purge_entry = (0, None), None
    for command in ("vacuum", "compact", "purge", "verify"):
        try:
            ds = RevisionedDataset(root, spark=spark, compact_after=None)
            if command == "vacuum":
                report = ds.maintenance.vacuum(retain=timedelta(0), grace=timedelta(0), now=now)
                if report.entry is not None:
                    horizon = (report.horizon.sequence, report.horizon.timestamp)
                event(f"damaged: vacuum kept {min(len(report.kept), 2)}+ entries")
            elif command == "compact":
                ds.maintenance.compact()
            elif command == "purge":
                ids_df = engine_frame(spark, dict.fromkeys(purged, 0)).select("id")
                purge_entry = ds.maintenance.purge(table, ids_df, reason="damage test")
            else:
                kinds = {f.kind for f in ds.maintenance.verify(deep=True)}
                assert not kinds & {"null_id", "duplicate_id", "purge_lost_rows"}
            event(f"damaged: {command} ran")
        except RevisionsError as exc:
            event(f"damaged: {command} refused ({type(exc).__name__})")
    return horizon, purge_entry


# -- racing maintenance (issue 52) ----------------------------------------------------------
#: a command on the intact history, one landing in the middle of it (after the first planned
#: on its snapshot: before it writes, or before it appends its entry), and where
RACERS = ("compact", "purge", "vacuum", "commit")
RACES = st.one_of(
    st.none(), st.tuples(st.sampled_from(RACERS), st.sampled_from(RACERS), st.sampled_from(POINTS))
)


def race(spark, root: str, drawn: tuple, table: str, purged: set[int]) -> set[int]:
    """The first command of ``drawn`` with the second landing in its middle, each on a handle
    of its own; the first commits, has nothing to do or gives up (CommitConflictError), and
    fails no other way. Returns the ids a purge of the race erased from ``table``."""
    erased: set[int] = set()

    def run(command: str) -> object:
        ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
        if command == "compact":
            return ds.maintenance.compact()
        if command == "vacuum":
            return ds.maintenance.vacuum(retain=timedelta(0)).entry
        try:  # a table without revisions, or without a major
            if command == "purge":
                ids_df = engine_frame(spark, dict.fromkeys(purged, 0)).select("id")
                entry = ds.maintenance.purge(table, ids_df, reason="race")
                erased.update(purged if entry is not None else ())
                return entry
            # a minor of an id no purge draws, after every revision
            return ds.commit({table: engine_frame(spark, {99: 0})}, instant(100), is_major=False)
        except (UnknownTableError, NoMajorRevisionError):
            return None

    first, second, point = drawn
    with landing_at(point, lambda: run(second)) as landed:
        try:
            run(first)
            outcome = "committed"
        except CommitConflictError:
            outcome = "gave up"
    event(f"race: {second} {'landed in' if landed else 'never landed in'} {first}: {outcome}")
    return erased


# -- end of racing maintenance --------------------------------------------------------------


def without(result: Outcome, purged: set[int]) -> Outcome:
    kind, value = result
    return (kind, frozenset(r for r in value if r[0] not in purged)) if kind == "rows" else result


def covered(key: tuple, horizon: tuple[int, object]) -> bool:
    """Whether a read is one a vacuum at ``horizon`` keeps working."""
    sequence, stamp = horizon
    kind, _table, where = key
    if kind in ("at", "changes"):
        return where >= sequence
    if kind == "as_of":
        return stamp is None or where >= stamp
    return kind == "latest" or sequence == 0


@settings(
    max_examples=examples(4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    first=revision_specs(kind=st.sampled_from(["major"]), allow_empty=False),
    rest=st.lists(revision_specs(), min_size=1, max_size=3),
    damage=DAMAGE,
    target=st.integers(min_value=0, max_value=1000),
    purged=st.sets(ids, min_size=1, max_size=2),
    racing=RACES,
    data=st.data(),
)
def test_no_maintenance_turns_damage_into_loss(
    spark, first, rest, damage, target, purged, racing, data
):
    with tempfile.TemporaryDirectory() as tmp:
        root = f"{tmp}/ds"
        ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
        engine, model = Engine(ds), Model()
        for n, (kind, step, tables) in enumerate([first, *rest]):
            commit_one(spark, engine, model, f"rev{n}", instant(step + n), kind, tables)
            maintain(spark, engine, model, data, data.draw(MAINTENANCE, label="maintenance"))
        if not ds.revisions():
            return
        # racing maintenance (issue 52): no read returns what a purge of the race erased
        race_table = data.draw(st.sampled_from(TABLES), label="race table")
        erased = race(spark, root, racing, race_table, purged) if racing else set()
        before = every_read(root)
        for (_kind, table, _where), (outcome, rows) in before.items():
            assert table != race_table or outcome != "rows" or not {r[0] for r in rows} & erased
        records = ds.revisions()
        head = len(records)
        # the damaged copy's vacuum: its horizon mostly near the head, as maintain() draws it
        at = data.draw(st.integers(min_value=max(head - 2, 1), max_value=head), label="horizon")
        now = records[at - 1].committed_at
        targets = damage_targets(Path(root), ds)
        if damage in MOVES or damage in VALUES:  # a live data file (or its folder)
            targets = [t for t in targets if not t.startswith("_log/")]
        path = (
            entry_path(head)
            if damage == "lose the newest entry"
            else targets[target % len(targets)]
        )
        stored = Path(root, path)
        intact = stored.read_bytes()
        if damage in MOVES:
            folders = sorted({t.split("/", 1)[0] for t in targets} - {path.split("/", 1)[0]})
            into = data.draw(st.sampled_from([*folders, "backup"]), label="moved into")
            move_back = move_away(Path(root), path, damage, into, now)
        elif damage == "truncate":
            stored.write_bytes(intact[: len(intact) // 2])
        elif damage == "garbage":
            stored.write_bytes(bytes((b * 7 + 13) % 256 for b in intact))
        elif damage in VALUES:
            change_values(stored, keep_crc=damage == VALUES[1])
        else:
            stored.unlink()
        event(f"damage: {damage} {'a log entry' if path.startswith('_log') else 'a data file'}")

        table = data.draw(st.sampled_from(TABLES), label="purge table")
        horizon, purge_entry = maintain_damaged(spark, root, now, purged, table)
        if damage in MOVES:
            move_back()
        else:  # restored from its copy (into its folder again, if a vacuum removed its
            # entry; its .crc, if the damage kept it, matches the restored bytes)
            stored.parent.mkdir(parents=True, exist_ok=True)
            stored.write_bytes(intact)

        after = every_read(root)
        gone = purged if purge_entry is not None else set()
        for key, was in before.items():
            now = after.get(key)
            want = without(was, gone) if key[1] == table else was
            if now == ("refused", RetentionError.__name__) and not covered(key, horizon):
                continue
            assert now == want, f"{key}: {damage} of {path}, then maintenance: {now} != {want}"
        errors = [f for f in verify(root) if f.severity == "error"]
        assert not errors, f"{damage} of {path} left {errors}"
        assert DatasetReader(root).head_sequence >= head


@pytest.mark.parametrize(
    "how, folder", [("rename a folder", "rev2"), ("move a table folder", "compaction")]
)
def test_a_moved_folder_survives_every_maintenance_command(spark, tmp_path, how, folder):
    """What exploring the moves found (before vacuum kept a folder that holds files a live
    entry misses, it deleted it as an orphan once aged: the data was gone): a minor's folder
    renamed, a compaction's table folder moved into a new folder. After every maintenance
    command and the move back, every read is what it was and verify finds no error."""
    root = str(tmp_path / "ds")
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)

    def commit(name: str, step: int, major: bool, rows: dict[int, int]) -> None:
        frame = engine_frame(spark, rows)
        ds.commit({"a": frame}, timestamp=instant(step), is_major=major, version="v", name=name)

    commit("rev0", 0, True, {0: 0, 1: 1})
    commit("rev1", 1, False, {1: 10, 2: 2})
    ds.maintenance.compact()
    commit("rev2", 2, False, {3: 3})
    before = every_read(root)
    now = ds.revisions()[-1].committed_at
    path = min(f for f in ds.snapshot().view.live_files() if f.startswith(folder))
    move_back = move_away(Path(root), path, how, "backup", now)

    horizon, purged = (0, None), set()
    for command in (
        lambda h: h.maintenance.vacuum(retain=timedelta(0), grace=timedelta(0), now=now),
        lambda h: h.maintenance.compact(),
        lambda h: h.maintenance.purge("a", engine_frame(spark, {0: 0}).select("id"), reason="r"),
        lambda h: h.maintenance.verify(deep=True),
    ):
        try:
            done = command(RevisionedDataset(root, spark=spark, compact_after=None))
        except RevisionsError:
            continue
        if getattr(done, "entry", None) is not None:  # a vacuum that committed
            horizon = (done.horizon.sequence, done.horizon.timestamp)
        if getattr(done, "kind", None) == "purge":
            purged = {0}
    move_back()
    after = every_read(root)
    for key, was in before.items():
        now_read = after.get(key)
        if now_read == ("refused", RetentionError.__name__) and not covered(key, horizon):
            continue
        assert now_read == without(was, purged), f"{key}: {how} {path}: {now_read} != {was}"
    assert not [f for f in verify(root) if f.severity == "error"]
