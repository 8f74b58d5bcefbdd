"""Concurrent writers on S3 (SPEC §4): four processes race 25 commits each for one log.

Only S3's conditional write arbitrates: every sequence 1..100 ends up taken exactly once,
by exactly one revision, and every revision of every writer is there.
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

from revisions_assets.core.log import CHECKPOINT_INTERVAL, DESCRIPTION, RevisionLog, checkpoint_path
from revisions_assets.core.s3 import S3Storage

pytestmark = pytest.mark.s3

WRITERS = 4
COMMITS = 25
TIMEOUT_S = 300


def test_four_processes_commit_25_revisions_each_gap_free(s3_root, s3_options, tmp_path):
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": s3_options["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": s3_options["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": s3_options["region_name"],
    }
    go = tmp_path / "go"
    script = Path(__file__).with_name("log_writer.py")
    procs, outputs = [], []
    for w in range(WRITERS):
        out = tmp_path / f"out-{w}"
        outputs.append(out)
        with open(out, "w") as stdout, open(tmp_path / f"err-{w}", "w") as stderr:
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        str(script),
                        s3_root,
                        s3_options["endpoint_url"],
                        str(w),
                        str(COMMITS),
                        str(go),
                    ],
                    stdout=stdout,
                    stderr=stderr,
                    env=env,
                )
            )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not all((tmp_path / f"ready-{w}").exists() for w in range(WRITERS)):
            assert all(p.poll() is None for p in procs), "a writer died before the start"
            assert time.monotonic() < deadline, "writers not ready in time"
            time.sleep(0.02)
        go.touch()  # everyone imported and connected: now they race
        for proc in procs:
            proc.wait(timeout=TIMEOUT_S)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for w, proc in enumerate(procs):
        assert proc.returncode == 0, (tmp_path / f"err-{w}").read_text()[-3000:]

    total = WRITERS * COMMITS
    claimed = {}
    lost_races = 0
    for out in outputs:
        for line in out.read_text().splitlines():
            kind, *rest = line.split()
            if kind == "commit":
                sequence, name = int(rest[0]), rest[1]
                assert sequence not in claimed, f"sequence {sequence} claimed twice"
                claimed[sequence] = name
            else:
                lost_races += int(rest[0])
    assert sorted(claimed) == list(range(1, total + 1))
    print(f"lost races (412 answers) across writers: {lost_races}")

    storage = S3Storage(s3_root, **s3_options)
    log = RevisionLog(storage)
    records = log.refresh()
    assert [r.sequence for r in records] == list(range(1, total + 1))
    assert {r.sequence: r.name for r in records} == claimed  # what each writer was told
    assert sorted(r.name for r in records) == sorted(
        f"w{w}-{i:03d}" for w in range(WRITERS) for i in range(COMMITS)
    )
    for w in range(WRITERS):  # each writer's own commits stay in its order
        mine = [int(r.properties["i"]) for r in records if r.properties["writer"] == str(w)]
        assert mine == list(range(COMMITS))
    assert storage.exists(checkpoint_path(CHECKPOINT_INTERVAL))
    description = pd.read_parquet(io.BytesIO(storage.read(DESCRIPTION)))
    assert list(description["sequence"]) == list(range(1, total + 1))
    assert list(description["name"]) == [r.name for r in records]
