"""What maintenance never does, through the console script as a user types it: delete a
renamed revision folder (the only copy of data verify reports missing) or any orphan while
verify reports an error, write anything for a refused ``compact``, or take a root that is a
regular file for one that does not exist. None of these commands starts a JVM."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner
from core.helpers import tree
from harness.processes import with_tests_on_path

from revisions_assets.cli import cli

from .conftest import Staged

BIN = Path(sys.executable).parent


def revisions(*args: str, code: int) -> subprocess.CompletedProcess:
    env = {**with_tests_on_path(None), "SPARK_MASTER": "local[1]", "COLUMNS": "200"}
    done = subprocess.run(
        [str(BIN / "revisions"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    return done


def files(root: Path) -> dict[str, bytes]:
    return {rel: (root / rel).read_bytes() for rel in tree(str(root))}


def test_a_renamed_revision_folder_is_put_back_not_vacuumed(staged: Staged, tmp_path):
    """``mv r2 r2.moved``, aged past the grace period: verify says where r2's data is and
    gives the ``mv`` that puts it back; a plain vacuum deletes neither it nor the orphan of a
    failed writer while verify reports the error (exit 1), and commits nothing."""
    root = tmp_path / "features"
    shutil.copytree(staged.features, root)
    (root / "r2").rename(root / "r2.moved")
    (root / "killed" / "t").mkdir(parents=True)
    (root / "killed" / "_claimed").write_text("token")
    old = time.time() - 7200
    for path in [root, *root.rglob("*")]:
        os.utime(path, (old, old))

    found = json.loads(revisions("verify", str(root), "--json", code=1).stdout)["findings"]
    by_kind = {(f["kind"], f["path"]): f for f in found}
    assert set(by_kind) == {
        ("misplaced_folder", "r2.moved"),
        ("missing_file", "r2/t/part-00000.parquet"),
        ("orphan_folder", "killed"),
        ("description_stale", "description.parquet"),  # staged stale on purpose
    }
    misplaced = by_kind["misplaced_folder", "r2.moved"]
    assert misplaced["severity"] == "error" and "delete" not in misplaced["fix"].split("(")[0]
    assert f"`mv {root}/r2.moved {root}/r2`" in misplaced["fix"]

    before = files(root)
    kept = " ".join(revisions("vacuum", str(root), code=1).stdout.split())  # unwrapped
    assert "kept 1 orphan folders (killed): vacuum deletes none while verify reports errors" in kept
    assert "(misplaced_folder, missing_file)" in kept
    assert f"fix misplaced_folder: put them back with `mv {root}/r2.moved {root}/r2`" in kept
    assert files(root) == before  # nothing deleted, no entry committed

    subprocess.run(misplaced["fix"].split("`")[1], shell=True, check=True)
    assert json.loads(revisions("verify", str(root), "--json", code=0).stdout)["findings"] == [
        by_kind["description_stale", "description.parquet"],
        by_kind["orphan_folder", "killed"],
    ]
    done = json.loads(revisions("vacuum", str(root), "--json", code=0).stdout)
    assert done["orphans"] == ["killed"] and done["entry_sequence"] == 7
    assert not (root / "killed").exists() and (root / "r2" / "t" / "part-00000.parquet").exists()
    shown = json.loads(revisions("show", str(root), "t", "--at", "2", "--json", code=0).stdout)
    assert shown == [{"id": i, "v": 0} for i in (0, 1)] + [{"id": i, "v": 2} for i in range(2, 7)]


#: every command, with the arguments it needs besides a root
COMMANDS = (
    ("log",),
    ("tables",),
    ("describe",),
    ("lag",),
    ("show", "{root}", "t"),
    ("diff", "{root}", "t", "--since", "1"),
    ("history", "{root}", "t", "--id", "id=1"),
    ("verify",),
    ("compact",),
    ("vacuum",),
    ("purge", "{root}", "t", "--id", "id=1", "--reason", "erasure"),
    ("import-legacy", "{legacy}", "{root}"),
)


def test_a_root_that_is_a_regular_file_is_a_storage_error_for_every_command(
    staged: Staged, tmp_path
):
    """Not "does not exist" (exit 2): a regular file, or a root below one, is a
    StorageError that says so, exit 3, whatever the command (in this process: one
    interpreter for them all; two through the console script)."""
    regular = tmp_path / "features.parquet"
    regular.write_bytes(b"PAR1")
    roots = {str(regular): "is a regular file", str(regular / "t"): f"lies below {regular}"}
    for command in COMMANDS:
        for root, says in roots.items():
            args = command if len(command) > 1 else (*command, "{root}")
            args = tuple(a.format(root=root, legacy=staged.legacy) for a in args)
            result = CliRunner().invoke(cli, list(args))
            assert result.exit_code == 3, (args, result.stdout, result.stderr)
            assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
            assert f"revisions: error: root {root} {says}" in result.stderr, args
            assert "not a directory" in result.stderr
    for args in (("log", str(regular)), ("vacuum", str(regular / "t"))):
        done = revisions(*args, code=3)
        assert done.stdout == "" and "not a directory" in done.stderr


def test_compact_of_an_unknown_table_writes_nothing(staged: Staged, tmp_path):
    """Refused before anything is written: the staged stale description.parquet stays."""
    root = tmp_path / "features"
    shutil.copytree(staged.features, root)
    before = files(root)
    refused = revisions("compact", str(root), "--table", "nope", code=2)
    assert "nope" in refused.stderr and refused.stderr.count("\n") == 1
    assert files(root) == before
