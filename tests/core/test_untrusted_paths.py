"""A log that names a path with a pattern character: refused when the log is read, reported
by verify, and never expanded by either engine (issue 53, "Glob characters escape the root").

Spark and Hadoop expand ``*?[]{}`` and backslash escapes in a path, Polars ``*?[]``, after
the path check that rejects ``..`` segments. Both cases below are the issue's, literally:
crafted entries and folders under a temporary root, with a sacrificial ``outside`` folder
beside it whose rows must never come back.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from harness.dates import day

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.cli import cli
from revisions_assets.core.errors import CorruptLogError, PathEscapeError
from revisions_assets.core.log.layout import entry_path
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.maintain.verify import verify
from revisions_assets.core.read.execute import polars as polars_executor
from revisions_assets.core.read.execute.download_cache import DownloadCache
from revisions_assets.core.read.execute.spark_scan import Scanner, parquet_files
from revisions_assets.core.read.plan.scans import ScanTask
from revisions_assets.core.read.plan.schema import parse_schema
from revisions_assets.core.storage.backends import open_storage
from revisions_assets.core.storage.base import LocalStorage

from .helpers import STAGED_SCHEMA, stage_revision, tree

SECRET = 666  # the value of the outside rows: never read


def write_rows(path: Path, ids: list[int], value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = {
        "id": pa.array(ids, pa.int64()),
        "v": pa.array([value] * len(ids), pa.int64()),
        "_deleted": pa.array([False] * len(ids)),
    }
    pq.write_table(pa.table(rows), path)


def crafted(base: Path, named: str) -> Path:
    """``base/data/ds``: a major of ids 0-2, then a minor whose entry names ``named``, with
    the outside rows in ``base/outside``."""
    root = base / "data" / "ds"
    log = RevisionLog(open_storage(str(root)))
    log.refresh()
    first = stage_revision(log, str(root), "r1", day(0), True, {(i,): {"v": 0} for i in range(3)})
    write = dataclasses.replace(first.tables["t"], files=(named,), rows=1)
    minor = dataclasses.replace(
        first, name="r2", is_major=False, sequence=2, timestamp=day(1), tables={"t": write}
    )
    minor = dataclasses.replace(minor, raw=None)
    assert log.try_append(minor)
    log.after_commit()
    return root


@pytest.fixture
def brace_case(tmp_path) -> tuple[Path, str]:
    """``{../..,b}/outside/secret.parquet``: literal folders ``{..`` and ``..,b}`` hold a
    decoy, so the file exists as named; a glob reads ``root/../../outside/secret.parquet``."""
    named = "{../..,b}/outside/secret.parquet"
    root = crafted(tmp_path, named)
    write_rows(root / named, [1], 1)
    write_rows(tmp_path / "outside" / "secret.parquet", [99], SECRET)
    return root, named


@pytest.fixture
def bracket_case(tmp_path) -> tuple[Path, str]:
    """``r2/t/[x].parquet`` exists as named, beside ``x.parquet``: a symbolic link out of the
    root, which the pattern ``[x]`` matches."""
    named = "r2/t/[x].parquet"
    root = crafted(tmp_path, named)
    write_rows(root / named, [1], 1)
    write_rows(tmp_path / "outside" / "x.parquet", [99], SECRET)
    os.symlink(tmp_path / "outside" / "x.parquet", root / "r2" / "t" / "x.parquet")
    return root, named


def cli_run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout + result.stderr


@pytest.mark.parametrize("case", ["brace_case", "bracket_case"])
def test_a_pattern_in_a_logged_path_is_refused_everywhere(case, spark, request):
    root, named = request.getfixturevalue(case)
    before = tree(str(root.parent.parent))
    for open_it in (lambda: RevisionedDataset(str(root), spark), lambda: DatasetReader(root)):
        with pytest.raises(CorruptLogError) as refused:
            open_it()
        assert entry_path(2) in str(refused.value) and named in str(refused.value)
        assert "pattern character" in str(refused.value)
    # the commands the issue names: show reads nothing, compact copies nothing, purge fails
    # with the log's error (not a KeyError); all exit 3, a damaged dataset
    for command in (
        ["show", str(root), "t"],
        ["compact", str(root)],
        ["purge", str(root), "t", "--id", "id=99", "--reason", "x"],
    ):
        code, output = cli_run(*command)
        assert code == 3, (command, output)
        assert "pattern character" in output and str(SECRET) not in output
    findings = {(f.kind, f.severity, f.path) for f in verify(root)}
    assert ("pattern_path", "error", entry_path(2)) in findings
    # the decoy folder is the damaged entry's: never advised for deletion
    assert not [f for f in findings if f[0] == "orphan_folder"]
    assert tree(str(root.parent.parent)) == before


def test_the_download_cache_never_keeps_a_pattern(tmp_path):
    cache = DownloadCache(tmp_path / "cache", None)
    for named in ("r2/t/[x].parquet", "{../..,b}/outside/secret.parquet", "r2/t/*.parquet"):
        with pytest.raises(PathEscapeError, match="pattern character"):
            cache.path(named)


def test_both_engines_open_data_files_by_their_literal_path(bracket_case, spark):
    """Past the log's check (a plan naming the path directly): Spark and Polars read the
    file as named, never the sibling the pattern matches."""
    root, named = bracket_case
    storage = LocalStorage(root)
    schema = parse_schema(STAGED_SCHEMA)
    task = ScanTask("r2", 2, day(1), (named,), schema, 1, 0, 1, 0)
    spark_rows = Scanner(spark, storage, schema, {2: (2, 0, "r2", 0)}).revisions([task], False)
    assert [(r.id, r.v) for r in spark_rows.select("id", "v").collect()] == [(1, 1)]
    uri = storage.spark_uri(named)
    assert [r.v for r in parquet_files(spark, [uri]).collect()] == [1]

    def local(files):
        return [str(storage.local_path(f)) for f in files]

    polars_rows = polars_executor.Scanner(local, schema, {}).stacked([task]).collect()
    assert polars_rows.select("id", "v").rows() == [(1, 1)]
    ids = polars_executor.Scanner(local, schema, {}).ids_of([task], ["id"]).collect()
    assert ids["id"].to_list() == [1]
