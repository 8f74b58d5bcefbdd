"""``verify``, ``compact``, ``vacuum`` and ``purge`` in-process (click's CliRunner, the test
session's Spark), on copies of the staged datasets (tests/cli/conftest.py). The console
script runs them in test_console_script.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from core.damage import as_earlier_release
from harness.frames import frame
from harness.race_points import landing_at

from revisions_assets import RevisionedDataset
from revisions_assets.cli import cli

from .conftest import Staged

# tests that start Spark take the ``spark`` fixture: the commands use the running session


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result


def copy(staged: Staged, tmp_path: Path, name: str = "features") -> str:
    target = tmp_path / name
    shutil.copytree(staged.features, target)
    return str(target)


def ids_on_disk(root: str, table: str = "t") -> list[int]:
    """Every id in every data file of ``table`` under ``root``, whatever the log says."""
    return [
        i
        for path in Path(root).glob(f"*/{table}/*.parquet")
        for i in pq.read_table(path, columns=["id"]).column("id").to_pylist()
    ]


def test_verify_exit_codes(staged, tmp_path):
    # the staged description is stale on purpose: a warning, exit 0 (--strict: 1)
    found = json.loads(run("verify", staged.features, "--json").stdout)
    assert [f["kind"] for f in found["findings"]] == ["description_stale"]
    assert found["healthy"] is False and found["findings"][0]["severity"] == "warning"
    assert "fix description_stale" in run("verify", staged.features).stdout
    run("verify", staged.features, "--strict", code=1)
    assert "healthy" in run("verify", staged.scores).stdout
    damaged = copy(staged, tmp_path)
    Path(damaged, "r2/t/part-00000.parquet").unlink()
    result = run("verify", damaged, code=1)
    assert "missing_file" in result.stdout and "r2/t/part-00000.parquet" in result.stdout
    assert "1 errors, 1 warnings" in result.stdout


def test_verify_deep(spark, staged, tmp_path):
    healthy = json.loads(run("verify", staged.scores, "--deep", "--json").stdout)
    assert healthy == {
        "root": staged.scores,
        "deep": True,
        "deep_ran": True,
        "healthy": True,
        "findings": [],
    }
    damaged = copy(staged, tmp_path)

    def rewrite_r6(ids):  # outside the engine
        table = {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([6] * len(ids), pa.int64()),
            "_deleted": pa.array([False] * len(ids)),
        }
        pq.write_table(pa.table(table), Path(damaged, "r6/t/part-00000.parquet"))

    def errors(found: dict) -> list[tuple[str, str]]:
        return [(f["kind"], f["path"]) for f in found["findings"] if f["severity"] == "error"]

    rewrite_r6([6, 6, None, 8, 9, 10])  # one row more than the log says: its footer tells
    checked = json.loads(run("verify", damaged, "--deep", "--json", code=1).stdout)
    assert checked["deep_ran"] is False
    assert errors(checked) == [("corrupt_file", "r6/t/part-00000.parquet")]  # by its stats
    assert "its footer records 6 rows, the log records 5" in checked["findings"][0]["message"]
    assert checked["findings"][-1]["kind"] == "deep_checks_skipped"
    as_earlier_release(Path(damaged))  # entries without file stats: rows checked per write
    checked = json.loads(run("verify", damaged, "--json", code=1).stdout)
    assert errors(checked) == [("row_count_mismatch", "r6")]
    assert "its files hold 6 rows, the log records 5" in checked["findings"][0]["message"]
    rewrite_r6([6, 6, None, 8, 9])  # as many rows as the log says: only the data tells
    found = json.loads(run("verify", damaged, "--deep", "--json", code=1).stdout)
    assert set(errors(found)) == {("null_id", "r6"), ("duplicate_id", "r6")}


def test_compact_then_vacuum(spark, staged, tmp_path):
    root = copy(staged, tmp_path)
    compacted = json.loads(run("compact", root, "--table", "t", "--json").stdout)
    assert [(r["table"], r["revisions"], r["major"]) for r in compacted] == [("t", 3, 3)]
    assert "nothing to compact" in run("compact", root, "--table", "t").stdout
    tables = {r["table"]: r for r in json.loads(run("tables", root, "--json").stdout)}
    assert (tables["t"]["base_kind"], tables["t"]["revisions_since_base"]) == ("compaction", 0)
    dry = json.loads(run("vacuum", root, "--retain", "0", "--dry-run", "--json").stdout)
    assert dry["dry_run"] and dry["entry"] is None
    assert "r2" in dry["revisions"] and "r0" not in dry["revisions"]  # a major: kept
    assert Path(root, "r0").exists()
    assert "  r2/ (1 files)" in run("vacuum", root, "--retain", "0", "--dry-run").stdout
    done = run("vacuum", root, "--retain", "0", "--no-keep-majors", "--force")
    assert "removed" in done.stdout and "vacuum entry" in done.stdout
    assert not Path(root, "r0").exists()
    log = json.loads(run("log", root, "--json", "--limit", "0").stdout)
    assert [r["kind"] for r in log][-2:] == ["compaction", "vacuum"]
    assert log[0]["vacuumed"] is True and log[0]["vacuumed_by"] == log[-1]["sequence"]
    compaction, vacuum = log[-2:]
    assert compaction["compaction"] == {"t": {"major": 3, "through": 5, "revisions": 3}}
    assert compaction["what"] == "holds t as of sequence 5: 3 revisions from major 3"
    assert vacuum["vacuum"]["removed"] == [1, 2, 4, 5] and vacuum["vacuum"]["files"] == 4
    assert vacuum["vacuum"]["retain_seconds"] == 0
    # what it deleted: each staged folder holds one data file
    assert vacuum["what"].startswith("removed 4 files, ")
    assert "(4 folders whole): the files of 4 entries (1-2, 4-5); retain 0s" in vacuum["what"]
    assert vacuum["vacuum"]["folders"] == ["r0", "r2", "r6", "r7"]
    text = run("log", root, "--limit", "0").stdout
    assert "compaction" in text and f"by {log[-1]['sequence']}" in text


def test_a_compaction_a_purge_overtakes_exits_3_and_says_to_run_it_again(spark, staged, tmp_path):
    """A purge commits while `revisions compact` writes (deterministically, in the middle of
    it): the compaction gives up, exits 3 and says what to run again; run again, it holds
    the purged state."""
    root = copy(staged, tmp_path)

    def purge():
        ds = RevisionedDataset(root, spark=spark)
        return ds.maintenance.purge("t", frame(spark, [(6,)], "id long"), reason="erasure")

    with landing_at("append", purge) as landed:
        lost = run("compact", root, code=3)
    # stderr: the command's progress (here the purge's too: it ran in this process), then
    # the one-line error
    error = lost.stderr.splitlines()[-1]
    assert lost.stdout == "" and error.startswith("revisions: error: ")
    assert f"gave up: purge {landed[0].name!r}" in error
    assert error.endswith("nothing was committed: run the compaction again")
    assert json.loads(run("log", root, "--json").stdout)[-1]["kind"] == "purge"
    assert json.loads(run("compact", root, "--json").stdout)  # run again: it commits
    shown = json.loads(run("show", root, "t", "--json").stdout)
    assert 6 not in {r["id"] for r in shown}


def test_purge_over_two_roots(spark, staged, tmp_path):
    roots = [copy(staged, tmp_path, "a"), copy(staged, tmp_path, "b")]
    assert 6 in ids_on_disk(roots[0])
    dry = json.loads(
        run("purge", *roots, "t", "--id", "id=6", "--reason", "test", "--dry-run", "--json").stdout
    )
    assert [(r["rows_removed"], r["entries_rewritten"], r["sequence"]) for r in dry] == [
        (3, 3, None),
        (3, 3, None),
    ]
    assert json.loads(run("log", roots[0], "--json").stdout)[-1]["kind"] == "major"  # unchanged
    done = run("purge", *roots, "t", "--id", "id=6", "--id", "id=9", "--reason", "erasure 7")
    assert done.stdout.count("t ") >= 2 and "next vacuum" in done.stdout
    shown = json.loads(run("show", roots[0], "t", "--json", "--as-of", "2020-01-07T00:00Z").stdout)
    assert {r["id"] for r in shown} == {4, 5, 7, 8, 10}
    for root in roots:
        log = json.loads(run("log", root, "--json").stdout)
        assert log[-1]["kind"] == "purge" and log[-1]["data_change"] is False
        assert log[-1]["tables"] == ["t"] and log[-1]["reason"] == "erasure 7"
        assert log[-1]["purge"] == {
            "reason": "erasure 7",
            "entities": 2,
            "rows_removed": 5,
            "entries_rewritten": {"t": [2, 3, 4, 5]},
        }
        assert log[-1]["what"] == (
            "purged 2 entities from t: 5 rows removed from 4 entries; reason: erasure 7"
        )
        assert 6 in ids_on_disk(root)  # until a vacuum past the purge
        vacuumed = json.loads(run("vacuum", root, "--retain", "0", "--force", "--json").stdout)
        assert len(vacuumed["purged_files"]) == 3  # r4, r6, r7: r2 goes as a whole
        assert not {6, 9} & set(ids_on_disk(root))
        assert json.loads(run("verify", root, "--json").stdout)["findings"] == []
    head = len(json.loads(run("log", roots[0], "--json").stdout))
    again = run("purge", roots[0], "t", "--id", "id=6", "--id", "id=99", "--reason", "again")
    assert "nothing to purge in" in again.stdout and "nothing committed there" in again.stdout
    (row,) = json.loads(
        run("purge", roots[0], "t", "--id", "id=99", "--reason", "again", "--json").stdout
    )
    assert (row["committed"], row["sequence"], row["rows_removed"]) == (False, None, 0)
    assert len(json.loads(run("log", roots[0], "--json").stdout)) == head  # nothing committed


@pytest.mark.parametrize(
    "args, message",
    [
        (["vacuum", "{features}", "--retain", "7x"], "'7x' is not a duration"),
        (["vacuum", "{features}", "--grace", "-1h"], "'-1h' is not a duration"),
        (["vacuum", "{missing}"], "none does not exist"),
        (["verify", "{missing}"], "none does not exist"),
        (["compact", "{features}", "--table", "nope"], "table 'nope' has no revisions"),
        (["purge", "{features}", "t", "--id", "id", "--reason", "r"], "expected column=value"),
        (["purge", "{features}", "nope", "--id", "id=1", "--reason", "r"], "table 'nope'"),
        (["purge", "{features}", "t", "--id", "id=x", "--reason", "r"], "'x' is not a bigint"),
        (["purge", "{features}", "t", "--id", "id=1", "--reason", " "], "--reason must not"),
        (["purge", "{features}", "--id", "id=1", "--reason", "r"], "ROOT [ROOT ...] TABLE"),
        (
            ["purge", "{features}", "{missing}", "t", "--id", "id=1", "--reason", "r"],
            "none does not exist",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(staged, tmp_path, args, message):
    features = copy(staged, tmp_path)  # some commands open for writing
    args = [a.format(missing=tmp_path / "none", features=features) for a in args]
    result = run(*args, code=2)
    assert result.stdout == ""
    assert result.stderr.startswith("revisions: error: ") and result.stderr.count("\n") == 1
    assert message in result.stderr and "Traceback" not in result.stderr


def test_vacuum_keeps_what_a_damaged_compaction_holds_and_rebuild_repairs_it(
    spark, staged, tmp_path
):
    root = copy(staged, tmp_path)
    (compaction,) = json.loads(run("compact", root, "--table", "t", "--json").stdout)
    (stored,) = Path(root, compaction["name"], "t").glob("*.parquet")
    intact = stored.read_bytes()
    stored.write_bytes(intact[:-100])  # truncated: the footer is gone

    # the revisions it holds stay; r2, which its major voids and it does not hold, goes
    kept = run("vacuum", root, "--retain", "0", "--force", code=1)
    assert "removed 1 files" in kept.stdout and "revisions: r2\n" in kept.stdout
    assert "kept the files of 2 entries a damaged file stands for: r6, r7" in kept.stdout
    assert "compaction_damaged" in kept.stdout and "--rebuild NAME" in kept.stdout
    files = sorted(p for p in Path(root).rglob("*") if p.is_file())
    assert not Path(root, "r2").exists() and Path(root, "r6").exists()
    report = json.loads(run("vacuum", root, "--retain", "0", "--dry-run", "--json", code=1).stdout)
    assert (report["revisions"], sorted(report["kept"])) == ([], ["r6", "r7"])
    assert [f["kind"] for f in report["findings"]] == ["compaction_damaged"]
    assert sorted(p for p in Path(root).rglob("*") if p.is_file()) == files  # a dry run
    deep = json.loads(run("verify", root, "--deep", "--json", code=1).stdout)
    assert (deep["deep"], deep["deep_ran"]) == (True, False)
    skipped = deep["findings"][-1]
    assert skipped["kind"] == "deep_checks_skipped" and "compaction_damaged" in skipped["message"]

    rebuilt = run("compact", root, "--rebuild", compaction["name"])
    assert f"it rebuilds {compaction['name']}" in rebuilt.stdout
    done = json.loads(run("vacuum", root, "--retain", "0", "--force", "--json").stdout)
    assert sorted(done["revisions"]) == sorted(["r6", "r7", compaction["name"]])
    assert json.loads(run("verify", root, "--json").stdout)["findings"] == []


def test_a_lost_upstream_head_is_an_error_for_lag_verify_and_vacuum(staged, tmp_path):
    """The features lose their entries 3 to 6; the scores recorded position 3 in them."""
    features, scores = copy(staged, tmp_path), str(tmp_path / "scores")
    shutil.copytree(staged.scores, scores)
    for sequence in range(3, 7):
        Path(features, "_log", f"{sequence:020d}.json").unlink()
    Path(features, "description.parquet").unlink()  # the consumer is the only evidence left
    (row,) = json.loads(run("lag", scores, "--json", code=3).stdout)
    assert (row["position"], row["head"]) == (3, 2)
    assert "position 3 is past the upstream's head 2" in row["error"]
    assert "lost entries: exit 3" in run("lag", scores, code=3).stdout
    found = json.loads(run("verify", scores, "--json", code=1).stdout)["findings"]
    assert [(f["kind"], f["severity"]) for f in found] == [("upstream_head_lost", "error")]
    refused = run("vacuum", features, "--consumer", scores, "--dry-run", code=3)
    assert (
        "recorded position 3" in refused.stderr and "past the log's last entry 2" in refused.stderr
    )


def test_log_counts_after_a_purge(spark, tmp_path):
    """skip_unchanged minors and a carrying major count what they were offered; a purge
    takes the purged entity from both counts, never turning it into an unchanged row."""
    from revisions_assets import RevisionedDataset

    root = str(tmp_path / "ds")
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"], compact_after=None)
    schema = "id long, v long"

    def commit(rows, day, major):
        df = frame(spark, rows, schema)
        ds.commit(
            {"t": df}, timestamp=f"2020-01-0{day}T00:00Z", is_major=major, skip_unchanged=True
        )

    commit([(i, 0) for i in range(1, 6)], 1, True)  # 5 entities
    commit([(1, 0), (2, 0), (3, 1)], 2, False)  # 3 changes: 2 of 3 unchanged
    commit([(3, 2), (4, 0)], 3, False)  # 1 of 2 unchanged
    commit([(1, 0), (2, 0), (3, 2), (4, 0), (5, 9)], 4, True)  # carries; 4 of 5 unchanged

    def unchanged():
        return [r["what"].split("; ")[-1] for r in json.loads(run("log", root, "--json").stdout)]

    assert unchanged()[1:4] == [
        "2 of 3 rows unchanged",
        "1 of 2 rows unchanged",
        "4 of 5 rows unchanged",
    ]
    run("purge", root, "t", "--id", "id=3", "--reason", "erasure")  # written in 2, 3; not in 4
    assert unchanged()[1:4] == [
        "2 of 2 rows unchanged",
        "1 of 1 rows unchanged",
        "3 of 4 rows unchanged",
    ]
