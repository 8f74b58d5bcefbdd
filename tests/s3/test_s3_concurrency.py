"""Concurrent writers on S3 (docs/guides/engine.md): three processes commit through
RevisionedDataset.commit.

Only S3's conditional write arbitrates: every sequence ends up taken exactly once, by
exactly one revision, every revision of every writer is there once, and the writers really
lost races (the engine's own count, above zero) and landed through its re-validation.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pandas as pd
import pytest
from harness.processes import race

from revisions_assets.core.log.revision_log import DESCRIPTION, RevisionLog
from revisions_assets.core.storage.s3 import S3Storage

pytestmark = [pytest.mark.s3, pytest.mark.slow]

WRITERS = 3
COMMITS = 4
TIMEOUT_S = 600


def test_three_engine_writers_race_for_one_log_gap_free(s3_root, s3_options, s3_env, tmp_path):
    script = Path(__file__).with_name("commit_writer.py")
    endpoint = s3_options["endpoint_url"]
    commands = [
        [sys.executable, str(script), s3_root, endpoint, str(w), str(COMMITS), str(WRITERS)]
        + [str(tmp_path)]
        for w in range(WRITERS)
    ]
    outputs = race(commands, tmp_path, s3_env, run_timeout=TIMEOUT_S)

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
    print(f"lost races across writers (the engine's count): {lost_races}")
    assert lost_races > 0, "the writers never contended: the race proves nothing"

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
    for r in records:  # every committed file is on S3
        assert all(storage.exists(f) for w in r.tables.values() for f in w.files)
    description = pd.read_parquet(io.BytesIO(storage.read(DESCRIPTION)))
    assert list(description["sequence"]) == list(range(1, total + 1))
    assert list(description["name"]) == [r.name for r in records]
