"""What vacuum never deletes, and what verify says of data files found away from their
folder: pure tests (no Spark) on datasets staged through the log layer.

A renamed revision folder is the only copy of the data ``verify`` reports missing: it is
no orphan but a ``misplaced_folder`` (an error) whose fix is the exact ``mv``, and vacuum
keeps it; while verify reports an error, vacuum deletes no orphan at all. Vacuum never
deletes a file a live entry references, records in an entry whatever it deletes, deletes
the ``.crc`` sidecar of every data file it deletes on its own, and keeps for a damaged
file only the entries that file stands for.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from core.helpers import STAGED_SCHEMA, tree
from harness.dates import day

from revisions_assets import DatasetReader
from revisions_assets.cli import cli
from revisions_assets.core.errors import MissingFileError, RetentionError
from revisions_assets.core.log.file_stats import read_file_stats
from revisions_assets.core.log.records import CompactedRange, Revision, TableWrite
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.maintain.vacuum import Vacuum, VacuumReport
from revisions_assets.core.maintain.verify import verify
from revisions_assets.core.storage.base import LocalStorage

#: a table file's rows: its ids (v = the day of its revision), or the path of a file to share
Files = Sequence[Sequence[int] | str]


def write_file(root: Path, path: str, ids: Sequence[int], v: int, source: int | None) -> None:
    columns = {
        "id": pa.array(ids, pa.int64()),
        "v": pa.array([v] * len(ids), pa.int64()),
        "_deleted": pa.array([False] * len(ids)),
    }
    if source is not None:  # a compaction's rows name the revision that wrote them
        columns["_revision_sequence"] = pa.array([source] * len(ids), pa.int64())
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), root / path)
    (root / path).with_name(f".{Path(path).name}.crc").write_bytes(b"crc")  # as Hadoop does


def stage(
    root: Path,
    name: str,
    when: int,
    major: bool,
    tables: Mapping[str, Files],
    *,
    stats: bool = False,
    **fields,
) -> Revision:
    """Commit ``name`` through the log layer: per table, its files (each a list of ids, or
    the path of another entry's file it shares); ``stats``: record the files' stats, as a
    commit does (else the entry is one of the previous release); ``fields`` of the entry
    (a compaction's)."""
    log = RevisionLog(LocalStorage(root))
    log.refresh()
    compaction = fields.get("kind") == "compaction"
    writes = {}
    for table, files in tables.items():
        paths = []
        for n, ids in enumerate(files):
            if isinstance(ids, str):
                paths.append(ids)
                continue
            paths.append(f"{name}/{table}/part-{n:05d}.parquet")
            write_file(root, paths[-1], ids, when, log.head if compaction else None)
        rows = sum(pq.read_metadata(root / p).num_rows for p in paths)
        size = sum((root / p).stat().st_size for p in paths)
        found = read_file_stats(log.storage, paths, ("id",), STAGED_SCHEMA) if stats else None
        writes[table] = TableWrite(
            ("id",), STAGED_SCHEMA, "v1", rows, 0, tuple(paths), size, file_stats=found
        )
    record = Revision(
        name=name,
        timestamp=day(when),
        is_major=major,
        sequence=log.head + 1,
        committed_at=datetime.now(UTC),
        tables=writes,
        version="v1",
        **fields,
    )
    assert log.try_append(record)
    log.after_commit()  # description.parquet current, as a commit leaves it
    return record


def compaction(root: Path, name: str, when: int, table: str, ids: Sequence[int], covers) -> None:
    stage(
        root,
        name,
        when,
        False,
        {table: [ids]},
        kind="compaction",
        data_change=False,
        replaces={table: covers},
    )


def vacuum(root: Path, dry_run: bool = False, keep_majors: bool = True) -> VacuumReport:
    """A vacuum of everything before now: retention 0, no grace (files are aged instead)."""
    storage = LocalStorage(root)
    return Vacuum(storage, RevisionLog(storage)).run(
        retain=timedelta(0),
        keep_majors=keep_majors,
        dry_run=dry_run,
        consumer_positions={},
        grace=timedelta(minutes=1),
        now=datetime.now(UTC) + timedelta(hours=1),
    )


def age(root: Path) -> None:
    """Every file and folder an hour older: past vacuum's grace period."""
    old = time.time() - 7200
    for path in [root, *root.rglob("*")]:
        os.utime(path, (old, old))


def kinds(root: Path) -> dict[tuple[str, str], object]:
    return {(f.kind, f.path): f for f in verify(str(root))}


def reads(root: Path) -> dict[str, object]:
    reader = DatasetReader(str(root))
    out = {}
    for table in reader.tables():
        for r in [r for r in reader.revisions() if r.is_data and table in r.tables]:
            try:
                frame = reader.read(table, at=r.sequence)
                out[f"{table}@{r.sequence}"] = sorted(frame.select("id", "v").rows())
            except (MissingFileError, RetentionError) as exc:
                out[f"{table}@{r.sequence}"] = type(exc).__name__
    return out


def shell(fix: str) -> None:
    """Run the command a finding's fix gives between backquotes, as an operator would."""
    command = fix.split("`")[1]
    subprocess.run(command, shell=True, check=True)


@pytest.fixture
def root(tmp_path) -> Path:
    """r1 (major, t: 2 files, u: 1), r2 (minor of t: 2 files), r3 (major of u)."""
    root = tmp_path / "ds"
    stage(root, "r1", 0, True, {"t": [[1, 2], [3]], "u": [[1]]})
    stage(root, "r2", 1, False, {"t": [[2], [4, 5, 6]]})
    stage(root, "r3", 2, True, {"u": [[7]]})
    return root


# -- a renamed revision folder -------------------------------------------------------------------


def test_a_renamed_revision_folder_is_misplaced_and_kept(root):
    before = reads(root)
    os.rename(root / "r2", root / "r2.moved")
    age(root)
    found = kinds(root)
    assert set(found) == {
        ("misplaced_folder", "r2.moved"),
        ("missing_file", "r2/t/part-00000.parquet"),
        ("missing_file", "r2/t/part-00001.parquet"),
    }, "a folder that holds what a live entry misses is no orphan to delete"
    misplaced = found["misplaced_folder", "r2.moved"]
    assert misplaced.severity == "error"
    assert "holds the 2 data files that revision 'r2' (sequence 2) misses" in misplaced.message
    assert f"`mv {root}/r2.moved {root}/r2`" in misplaced.fix

    report = vacuum(root, keep_majors=False)  # r1 is voided for u by r3: it could go
    assert (root / "r2.moved" / "t" / "part-00001.parquet").exists()
    assert report.orphans == () and report.orphans_kept == ()  # not an orphan at all
    assert ("misplaced_folder", "r2.moved") in {(f.kind, f.path) for f in report.findings}

    shell(misplaced.fix)
    assert kinds(root) == {} and reads(root) == before


def test_folders_with_some_of_the_files_are_misplaced(root):
    """r2's two files moved into two folders: each holds one of them, each fix moves one."""
    before = reads(root)
    for n in (0, 1):
        (root / f"r2.{n}" / "t").mkdir(parents=True)
        os.rename(root / f"r2/t/part-0000{n}.parquet", root / f"r2.{n}/t/part-0000{n}.parquet")
    found = [f for f in verify(str(root)) if f.kind == "misplaced_folder"]
    assert [f.path for f in found] == ["r2.0", "r2.1"]
    shown = CliRunner().invoke(cli, ["verify", str(root)]).stdout  # each its own fix
    assert all(f"fix misplaced_folder (r2.{n}): put them back with `mv" in shown for n in (0, 1))
    for n, misplaced in enumerate(found):
        assert "holds 1 of the 2 data files that revision 'r2'" in misplaced.message
        moved = f"{root}/r2.{n}/t/part-0000{n}.parquet {root}/r2/t/part-0000{n}.parquet"
        assert f"`mv {moved}`" in misplaced.fix
        shell(misplaced.fix)
    assert {k for k, f in kinds(root).items()} == {
        ("orphan_folder", "r2.0"),
        ("orphan_folder", "r2.1"),
    }
    assert reads(root) == before


def test_a_table_folder_moved_into_another_folder(root):
    """``mv r2/t backup/``: the fix moves the table folder back into r2's."""
    before = reads(root)
    (root / "backup").mkdir()
    shutil.move(root / "r2" / "t", root / "backup" / "t")
    age(root)
    (misplaced,) = [f for f in verify(str(root)) if f.kind == "misplaced_folder"]
    assert misplaced.path == "backup"
    assert f"`mv {root}/backup/t {root}/r2/t`" in misplaced.fix
    vacuum(root, keep_majors=False)
    assert (root / "backup" / "t" / "part-00000.parquet").exists()
    shell(misplaced.fix)
    assert reads(root) == before


def test_a_table_folder_moved_into_a_folder_vacuum_removes(tmp_path):
    """r2's table t moved into r1's folder, which a vacuum removes (r1 is voided): r1's own
    files go, r2's stay, and moving them back makes every read whole again."""
    root = tmp_path / "ds"
    stage(root, "r1", 0, True, {"u": [[1]]})
    stage(root, "r2", 1, True, {"t": [[1, 2], [3]]})
    stage(root, "r3", 2, True, {"u": [[7]]})
    before = reads(root)
    shutil.move(root / "r2" / "t", root / "r1" / "t")
    age(root)
    (misplaced,) = [f for f in verify(str(root)) if f.kind == "misplaced_folder"]
    assert misplaced.path == "r1" and f"`mv {root}/r1/t {root}/r2/t`" in misplaced.fix
    report = vacuum(root, keep_majors=False)
    assert report.revisions == ("r1",) and not any((root / "r1" / "u").iterdir())
    assert sorted(p.name for p in (root / "r1" / "t").iterdir() if p.suffix == ".parquet") == [
        "part-00000.parquet",
        "part-00001.parquet",
    ]
    shell(misplaced.fix)
    assert reads(root) == {**before, "u@1": "RetentionError"}  # r1 removed, r2 whole again


def test_a_same_named_file_of_other_content_is_no_match(root):
    """Names alone do not match: a copy of r1's files under r2's names (other rows) is an
    orphan."""
    shutil.copytree(root / "r1", root / "r2.other")
    shutil.rmtree(root / "r2")
    found = kinds(root)
    assert ("misplaced_folder", "r2.other") not in found
    assert ("orphan_folder", "r2.other") in found


def test_a_holder_is_matched_file_by_file_by_the_recorded_stats(tmp_path):
    """Where the entry recorded its files' stats, each file a folder holds must be the one
    the entry misses, by its size, rows and footer, not by the table's totals: r2's files
    under each other's names (the totals agree), or one rewritten with other values of the
    same size and rows, are no match; the files themselves are."""
    root = tmp_path / "ds"
    stage(root, "r1", 0, True, {"t": [[1, 2], [3]]}, stats=True)
    stage(root, "r2", 1, False, {"t": [[2], [4, 5, 6]]}, stats=True)
    before = reads(root)
    first, second = root / "r2/t/part-00000.parquet", root / "r2/t/part-00001.parquet"
    (root / "swapped/t").mkdir(parents=True)
    shutil.copy(first, root / "swapped/t/part-00001.parquet")
    shutil.copy(second, root / "swapped/t/part-00000.parquet")
    (root / "changed/t").mkdir(parents=True)
    write_file(root, "changed/t/part-00000.parquet", [2], 9, None)  # v: 9, not 1
    assert (root / "changed/t/part-00000.parquet").stat().st_size == first.stat().st_size
    shutil.move(root / "r2", root / "r2.moved")
    found = kinds(root)
    assert {k for k in found if k[0] in ("misplaced_folder", "orphan_folder")} == {
        ("misplaced_folder", "r2.moved"),
        ("orphan_folder", "swapped"),
        ("orphan_folder", "changed"),
    }
    misplaced = found["misplaced_folder", "r2.moved"]
    assert "holds the 2 data files that revision 'r2' (sequence 2) misses" in misplaced.message
    assert "sizes and footers as the log records" in misplaced.message
    shell(misplaced.fix)
    assert reads(root) == before


# -- orphans while verify reports an error -------------------------------------------------------


def test_no_orphan_goes_while_verify_reports_an_error(root):
    (root / "killed" / "t").mkdir(parents=True)
    (root / "killed" / "t" / "part-00000.parquet").write_bytes(b"x" * 10)
    lost = (root / "r2/t/part-00000.parquet").read_bytes()
    (root / "r2/t/part-00000.parquet").unlink()
    age(root)
    report = vacuum(root)
    assert report.orphans == () and report.orphans_kept == ("killed",)
    assert (root / "killed").is_dir() and report.entry is None
    assert {f.kind for f in report.findings} == {"missing_file"}
    (root / "r2/t/part-00000.parquet").write_bytes(lost)
    report = vacuum(root)
    assert report.orphans == ("killed",) and not (root / "killed").exists()


def test_a_vacuum_that_removes_only_orphans_records_them(root):
    (root / "killed" / "t").mkdir(parents=True)
    (root / "killed" / "t" / "part-00000.parquet").write_bytes(b"x" * 10)
    (root / "_log" / ".00000000000000000009.json.abc.tmp").write_bytes(b"{}")
    age(root)
    report = vacuum(root)
    assert report.revisions == () and report.orphans == ("killed",)
    assert report.entry is not None and report.entry.vacuum.removed == ()
    deleted = report.entry.vacuum.deleted
    assert deleted.folders == ("killed",)
    assert deleted.loose == ("_log/.00000000000000000009.json.abc.tmp",)
    assert (deleted.files, deleted.bytes) == (2, 12)
    assert vacuum(root).entry is None  # nothing left to delete: nothing to record


# -- files live entries reference ----------------------------------------------------------------


def test_a_file_a_live_entry_shares_is_never_deleted(tmp_path):
    """r2 (the newest major) references a file of r1's folder: r1 goes, the file stays."""
    root = tmp_path / "ds"
    stage(root, "r1", 0, True, {"t": [[1, 2], [3]]})
    stage(root, "r2", 1, True, {"t": ["r1/t/part-00001.parquet", [4]]})
    before = reads(root)
    report = vacuum(root, keep_majors=False)
    assert report.revisions == ("r1",)
    assert report.paths == ("r1/t/.part-00000.parquet.crc", "r1/t/part-00000.parquet")
    assert (root / "r1/t/part-00001.parquet").exists()
    assert (root / "r1/t/.part-00001.parquet.crc").exists()
    assert reads(root)["t@2"] == before["t@2"] and kinds(root) == {}
    # the path stays referenced by a removed entry and a live one: later vacuums keep it too
    stage(root, "r3", 2, False, {"t": [[5]]})
    assert "r1/t/part-00001.parquet" not in vacuum(root, keep_majors=False).paths
    assert reads(root)["t@2"] == before["t@2"]


def test_vacuum_deletes_the_sidecar_of_a_file_it_deletes_on_its_own(tmp_path):
    """r1's folder stays (r2 writes table u into it): r1's file of t goes with its .crc."""
    root = tmp_path / "ds"
    stage(root, "r1", 0, True, {"t": [[1]]})
    log = RevisionLog(LocalStorage(root))
    write_file(root, "r1/u/part-00000.parquet", [9], 1, None)
    size = (root / "r1/u/part-00000.parquet").stat().st_size
    record = Revision(
        name="r2",
        timestamp=day(1),
        is_major=True,
        sequence=2,
        committed_at=datetime.now(UTC),
        tables={
            "t": TableWrite(("id",), STAGED_SCHEMA, "v1", 1, 0, ("r1/u/part-00000.parquet",), size)
        },
        version="v1",
    )
    log.refresh()
    assert log.try_append(record)
    log.after_commit()
    report = vacuum(root, keep_majors=False)
    assert report.revisions == ("r1",) and report.folders == ()
    assert sorted(tree(str(root), "r1")) == [
        "r1/u/.part-00000.parquet.crc",
        "r1/u/part-00000.parquet",
    ]
    assert report.entry.vacuum.deleted.loose == report.paths


# -- what a damaged file stands for --------------------------------------------------------------


def test_a_damaged_minor_on_a_healthy_compaction_keeps_nothing(tmp_path):
    """A minor read on top of a healthy compaction is damaged: vacuum still removes what
    the compaction holds (the damage is reported all the same); a damaged compaction keeps
    only what it holds, not the revisions its major voided."""
    root = tmp_path / "ds"
    stage(root, "old", 0, True, {"t": [[1]]})
    stage(root, "m", 1, True, {"t": [[1, 2]]})
    stage(root, "a", 2, False, {"t": [[3]]})
    stage(root, "b", 3, False, {"t": [[4]]})
    compaction(root, "c", 3, "t", [1, 2, 3, 4], CompactedRange(2, 4, 3, day(3)))
    stage(root, "d", 4, False, {"t": [[5]]})
    (root / "d/t/part-00000.parquet").write_bytes(b"truncated")
    report = vacuum(root, dry_run=True, keep_majors=False)
    assert report.kept == ()
    assert set(report.revisions) == {"old", "a", "b"}  # m: the newest major stays
    assert [(f.kind, f.path) for f in report.findings] == [
        ("corrupt_file", "d/t/part-00000.parquet")
    ]
    (root / "c/t/part-00000.parquet").write_bytes(b"truncated")
    report = vacuum(root, dry_run=True, keep_majors=False)
    assert report.kept == ("a", "b") and report.revisions == ("old",)
