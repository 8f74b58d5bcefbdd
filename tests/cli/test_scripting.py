"""What a script relies on, through the console script as a user types it: every command's
exit code (0 ok, 1 a check found something, 2 usage, 3 a dataset or storage error) and
JSON shape, errors that leave stdout empty and speak in options, output that is never cut
silently, and a closed pipe that ends quietly.

The commands here start no JVM; they run side by side (each is its own process) on the
staged datasets of conftest.py and on a few variants of them built below in milliseconds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from core.helpers import stage_revision
from harness.dates import day
from harness.processes import with_tests_on_path

from revisions_assets.core.log.records import canonical_json
from revisions_assets.core.log.revision_log import LOG_DIR, RevisionLog, entry_path
from revisions_assets.core.storage.backends import open_storage

from .conftest import PYTHON_WORDS, Staged

BIN = Path(sys.executable).parent
SPARK_BANNER = "log4j"
#: revision names of the wide dataset: "a1b2c" is a unique prefix, "a1b2" an ambiguous one
WIDE_NAMES = ("a1b2c3d4e5", "a1b2f6f7f8")


@dataclass
class Case:
    args: tuple[str, ...]
    code: int
    check: Callable[[subprocess.CompletedProcess], None] = lambda done: None
    columns: int = 160
    done: subprocess.CompletedProcess | None = field(default=None, repr=False)


def run(case: Case) -> Case:
    env = {**with_tests_on_path(None), "SPARK_MASTER": "local[1]", "COLUMNS": str(case.columns)}
    case.done = subprocess.run(
        [str(BIN / "revisions"), *case.args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    return case


@dataclass(frozen=True)
class Variants:
    wide: str  # table w: 25 rows, revisions named WIDE_NAMES
    big: str  # table w: 20,000 rows, more than a pipe holds as JSON
    damaged: str  # features without a data file of r6
    truncated: str  # features with a data file of r6 cut short
    corrupt: str  # features whose second log entry is not JSON
    orphan: str  # scores copied without its upstream
    moved: str  # features and scores copied together elsewhere
    old: str  # a consumer whose position names the features' absolute root (older logs)
    old_copy: str  # the features copied elsewhere, where --map-root points
    writable: str  # a copy the writing commands may open
    #: a consumer whose crafted log names two upstreams outside its folder: the features'
    #: root (position 99, past its head) and a root that does not exist
    nosy: str


@pytest.fixture(scope="module")
def variants(staged: Staged, tmp_path_factory) -> Variants:
    base = tmp_path_factory.mktemp("variants").resolve()
    wide = base / "wide"
    log = RevisionLog(open_storage(str(wide)))
    stage_revision(
        log, str(wide), WIDE_NAMES[0], day(0), True, {(i,): {"v": i} for i in range(25)}, "w"
    )
    stage_revision(log, str(wide), WIDE_NAMES[1], day(1), False, {(0,): {"v": 100}}, "w")
    log.after_commit()
    big = str(base / "big")
    rows = {(i,): {"v": i} for i in range(20_000)}
    stage_revision(RevisionLog(open_storage(big)), big, "all", day(0), True, rows, "w")
    damaged = copy(staged.features, base / "damaged")
    Path(damaged, "r6/t/part-00000.parquet").unlink()
    truncated = copy(staged.features, base / "truncated")
    cut = Path(truncated, "r6/t/part-00000.parquet")
    cut.write_bytes(cut.read_bytes()[:50])
    corrupt = copy(staged.features, base / "corrupt")
    Path(corrupt, entry_path(2)).write_text("{not json")
    orphan = copy(staged.scores, base / "orphan" / "scores")
    moved = base / "moved"
    copy(staged.features, moved / "features")
    copy(staged.scores, moved / "scores")
    old = copy(staged.scores, base / "old" / "scores")
    entry = Path(old, entry_path(1))
    doc = json.loads(entry.read_text())
    doc["upstream"][0]["dataset"] = staged.features  # as logs recorded positions before
    entry.write_text(canonical_json(doc))
    for checkpoint in Path(old, LOG_DIR).glob("checkpoint*"):
        checkpoint.unlink()
    old_copy = copy(staged.features, base / "elsewhere" / "features")
    writable = copy(staged.features, base / "writable")
    nosy = copy(staged.scores, base / "nosy" / "scores")
    entry = Path(nosy, entry_path(1))
    doc = json.loads(entry.read_text())
    doc["upstream"] = [
        {"dataset": staged.features, "table": "t", "sequence": 99},
        {"dataset": str(base / "no" / "such" / "root"), "table": "t", "sequence": 3},
    ]
    entry.write_text(canonical_json(doc))
    for checkpoint in Path(nosy, LOG_DIR).glob("checkpoint*"):
        checkpoint.unlink()
    return Variants(
        str(wide),
        big,
        damaged,
        truncated,
        corrupt,
        orphan,
        str(moved),
        old,
        old_copy,
        writable,
        nosy,
    )


def copy(root: str, target: Path) -> str:
    shutil.copytree(root, target)
    return str(target)


def as_json(done: subprocess.CompletedProcess):
    return json.loads(done.stdout)


def one_line_error(*parts: str) -> Callable[[subprocess.CompletedProcess], None]:
    def check(done: subprocess.CompletedProcess) -> None:
        assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("revisions: error: ")
        for part in parts:
            assert part in done.stderr, (part, done.stderr)
        assert "Traceback" not in done.stderr and "Timestamp(" not in done.stderr
        assert not [w for w in PYTHON_WORDS if w in done.stderr], done.stderr

    return check


def test_exit_codes_and_json_shapes(staged: Staged, variants: Variants):
    f, s, v = staged.features, staged.scores, variants
    before = staged.snapshot()

    def log_shape(done):
        rows = as_json(done)
        assert [r["refs"] for r in rows] == [
            {"t": "HEAD~4"},
            {"t": "HEAD~3"},
            {"t": "HEAD~2"},
            {"t": "HEAD~1"},
            {"t": "HEAD"},
            {"u": "HEAD"},
        ]
        for row in rows:
            assert isinstance(row["upstream"], list) and isinstance(row["tables"], list)
            assert isinstance(row["properties"], dict) and isinstance(row["what"], str)

    def consumer_log(done):
        (row,) = as_json(done)
        assert row["upstream"] == [{"dataset": f, "table": "t", "sequence": 3}]

    def narrow_log(done):
        lines = done.stdout.splitlines()
        assert all(len(line) <= 80 for line in lines), done.stdout
        assert "left out to fit 80 columns" in done.stdout and "committed_at" in done.stdout
        assert [line.split()[:3] for line in lines[2:7]] == [
            ["1", "HEAD~4", "major"],
            ["2", "HEAD~3", "minor"],
            ["3", "HEAD~2", "major"],
            ["4", "HEAD~1", "minor"],
            ["5", "HEAD", "minor"],
        ]

    def describe_all(done):
        rows = {r["table"]: r for r in as_json(done)}
        t = rows["t"]
        assert (t["rows"], t["revisions_since_base"], t["base"]) == (6, 2, "r4")
        assert t["columns"][0] == {"name": "id", "type": "bigint", "nullable": True}
        assert t["on_base"] == [
            {"name": "r6", "sequence": 4, "ref": "HEAD~1"},
            {"name": "r7", "sequence": 5, "ref": "HEAD"},
        ]
        assert t["read_files"] == 3 and t["stored_files"] == 5 and t["read_bytes"] > 0
        assert rows["u"]["rows"] == 1

    def lag_rows(expected_root: str, over: bool):
        def check(done):
            (row,) = as_json(done)
            assert (row["upstream"], row["revisions_behind"], row["error"]) == (
                expected_root,
                2,
                None,
            )
            assert row["over_limit"] is over

        return check

    def not_followed(*roots: str):
        def check(done):
            rows = as_json(done)
            assert [r["upstream"] for r in rows] == list(roots)
            for row in rows:
                assert row["followed"] is False and "head" not in row
                assert row["error"].startswith(f"not followed: {row['upstream']} lies outside")
                assert "pass --upstream-root to follow it" in row["error"]

        return check

    def followed_past_head(done):
        (row, gone) = as_json(done)
        assert (row["followed"], row["head"], row["position"]) == (True, 6, 99)
        assert "position 99 is past the upstream's head 6" in row["error"]
        assert gone["followed"] is True and "does not exist" in gone["error"]

    def orphan_lag(done):
        (row,) = as_json(done)
        assert row["upstream"] == str(Path(v.orphan).parent / "features")
        assert "features does not exist" in row["error"]

    def wide_json(done):
        assert len(as_json(done)) == 25  # --json: every row, unless --limit says otherwise

    def wide_text(done):
        assert "the first 20 rows (--limit N shows more, --limit 0 all)" in done.stdout

    def wraps_findings(done):
        lines = done.stdout.splitlines()
        assert lines[0].split() == ["severity", "kind", "path", "message"], done.stdout
        assert all(len(line) <= 80 for line in lines) and "left out" not in done.stdout
        table = " ".join(done.stdout.split("\nfix ")[0].split())
        assert "r6/t/part-00000.parquet" in table and "is not a Parquet file" in table

    def two_entities(done):
        versions = [(r["id"], r["v"], r["_revision"]) for r in as_json(done)]
        assert versions == [
            (2, 0, "r0"),
            (2, 2, "r2"),
            (2, None, "r4"),
            (10, 6, "r6"),
            (10, None, "r7"),
        ]

    def vacuum_paths(done):
        report = as_json(done)
        assert report["dry_run"] and "r2/t/part-00000.parquet" in report["paths"]
        assert report["files"] == len(report["paths"])

    cases = [
        Case(("--help",), 0, lambda d: "Exit codes: 0 ok; 1 a check found" in d.stdout),
        Case(("log", f, "--json"), 0, log_shape),
        Case(("log", s, "--json"), 0, consumer_log),
        Case(("log", f, "--table", "t"), 0, narrow_log, columns=80),
        Case(("describe", f, "--json"), 0, describe_all),
        Case(("describe", f, "t"), 0, lambda d: "rows:        6" in d.stdout),
        Case(
            ("describe", f, "nope"),
            2,
            one_line_error("table 'nope' has no revisions", "known tables: 't', 'u'"),
        ),
        Case(("lag", s, "--max-behind", "1", "--json"), 1, lag_rows(f, True)),
        Case(
            ("lag", s, "--max-age", "1000d", "--max-behind", "2", "--json"), 0, lag_rows(f, False)
        ),
        Case(("lag", s, "--max-age", "1s"), 1, lambda d: "past --max-age 1s: exit 1" in d.stdout),
        Case(("lag", v.orphan, "--json"), 3, orphan_lag),
        Case(("lag", f"{v.moved}/scores", "--json"), 0, lag_rows(f"{v.moved}/features", False)),
        # a log is data: only upstreams in the consumer's folder are read unless allowed
        Case(("lag", v.old, "--json"), 3, not_followed(f)),
        Case(
            ("lag", v.old, "--upstream-root", str(Path(f).parent), "--json"),
            0,
            lag_rows(f, False),
        ),
        Case(
            ("lag", v.nosy, "--json"),
            3,
            not_followed(f, str(Path(v.nosy).parents[1] / "no" / "such" / "root")),
        ),
        Case(("verify", v.nosy, "--json"), 0, lambda d: as_json(d)["healthy"]),
        Case(
            (
                "lag",
                v.nosy,
                "--upstream-root",
                str(Path(f).parent),
                "--upstream-root",
                str(Path(v.nosy).parents[1] / "no"),
                "--json",
            ),
            3,
            followed_past_head,
        ),
        Case(
            ("lag", v.old, "--map-root", f"{f}={v.old_copy}", "--json"),
            0,
            lag_rows(v.old_copy, False),
        ),
        Case(("show", v.wide, "w", "--json"), 0, wide_json),
        Case(("show", v.wide, "w"), 0, wide_text),
        Case(
            ("show", v.wide, "w", "--at", "a1b2c", "--json", "--limit", "1"),
            0,
            lambda d: as_json(d)["rows"] == [{"id": 0, "v": 0}],
        ),
        Case(
            ("show", v.wide, "w", "--at", "a1b2"),
            2,
            one_line_error("'a1b2' is the prefix of 2 revision names", *WIDE_NAMES),
        ),
        Case(
            ("show", f, "t", "--at", "HEAD~9"),
            2,
            one_line_error("HEAD~9: table 't' has 5 data revisions (HEAD..HEAD~4)", "--table t"),
        ),
        Case(
            ("show", f, "t", "--as-of", "2020-01-04"),
            2,
            one_line_error(
                "--as-of '2020-01-04' has no timezone",
                "e.g. '2020-01-04T00:00:00Z'",
                "table 't' holds revisions stamped 2020-01-01T00:00:00Z .. 2020-01-08T00:00:00Z",
            ),
        ),
        Case(
            ("show", f, "t", "--as-of", "2019-06-01T00:00Z"),
            2,
            one_line_error("first major 'r0' (sequence 1) is stamped 2020-01-01T00:00:00+00:00"),
        ),
        Case(("history", f, "t", "--id", "id=2", "--id", "id=10", "--json"), 0, two_entities),
        Case(("diff", f, "t", "--since", "4", "--json"), 0, lambda d: len(as_json(d)) == 2),
        # an error after the heading was due: stdout stays empty
        Case(("diff", v.damaged, "t", "--since", "1"), 3, one_line_error("r6/t/part-00000")),
        Case(("verify", f, "--json"), 0, lambda d: not as_json(d)["healthy"]),
        Case(("verify", v.damaged), 1, lambda d: "missing_file" in d.stdout),
        # narrow terminals wrap paths and messages, never leave them out
        Case(("verify", v.truncated), 1, wraps_findings, columns=80),
        Case(("show", v.damaged, "t"), 3, one_line_error("r6/t/part-00000.parquet")),
        Case(("log", v.corrupt), 3, one_line_error("is not valid JSON")),
        Case(("vacuum", f, "--retain", "0"), 2, one_line_error("below the floor of 1d", "--force")),
        Case(("vacuum", f, "--retain", "0", "--dry-run", "--json"), 0, vacuum_paths),
        Case(("compact", s), 0, lambda d: "nothing to compact" in d.stdout),
        Case(("compact", v.writable, "--table", "nope"), 2, one_line_error("table 'nope'")),
    ]
    with ThreadPoolExecutor(4) as pool:
        done = list(pool.map(run, cases))
    failures = []
    for case in done:
        result = case.done
        assert result is not None
        try:
            assert result.returncode == case.code, (result.returncode, result.stderr)
            assert case.check(result) is not False
            assert SPARK_BANNER not in result.stderr, "a JVM started"
        except AssertionError as exc:
            failures.append(f"revisions {' '.join(case.args)}: {exc}\n{result.stdout}")
    assert not failures, "\n\n".join(failures)
    assert staged.snapshot() == before  # refusals and reads wrote nothing


def test_a_closed_pipe_ends_quietly(variants: Variants):
    """``revisions show ... | head -1``: the reader goes away; exit 141 as coreutils' (killed
    by SIGPIPE), never 1 ("a check found something"), and nothing on stderr."""
    env = {**with_tests_on_path(None), "COLUMNS": "160"}
    args = [str(BIN / "revisions"), "show", variants.big, "w", "--json", "--limit", "0"]
    writer = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    head = subprocess.run(["head", "-c", "20"], stdin=writer.stdout, capture_output=True)
    writer.stdout.close()
    stderr = writer.stderr.read().decode()
    assert writer.wait(timeout=300) == 141, stderr
    assert stderr == "" and head.stdout.startswith(b'[{"id": 0')
