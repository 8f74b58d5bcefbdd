"""Every command through the installed console script, in a subprocess, as a user types it.

The log commands start no JVM (they read logs only), so they run in the fast tier. The data
commands each start a JVM of their own: that test is marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from core.legacy_layout import worked_example

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
    env = {**os.environ, "SPARK_MASTER": "local[1]", "COLUMNS": "160"}
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
    assert bad.stderr.startswith("revisions: error: ") and "not a revisioned dataset" in bad.stderr
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


@pytest.mark.slow
def test_compact_and_purge(staged: Staged, tmp_path):
    root = tmp_path / "features"
    shutil.copytree(staged.features, root)
    compacted = json.loads(revisions("compact", str(root), "--table", "t", "--json").stdout)
    assert [(r["table"], r["revisions"]) for r in compacted] == [("t", 3)]
    purged = revisions("purge", str(root), "t", "--id", "id=6", "--reason", "erasure request")
    assert "rows removed" in purged.stdout and SPARK_BANNER not in purged.stderr
    log = json.loads(revisions("log", str(root), "--json").stdout)
    assert [r["kind"] for r in log][-2:] == ["compaction", "purge"]


@pytest.mark.slow
def test_data_commands(staged: Staged, tmp_path):
    shown = json.loads(revisions("show", staged.features, "t", "--json", "--where", "v = 6").stdout)
    assert shown == [{"id": i, "v": 6} for i in (6, 7, 8)]
    diff = revisions("diff", staged.features, "t", "--since", "2020-01-06T00:00:00Z")
    assert "changed" in diff.stdout and "4 -> 6" in diff.stdout and "added" in diff.stdout
    history = json.loads(
        revisions("history", staged.features, "t", "--id", "id=9", "--json").stdout
    )
    assert [(v["v"], v["_revision"]) for v in history] == [(6, "r6"), (7, "r7")]
    for done in (diff,):
        assert SPARK_BANNER not in done.stderr, f"the JVM's log is not quiet: {done.stderr}"

    src, dst = tmp_path / "original", tmp_path / "imported"
    worked_example(src)
    imported = revisions("import-legacy", str(src), str(dst))
    assert "imported 4 revisions (2 major, 2 minor)" in imported.stdout
    assert "featurizer_A [id], featurizer_B [id]" in imported.stdout
    assert "naive timestamps; they are taken in UTC" in imported.stderr
    again = revisions("import-legacy", str(src), str(dst), code=2)
    assert "already has 4 revisions" in again.stderr
    log = json.loads(revisions("log", str(dst), "--json").stdout)
    assert [(r["name"], r["is_major"]) for r in log] == [
        ("revision_0", True),
        ("revision_2", False),
        ("revision_4", True),
        ("revision_6", False),
    ]
