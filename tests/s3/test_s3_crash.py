"""A writer SIGKILLed mid-commit on S3 leaves the dataset consistent (docs/guides/engine.md).

Two writers (separate processes, each with its own JVM and s3a) commit revision
``crashed`` to copies of one dataset and are killed at a deterministic point: after their
data files are on S3 but before the conditional PUT of the log entry, and after the entry
but before description.parquet is rewritten.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pandas as pd
import pytest
from core.helpers import frame
from harness.dates import day
from harness.processes import kill_at_markers, start_victim

from revisions_assets import RevisionedDataset
from revisions_assets.core.log.revision_log import DESCRIPTION

from .crash_writer import CRASHED

pytestmark = [pytest.mark.s3, pytest.mark.slow]  # writer processes with their own JVMs

MODES = ("before_log_entry", "before_description")
ROWS = "id long, v long"


def revision_dirs(df) -> set[str]:
    """The revision folder of every file a DataFrame reads (dataset root/<revision>/<table>/)."""
    return {uri.rsplit("/", 3)[-3] for uri in df.inputFiles()}


@pytest.fixture(scope="module")
def crashed(s3_spark, s3_options, s3_env, s3_root_factory, tmp_path_factory):
    """{mode: dataset root} after killing one writer per mode at its kill point."""
    work = tmp_path_factory.mktemp("s3-crash")
    script = Path(__file__).with_name("crash_writer.py")
    victims, roots = {}, {}
    for mode in MODES:
        roots[mode] = root = s3_root_factory(mode)
        ds = RevisionedDataset(root, spark=s3_spark, id_columns=["id"], storage_options=s3_options)
        ds.commit(
            {"t": frame(s3_spark, [(i, 0) for i in range(6)], ROWS)},
            timestamp=day(0),
            is_major=True,
            name="base",
        )
        marker = work / f"{mode}.marker"
        command = [sys.executable, str(script), root, s3_options["endpoint_url"], str(marker), mode]
        victims[mode] = start_victim(command, marker, work / f"{mode}.log", s3_env)
    kill_at_markers(victims)
    return roots


def test_killed_before_the_log_entry_leaves_the_dataset_as_it_was(crashed, s3_spark, s3_options):
    root = crashed["before_log_entry"]
    ds = RevisionedDataset(root, spark=s3_spark, storage_options=s3_options)
    orphans = [f.path for f in ds.storage.list_files(CRASHED) if f.path.endswith(".parquet")]
    assert orphans, "the writer died before its data files reached S3"
    assert [r.name for r in ds.revisions()] == ["base"]
    df = ds.read("t")
    assert {r.id: r.v for r in df.collect()} == {i: 0 for i in range(6)}
    assert revision_dirs(df) == {"base"}
    desc = pd.read_parquet(io.BytesIO(ds.storage.read(DESCRIPTION)))
    assert list(desc["name"]) == ["base"]
    # the next commit takes sequence 2; the orphan files stay unread
    rev = ds.commit({"t": frame(s3_spark, [(3, 7)], ROWS)}, timestamp=day(2), is_major=False)
    assert rev.sequence == 2
    df = ds.read("t")
    assert CRASHED not in revision_dirs(df)
    assert {r.id: r.v for r in df.collect()} == {0: 0, 1: 0, 2: 0, 3: 7, 4: 0, 5: 0}


def test_killed_after_the_log_entry_leaves_exactly_the_new_revision(crashed, s3_spark, s3_options):
    root = crashed["before_description"]
    ds = RevisionedDataset(root, spark=s3_spark, storage_options=s3_options)  # heals on open
    records = ds.revisions()
    assert [(r.sequence, r.name) for r in records] == [(1, "base"), (2, CRASHED)]
    assert records[1].tables["t"].rows == 4
    stored = {f.path for f in ds.storage.list_files(CRASHED)}
    assert set(records[1].tables["t"].files) <= stored
    desc = pd.read_parquet(io.BytesIO(ds.storage.read(DESCRIPTION)))
    assert list(desc["name"]) == ["base", CRASHED]
    df = ds.read("t")
    assert revision_dirs(df) == {"base", CRASHED}
    assert {r.id: r.v for r in df.collect()} == {0: 100, 1: 100, 2: 100, 3: 100, 4: 0, 5: 0}
