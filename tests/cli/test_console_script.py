"""Every command through the installed console script, in a subprocess, as a user types it.

The log commands and the reads (``show``, ``diff``, ``history``) start no JVM, so they run in
the fast tier. ``--spark`` and the writing commands each start a JVM of their own: that
test is marked slow.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness.processes import with_tests_on_path

from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage

from .conftest import Staged

BIN = Path(sys.executable).parent
SPARK_BANNER = "log4j"  # what a starting JVM prints first


def script() -> str:
    path = BIN / "revisions"
    if not path.exists():
        pytest.fail(f"{path} is missing: the set-up installs it (./dev.sh setup)")
    return str(path)


def revisions(*args: str, code: int = 0, module: bool = False) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "revisions_assets"] if module else [script()]
    env = {**with_tests_on_path(None), "SPARK_MASTER": "local[1]", "COLUMNS": "160"}
    done = subprocess.run(
        [*command, *args], capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    return done


def test_log_tables_lag_run_in_the_driver(staged: Staged):
    log = json.loads(revisions("log", staged.features, "--json", "--limit", "0").stdout)
    assert [r["sequence"] for r in log] == [1, 2, 3, 4, 5, 6]
    tables = revisions("tables", staged.features)
    assert "since base" in tables.stdout and "t: id bigint, v bigint" in tables.stdout
    lag = json.loads(revisions("lag", staged.scores, "--json").stdout)
    assert [(r["table"], r["revisions_behind"]) for r in lag] == [("t", 2)]
    as_module = revisions("log", staged.features, "--table", "u", module=True)
    assert "u1" in as_module.stdout and "r0" not in as_module.stdout
    for done in (tables, as_module):
        assert SPARK_BANNER not in done.stderr, "a log command started Spark"
    bad = revisions("tables", str(Path(staged.features).parent / "nothing"), code=2)
    assert bad.stdout == "" and bad.stderr.count("\n") == 1
    assert bad.stderr.startswith("revisions: error: ") and "nothing does not exist" in bad.stderr
    usage = revisions("show", staged.features, code=2)  # missing TABLE
    assert "Missing argument 'TABLE'" in usage.stderr and usage.stderr.count("\n") == 1


def test_verify_and_vacuum_run_in_the_driver(staged: Staged, tmp_path):
    found = json.loads(revisions("verify", staged.features, "--json").stdout)
    assert [f["kind"] for f in found["findings"]] == ["description_stale"]  # a warning: 0
    assert "1 warnings" in revisions("verify", staged.features, "--strict", code=1).stdout
    dry = revisions("vacuum", staged.features, "--dry-run", "--retain", "0")
    assert "would remove" in dry.stdout and "retention horizon" in dry.stdout
    for done in (dry,):
        assert SPARK_BANNER not in done.stderr, "a driver-only command started Spark"
    bad = revisions("vacuum", staged.features, "--retain", "week", code=2)
    assert "'week' is not a duration" in bad.stderr and bad.stderr.count("\n") == 1
    # the folder that holds the datasets is no dataset: refused as log and vacuum refuse it,
    # never a list of its datasets as orphan folders to delete
    holder = str(Path(staged.features).parent)
    for command in ("verify", "log", "vacuum"):
        refused = revisions(command, holder, code=2)
        assert refused.stdout == "" and refused.stderr.count("\n") == 1
        assert "is not a revisioned dataset (no _log/)" in refused.stderr
    # a dataset inside another one's root: reported, and left alone by vacuum
    outer = shutil.copytree(staged.features, tmp_path / "outer")
    shutil.copytree(staged.scores, outer / "scores")
    found = json.loads(revisions("verify", str(outer), "--json").stdout)
    assert {(f["kind"], f["path"]) for f in found["findings"]} == {
        ("description_stale", "description.parquet"),
        ("nested_dataset", "scores"),
    }
    assert not any("delete" in f["fix"] for f in found["findings"])
    revisions("vacuum", str(outer), "--retain", "0", "--grace", "0", "--force")
    assert (outer / "scores" / "_log").is_dir()


#: run in a fresh interpreter: the log commands and the legacy planner, then the thread count
NO_POOL_SCRIPT = """
import contextlib, io, json, os, sys
from revisions_assets.cli import cli
from revisions_assets.core.maintain.legacy import plan_import
features, scores, legacy = sys.argv[1:]
threads = lambda: len(os.listdir("/proc/self/task"))
before = threads()
with contextlib.redirect_stdout(io.StringIO()):
    for args in (["log", features], ["tables", features], ["lag", scores, "--json"]):
        cli.main(args, prog_name="revisions", standalone_mode=False)
