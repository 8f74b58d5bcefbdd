"""read_only=True: opening never writes (no description healing); writes are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness.dates import day

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import ReadOnlyDatasetError
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage

from .helpers import frame, stage_revision, tree


def test_a_read_only_handle_never_writes(spark, root):
    log = RevisionLog(open_storage(root))
    stage_revision(log, root, "r1", day(0), True, {(1,): {"v": 1}})
    log.after_commit()
    stage_revision(log, root, "r2", day(1), False, {(1,): {"v": 2}})  # a writer died here
    description = Path(root, "description.parquet")
    stale = description.read_bytes()
    files = tree(root)

    ds = RevisionedDataset(root, spark=spark, read_only=True)
    assert [r.name for r in ds.revisions()] == ["r1", "r2"]  # reads see the whole log
    with pytest.raises(ReadOnlyDatasetError, match="commit.*read_only=True"):
        ds.commit({"t": frame(spark, [(1, 3)], "id long, v long")}, day(2), False, "v1")
    assert description.read_bytes() == stale and tree(root) == files

    RevisionedDataset(root)  # a writable handle heals the stale description on open
    assert description.read_bytes() != stale
