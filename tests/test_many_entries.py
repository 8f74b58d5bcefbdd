"""Long logs read without a JVM: 100,000 one-row minors on a major, no compaction (issue 53,
"20,000 log entries raise RecursionError").

The logs are crafted as a commit lays them out (``bench/long_log.py``: a folder, a data
file and an entry per revision, the newest checkpoint), in seconds. Past
``polars.FEW_TASKS`` revisions on a base, the Polars executor merges in one pass
(``_in_one_pass``, ``Scanner.tagged``): its plan has the same few scans at any length,
where the tree of anti-joins grew as n log n. No timing is asserted (bench/long_log.py
measures it).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.long_log import START, craft_log, expected_state, name_of
from revisions_assets import DatasetReader
from revisions_assets.cli import cli
from revisions_assets.core.read.execute import polars as polars_executor


def as_revisions(frame) -> dict[int, str]:
    return dict(zip(frame["id"].to_list(), frame["_revision"].to_list(), strict=True))


@pytest.mark.parametrize(
    "entries",
    [20_000, pytest.param(100_000, marks=pytest.mark.long)],  # 20,000: RecursionError before
)
def test_a_long_log_reads(tmp_path, entries):
    craft_log(tmp_path / "ds", entries, covered_entries=False)
    reader = DatasetReader(tmp_path / "ds")
    assert reader.snapshot().head_sequence == entries
    read = reader.read("t", with_revision=True)
    assert as_revisions(read) == expected_state(entries)
    assert read.filter(read["v"] != read["id"]).height == 0


#: the long log every way of merging reads: more revisions than FEW_TASKS, fewer ids
ENTRIES, IDS = 120, 40
#: (FEW_TASKS, HELD_ROWS) of each way the Polars executor merges
MERGES = {
    "tree": (10_000, polars_executor.HELD_ROWS),
    "one pass": (0, polars_executor.HELD_ROWS),
    "one pass, ids apart": (0, -1),
}


@pytest.fixture(scope="module")
def long_log(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("long") / "ds"
    craft_log(root, ENTRIES, ids=IDS)
    return root


def ordered(frame) -> list[tuple]:
    return frame.sort(frame.columns, nulls_last=True).rows()


def reads(reader: DatasetReader) -> dict[str, object]:
    """Every kind of read of the crafted log, as plain values."""
    out: dict[str, object] = {"latest": ordered(reader.read("t", with_revision=True))}
    for back in (0, 1, ENTRIES - 50):
        out[f"HEAD~{back}"] = ordered(reader.read("t", at=f"HEAD~{back}"))
    out["as of"] = ordered(reader.read("t", as_of=START + timedelta(hours=ENTRIES // 2)))
    changes = reader.changes("t", since_sequence=ENTRIES // 3, with_revision=True)
    out["changes"] = (changes.is_reset, ordered(changes.df))
    out["history"] = ordered(reader.history("t"))
    return out


def test_every_way_of_merging_reads_the_same(long_log, monkeypatch):
    """The tree of anti-joins (up to FEW_TASKS revisions on a base) and the one-pass merge,
    with the newer rows held or their ids scanned apart, on a log of ENTRIES entries:
    state at the head, at positions and as of a time, changes, history."""
    results = {}
    for merge, (few, held) in MERGES.items():
        monkeypatch.setattr(polars_executor, "FEW_TASKS", few)
        monkeypatch.setattr(polars_executor, "HELD_ROWS", held)
        results[merge] = reads(DatasetReader(long_log))
    assert results["tree"] == results["one pass"] == results["one pass, ids apart"]
    latest = {row[0]: row[-3] for row in results["tree"]["latest"]}
    assert latest == expected_state(ENTRIES, ids=IDS)
    for back in (0, 1, ENTRIES - 50):
        at = {row[0] for row in results["tree"][f"HEAD~{back}"]}
        assert at == set(expected_state(ENTRIES - back, ids=IDS)), back


def test_describe_names_the_newest_revisions_on_a_long_base(long_log):
    done = CliRunner().invoke(cli, ["describe", str(long_log), "t"])
    assert done.exit_code == 0, done.output
    assert f"on base:     {ENTRIES - 1} revision(s)" in done.stdout
    assert f"… {ENTRIES - 21} earlier (--json lists them all)" in done.stdout
    assert name_of(ENTRIES) in done.stdout and name_of(ENTRIES - 20) not in done.stdout
    (row,) = json.loads(CliRunner().invoke(cli, ["describe", str(long_log), "t", "--json"]).stdout)
    assert len(row["on_base"]) == ENTRIES - 1 and row["rows"] == len(expected_state(ENTRIES, IDS))
