"""A writer SIGKILLed mid-commit on S3 leaves the dataset consistent (SPEC §4).

Two writers (separate processes, each with its own JVM and s3a) commit revision
``crashed`` to copies of one dataset and are killed at a deterministic point: after their
data files are on S3 but before the conditional PUT of the log entry, and after the entry
but before description.parquet is rewritten.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from core.helpers import day, frame
from core.test_crash import kill_group

from revisions_assets import RevisionedDataset
from revisions_assets.core.log import DESCRIPTION

from .crash_writer import CRASHED

pytestmark = pytest.mark.s3

MODES = ("before_log_entry", "before_description")
MARKER_TIMEOUT_S = 600
ROWS = "id long, v long"


def revision_dirs(df) -> set[str]:
    """The revision folder of every file a DataFrame reads (dataset root/<revision>/<table>/)."""
    return {uri.rsplit("/", 3)[-3] for uri in df.inputFiles()}


@pytest.fixture(scope="module")
def crashed(s3_spark, s3_options, s3_root_factory, tmp_path_factory):
    """{mode: dataset root} after killing one writer per mode at its kill point."""
    work = tmp_path_factory.mktemp("s3-crash")
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": s3_options["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": s3_options["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": s3_options["region_name"],
    }
    script = Path(__file__).with_name("crash_writer.py")
    runs = {}
    for mode in MODES:
        root = s3_root_factory(mode)
        ds = RevisionedDataset(root, spark=s3_spark, id_columns=["id"], storage_options=s3_options)
        ds.commit(
            {"t": frame(s3_spark, [(i, 0) for i in range(6)], ROWS)},
            timestamp=day(0),
            is_major=True,
            name="base",
        )
        marker = work / f"{mode}.marker"
        with open(work / f"{mode}.log", "w") as out:
            proc = subprocess.Popen(
                [sys.executable, str(script), root, s3_options["endpoint_url"], str(marker), mode],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: the kill takes the JVM too
            )
        runs[mode] = (root, marker, proc)
    try:
        deadline = time.monotonic() + MARKER_TIMEOUT_S
        pending = dict(runs)
        while pending:
            for mode, (_root, marker, proc) in list(pending.items()):
                if marker.exists():
                    kill_group(proc)
                    del pending[mode]
                elif proc.poll() is not None:
                    output = (work / f"{mode}.log").read_text()[-3000:]
                    pytest.fail(f"{mode}: writer exited ({proc.returncode}):\n{output}")
            assert time.monotonic() < deadline, f"no marker after {MARKER_TIMEOUT_S}s: {pending}"
            time.sleep(0.05)
    finally:
        for _root, _marker, proc in runs.values():
            if proc.poll() is None:
                kill_group(proc)
    return {mode: root for mode, (root, _m, _p) in runs.items()}


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
