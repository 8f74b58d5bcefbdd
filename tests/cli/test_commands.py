"""The commands in-process (click's CliRunner, the test session's Spark): outputs and errors.

The console script itself runs in subprocesses in test_console_script.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from core.helpers import stage_revision
from core.legacy_layout import worked_example
from harness.dates import day

from revisions_assets.cli import cli
from revisions_assets.core.log.layout import entry_path
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage
from revisions_assets.core.storage.base import LocalStorage

from .conftest import PYTHON_WORDS, Staged


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result


def rows(*args: str) -> list[dict] | dict:
    return json.loads(run(*args, "--json").stdout)


@pytest.fixture(scope="module", autouse=True)
def nothing_is_written(staged: Staged):
    """Every command of this module only reads (the stale description is left stale)."""
    before = staged.snapshot()
    yield
    assert staged.snapshot() == before


def test_log(staged):
    log = rows("log", staged.features)
    assert [r["name"] for r in log] == ["r0", "r2", "r4", "r6", "r7", "u1"]
    assert log[0]["timestamp"] == "2020-01-01T00:00:00+00:00"
    assert log[0]["is_major"] is True and log[0]["tables"] == ["t"]
    assert {"sequence", "version", "rows", "tombstones", "committed_at"} <= set(log[0])
    assert [
        r["sequence"] for r in rows("log", staged.features, "--table", "t", "--limit", "2")
    ] == [
        4,
        5,
    ]
    text = run("log", staged.features, "--limit", "3").stdout
    assert "r7" in text and "r2" not in text and "the last 3 of 6 entries" in text


def test_tables(staged):
    tables = {r["table"]: r for r in rows("tables", staged.features)}
    assert sorted(tables) == ["t", "u"]
    t = tables["t"]
    assert t["id_columns"] == ["id"]
    assert t["schema"] == [
        {"name": "id", "type": "bigint", "nullable": True},
        {"name": "v", "type": "bigint", "nullable": True},
    ]
    assert (t["revisions"], t["majors"], t["head"], t["head_sequence"]) == (5, 2, "r7", 5)
    assert (t["base"], t["revisions_since_base"]) == ("r4", 2)
    assert "since base" in run("tables", staged.features).stdout


def test_lag(staged):
    (lag,) = rows("lag", staged.scores)
    assert lag["consumer_table"] == "s" and lag["upstream"] == staged.features
    assert (lag["table"], lag["position"], lag["head"], lag["revisions_behind"]) == ("t", 3, 6, 2)
    assert lag["age_seconds"] > 0 and lag["error"] is None
    assert "behind" in run("lag", staged.scores).stdout
    assert rows("lag", staged.features) == []  # not a consumer


def test_show(staged):
    latest = rows("show", staged.features, "t")
    assert latest == [
        {"id": i, "v": v} for i, v in [(4, 4), (5, 4), (6, 6), (7, 6), (8, 6), (9, 7)]
    ]
    as_of = rows("show", staged.features, "t", "--as-of", "2020-01-04T00:00:00+01:00")
    assert as_of == [{"id": i, "v": 0 if i < 2 else 2} for i in range(7)]
    pinned = rows("show", staged.features, "t", "--at", "HEAD~1", "--where", "id >= 9")
    assert pinned == [{"id": 9, "v": 6}, {"id": 10, "v": 6}]
    with_revision = rows(
        "show", staged.features, "t", "--at", "3", "--with-revision", "--limit", "1"
    )
    assert with_revision == {  # with a limit: whether rows were left out, and how many
        "rows": [
            {
                "id": 4,
                "v": 4,
                "_revision": "r4",
                "_revision_timestamp": "2020-01-05T00:00:00+00:00",
                "_revision_sequence": 3,
            }
        ],
        "limit": 1,
        "truncated": True,
        "total": 5,
    }
    whole = rows("show", staged.features, "t", "--limit", "6")
    assert (len(whole["rows"]), whole["truncated"], whole["total"]) == (6, False, 6)
    streamed = rows("show", staged.features, "t", "--limit", "0")
    assert streamed == latest
    text = run("show", staged.features, "t", "--limit", "2").stdout
    assert "merges major r4 + 2 revision(s) on top" in text and "the first 2 rows" in text


def test_diff(staged):
    window = rows("diff", staged.features, "t", "--since", "2020-01-06T00:00:00Z")
    assert window == [
        *[
            {"_change": "changed", "id": i, "v": 6, "_before": {"v": 4}, "_reset": False}
            for i in (6, 7, 8)
        ],
        {"_change": "added", "id": 9, "v": 7, "_before": None, "_reset": False},
    ]  # id 10 was added and deleted in the window: no change
    reset = rows(
        "diff", staged.features, "t", "--since", "2020-01-02T00:00Z", "--until", "2020-01-06T00:00Z"
    )
    assert {(r["_change"], r["id"]) for r in reset} == {
        *{("deleted", i) for i in range(4)},
        ("changed", 4),
        *{("added", i) for i in range(5, 9)},
    }
    assert all(r["_reset"] for r in reset)
    assert reset[0] == {
        "_change": "deleted",
        "id": 0,
        "v": None,
        "_before": {"v": 0},
        "_reset": True,
    }
    by_sequence = rows("diff", staged.features, "t", "--since", "4", "--until", "5")
    assert by_sequence == [
        {"_change": "changed", "id": 9, "v": 7, "_before": {"v": 6}, "_reset": False},
        {"_change": "deleted", "id": 10, "v": None, "_before": {"v": 6}, "_reset": False},
    ]
    stats = json.loads(
        run(
            "diff",
            staged.features,
            "t",
            "--since",
            "2020-01-02T00:00Z",
            "--until",
            "2020-01-06T00:00Z",
            "--stats",
            "--json",
        ).stdout
    )
    assert stats == {"reset": True, "added": 4, "changed": 1, "deleted": 4, "columns": {"v": 1}}
    text = run("diff", staged.features, "t", "--since", "2020-01-02T00:00Z").stdout
    assert text.startswith("RESET:") and "major r4 (seq 3" in text


def test_history(staged):
    versions = rows("history", staged.features, "t", "--id", "id=10")
    assert versions == [
        {
            "id": 10,
            "v": 6,
            "valid_from": "2020-01-07T00:00:00+00:00",
            "valid_to": "2020-01-08T00:00:00+00:00",
            "is_current": False,
            "is_deleted": False,
            "_revision": "r6",
            "_revision_sequence": 4,
            "_revision_kind": "minor",
        },
        {
            "id": 10,
            "v": None,
            "valid_from": "2020-01-08T00:00:00+00:00",
            "valid_to": None,
            "is_current": True,
            "is_deleted": True,
            "_revision": "r7",
            "_revision_sequence": 5,
            "_revision_kind": "minor",
        },
    ]
    six = rows("history", staged.features, "t", "--id", "id=6", "--until", "2020-01-06T00:00Z")
    assert [(v["v"], v["_revision"], v["is_current"]) for v in six] == [
        (2, "r2", False),
        (4, "r4", True),
    ]
    assert "r7" in run("history", staged.features, "t", "--id", "id=10").stdout


@pytest.mark.parametrize(
    "args",
    [
        ["show", "{features}", "t", "--with-revision", "--where", "v > 2"],
        ["show", "{features}", "t", "--as-of", "2020-01-03T00:00Z"],
        ["diff", "{features}", "t", "--since", "2020-01-02T00:00Z"],
        ["diff", "{features}", "t", "--since", "1", "--stats"],
        ["history", "{features}", "t", "--id", "id=2"],
        # Tuesday's features as known on Tuesday (the reader's answer: test_console_script)
        [
            "show",
            "{redeployed}",
            "t",
            "--as-of",
            "2024-03-05T00:00Z",
            "--known-at",
            "2024-03-05T00:00Z",
        ],
    ],
)
def test_spark_reads_what_the_reader_reads(spark, staged, redeployed, args):
    """``--spark`` (the engine) and the default (the reader in this process) agree."""
    args = [a.format(features=staged.features, redeployed=redeployed) for a in args]
    assert rows(*args, "--spark") == rows(*args)


def test_show_where_prunes_the_files_its_ids_exclude(spark, tmp_path):
    """``--where`` is the scan's filter on both paths: a file whose logged ids it excludes
    is never opened, so a lookup of id 1 reads while the file of ids 100-101 is missing
    (a read of every row refuses it)."""
    root = str(tmp_path / "ds")
    log = RevisionLog(open_storage(root))
    stage_revision(log, root, "r0", day(0), True, {(1,): {"v": 1}, (2,): {"v": 2}})
    stage_revision(log, root, "r1", day(1), False, {(100,): {"v": 3}, (101,): {"v": 4}})
    Path(root, "r1/t/part-00000.parquet").unlink()
    for engine in ((), ("--spark",)):
        assert rows("show", root, "t", "--where", "id = 1", *engine) == [{"id": 1, "v": 1}]
        assert "r1/t/part-00000.parquet" in run("show", root, "t", *engine, code=3).stderr


@pytest.mark.parametrize(
    "args",
    [
        ["diff", "{features}", "t", "--since", "2020-01-02T00:00Z"],
        ["diff", "{features}", "t", "--since", "3", "--until", "5", "--stats"],
        ["diff", "{features}", "t", "--since", "2020-01-06T00:00Z", "--spark"],
        ["show", "{features}", "t", "--at", "HEAD~1"],
        ["history", "{features}", "t", "--id", "id=2", "--spark"],
        ["describe", "{features}"],
    ],
)
def test_a_command_reads_the_log_once(spark, staged, args, monkeypatch):
    """One snapshot per command: the log is read once, when the command opens the dataset,
    and every read plans on that snapshot. A read of the log ends where the entry after
    the head is missing: the probes for it count the reads."""
    head = len(rows("log", staged.features))
    past_head = entry_path(head + 1)
    probes = []
    read = LocalStorage.read

    def counted(storage: LocalStorage, rel: str, limit: int | None = None) -> bytes | None:
        if rel == past_head:
            probes.append(rel)
        return read(storage, rel, limit)

    monkeypatch.setattr(LocalStorage, "read", counted)
    run(*[a.format(features=staged.features) for a in args], "--json")
    assert len(probes) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["show", "{missing}", "t"], "none does not exist"),
        (["log", "{legacy}"], "'revisions import-legacy SRC ROOT'"),
        (
            ["show", "{features}", "nope"],
            "has no revisions in this dataset; known tables: 't', 'u'",
        ),
        (["log", "{missing}"], "none does not exist: no revisioned dataset there"),
        (["history", "{features}", "t", "--id", "id"], "expected column=value"),
        (["history", "{features}", "t", "--id", "x=1"], "'x' is not an id column"),
        (["history", "{features}", "t", "--id", "id=abc"], "'abc' is not a bigint"),
        (["show", "{features}", "t", "--as-of", "2020-01-04"], "has no timezone"),
        (["diff", "{features}", "t", "--since", "2020-01-04T00:00"], "has no timezone"),
        (["show", "{features}", "t", "--as-of", "2019-12-01T00:00Z"], "no major revision as of"),
        (["show", "{features}", "t", "--as-of", "2020-01-04T00:00Z", "--at", "2"], "not both"),
        (["show", "{features}", "t", "--at", "HEAD~9"], "has 5 data revisions (HEAD..HEAD~4)"),
        (["diff", "{features}", "t", "--since", "2", "--until", "2020-01-04T00:00Z"], "both be"),
        (
            ["diff", "{features}", "t", "--since", "4", "--until", "2"],
            "--since 4 is after --until 2",
        ),
        (
            [
                "diff",
                "{features}",
                "t",
                "--since",
                "2020-01-05T00:00Z",
                "--until",
                "2020-01-02T00:00Z",
            ],
            "--since 2020-01-05T00:00Z is after --until 2020-01-02T00:00Z; the window is "
            "(--since, --until]: swap them",
        ),
        (["diff", "{features}", "t", "--since", "7"], "--since 7 is after the head of the log"),
        (["show", "{features}", "t", "--where", "nope > 1"], "--where 'nope > 1'"),
        (["show", "{features}", "t", "--limit", "-1"], "--limit"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(staged, tmp_path, args, message):
    args = [a.format(missing=tmp_path / "none", **vars(staged)) for a in args]
    result = run(*args, code=2)
    assert result.stdout == ""
    assert result.stderr.startswith("revisions: error: ") and result.stderr.count("\n") == 1
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not [w for w in PYTHON_WORDS if w in result.stderr], result.stderr  # options only


def test_debug_shows_the_traceback(staged):
    result = run("show", staged.features, "nope", "--debug", code=2)
    assert "Traceback" in result.stderr and "UnknownTableError" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("revisions: error: ")


def test_import_legacy(tmp_path):
    src, dst = tmp_path / "original", tmp_path / "imported"
    worked_example(src)
    imported = run("import-legacy", str(src), str(dst))
    assert "imported 4 revisions (2 major, 2 minor)" in imported.stdout
    assert "featurizer_A [id], featurizer_B [id]" in imported.stdout
    assert "naive timestamps; they are taken in UTC" in imported.stderr
    again = run("import-legacy", str(src), str(dst), code=2)
    assert "already has 4 revisions" in again.stderr and again.stdout == ""
    as_json = json.loads(run("import-legacy", str(src), str(tmp_path / "again"), "--json").stdout)
    assert as_json == {
        "root": str(tmp_path / "again"),
        "revisions": 4,
        "majors": 2,
        "minors": 2,
        "tables": [
            {"table": "featurizer_A", "id_columns": ["id"]},
            {"table": "featurizer_B", "id_columns": ["id"]},
        ],
    }
    assert [(r["name"], r["is_major"]) for r in rows("log", str(dst))] == [
        ("revision_0", True),
        ("revision_2", False),
        ("revision_4", True),
        ("revision_6", False),
    ]