plan_import(legacy)
print(json.dumps({"before": before, "after": threads()}))
"""


def test_log_reads_start_no_arrow_thread_pool(staged: Staged, tmp_path):
    """A process that started Arrow's I/O or CPU pool can abort at exit ("terminate called
    without an active exception", apache/arrow#34314): CI saw ``revisions log`` print its
    output and die with SIGABRT. Log-sized Parquet is decoded in the calling thread."""
    features = tmp_path / "features"
    shutil.copytree(staged.features, features)
    log = RevisionLog(open_storage(str(features)))
    log.write_checkpoint(log.refresh()[-1].sequence)  # so opening reads a checkpoint too
    env = {**with_tests_on_path(None), "SPARK_MASTER": "local[1]"}
    done = subprocess.run(
        [sys.executable, "-c", NO_POOL_SCRIPT, str(features), staged.scores, staged.legacy],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout.splitlines()[-1])
    assert counts["after"] == counts["before"], f"threads were started: {counts}"


def test_reads_run_in_this_process(staged: Staged):
    """``show``, ``diff`` and ``history`` read through DatasetReader: no JVM starts."""
    for args in (
        ("show", staged.features, "t", "--json", "--where", "v = 6"),
        ("diff", staged.features, "t", "--since", "2", "--json"),
        ("history", staged.features, "t", "--id", "id=2", "--json"),
    ):
        done = revisions(*args)
        assert json.loads(done.stdout), args
        assert SPARK_BANNER not in done.stderr, f"{args[0]} started Spark"
    shown = json.loads(revisions("show", staged.features, "t", "--json", "--where", "v = 6").stdout)
    assert shown == [{"id": i, "v": 6} for i in (6, 7, 8)]


def test_show_as_of_a_logical_time_as_known_at_a_commit_time(redeployed: str):
    """Tuesday's features as the current code computed them (re-run on Wednesday), and as
    they were known on Tuesday: two clocks, two answers."""
    tuesday = ("show", redeployed, "t", "--as-of", "2024-03-05T00:00Z", "--json")
    assert json.loads(revisions(*tuesday).stdout) == [{"id": 1, "v": 10}, {"id": 2, "v": 20}]
    known = json.loads(revisions(*tuesday, "--known-at", "2024-03-05T00:00Z").stdout)
    assert known == [{"id": 1, "v": 1}, {"id": 2, "v": 2}]
    text = revisions("show", redeployed, "t", "--known-at", "2024-03-04T12:00+01:00").stdout
    assert "(latest, as known at 2024-03-04 11:00Z): merges major sun" in text
    pinned = ("show", redeployed, "t", "--at", "HEAD", "--known-at", "2024-03-03T07:00Z")
    assert json.loads(revisions(*pinned, "--json").stdout) == [{"id": i, "v": 1} for i in (1, 2)]
    naive = revisions("show", redeployed, "t", "--known-at", "2024-03-05", code=2)
    assert "has no timezone" in naive.stderr and naive.stderr.count("\n") == 1
    assert "holds revisions committed 2024-03-03T06:00:00Z .. 2024-03-06T10:00:00Z" in naive.stderr
    before = revisions("show", redeployed, "t", "--known-at", "2024-03-01T00:00Z", code=2)
    assert before.stderr.startswith("revisions: error: ") and before.stderr.count("\n") == 1


@pytest.mark.slow
def test_data_commands_start_a_quiet_spark(staged: Staged, tmp_path):
    """One read and one write through the script, each with a JVM of its own (the other
    data commands run in-process in test_commands.py and test_maintenance_commands.py):
    stderr holds the command's own lines only, none of the JVM's start lines."""
    shown = revisions("show", staged.features, "t", "--json", "--where", "v = 6", "--spark")
    assert json.loads(shown.stdout) == [{"id": i, "v": 6} for i in (6, 7, 8)]
    assert shown.stderr == "", f"the JVM's log is not quiet: {shown.stderr}"
    root = tmp_path / "features"
    shutil.copytree(staged.features, root)
    purged = revisions("purge", str(root), "t", "--id", "id=6", "--reason", "erasure request")
    assert "rows removed" in purged.stdout
    own = [line.startswith("revisions: ") for line in purged.stderr.splitlines()]
    assert own and all(own), f"the JVM's log is not quiet: {purged.stderr}"
    log = json.loads(revisions("log", str(root), "--json").stdout)
    assert [r["kind"] for r in log][-1] == "purge"
