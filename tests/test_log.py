"""The description log without Spark: exclusive appends, checkpoints, description.parquet."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from datetime import datetime, timezone

import pandas as pd
import pytest

from revisions_assets.core.errors import CorruptLogError
from revisions_assets.core.log import revision_log as log_module
from revisions_assets.core.log.consumers import consumer_position
from revisions_assets.core.log.records import (
    Revision,
    TableWrite,
    UpstreamPosition,
    located_dataset,
    stored_dataset,
)
from revisions_assets.core.log.revision_log import (
    DESCRIPTION,
    RevisionLog,
    checkpoint_path,
    entry_path,
    read_parquet_bytes,
)
from revisions_assets.core.storage.base import LocalStorage


def record(seq: int, name: str | None = None) -> Revision:
    return Revision(
        name=name or f"rev{seq}",
        timestamp=datetime(2020, 1, 1, tzinfo=timezone.utc),
        is_major=seq == 1,
        sequence=seq,
        committed_at=datetime(2020, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc),
        tables={
            "t": TableWrite(
                ("id",),
                '{"fields":[],"type":"struct"}',
                "v1",
                3,
                1,
                (f"rev{seq}/t/part-0.parquet",),
                42,
            )
        },
        version="v1",
        producer={"asset_key": "a/b"},
        upstream=(UpstreamPosition("/up", "x", seq),),
    )


def test_record_round_trips_through_json():
    r = record(7)
    assert Revision.from_json(r.to_json()) == r


def test_exclusive_append_refuses_a_taken_sequence(tmp_path):
    storage = LocalStorage(tmp_path)
    a, b = RevisionLog(storage), RevisionLog(storage)
    a.refresh(), b.refresh()
    assert a.try_append(record(1, "from-a"))
    assert not b.try_append(record(1, "from-b"))  # b's view was stale: refused, not overwritten
    assert [r.name for r in b.refresh()] == ["from-a"]
    assert b.try_append(record(2, "from-b"))
    assert [r.name for r in a.refresh()] == ["from-a", "from-b"]


def test_checkpoints_bound_what_opening_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(log_module, "CHECKPOINT_INTERVAL", 10)
    storage = LocalStorage(tmp_path)
    writer = RevisionLog(storage)
    for seq in range(1, 26):
        assert writer.try_append(record(seq))
        writer.after_commit()
    assert storage.exists(checkpoint_path(20))
    reads = []
    original = storage.read
    monkeypatch.setattr(
        storage, "read", lambda rel, limit=None: reads.append(rel) or original(rel, limit)
    )
    reader = RevisionLog(storage)
    assert [r.sequence for r in reader.refresh()] == list(range(1, 26))
    entries_read = [p for p in reads if p.endswith(".json")]
    assert entries_read == [entry_path(s) for s in range(21, 27)]  # 21..25 and the miss at 26


def test_description_parquet_is_current_and_plain(tmp_path):
    storage = LocalStorage(tmp_path)
    writer = RevisionLog(storage)
    for seq in range(1, 4):
        writer.try_append(record(seq))
        writer.after_commit()
    frame = pd.read_parquet(tmp_path / DESCRIPTION)
    assert list(frame["name"]) == ["rev1", "rev2", "rev3"]
    assert {"name", "timestamp", "is_major", "version"} <= set(frame.columns)
    assert str(frame["timestamp"].dt.tz) == "UTC"
    assert writer.description_is_current()


def test_log_parquet_reads_name_a_missing_column(tmp_path):
    storage = LocalStorage(tmp_path)
    writer = RevisionLog(storage)
    writer.try_append(record(1))
    writer.after_commit()
    raw = (tmp_path / DESCRIPTION).read_bytes()
    assert read_parquet_bytes(raw, columns=["name"]).column("name").to_pylist() == ["rev1"]
    with pytest.raises(KeyError, match="'carries'"):
        read_parquet_bytes(raw, columns=["name", "carries"])


def test_a_stale_description_is_detected(tmp_path):
    storage = LocalStorage(tmp_path)
    writer = RevisionLog(storage)
    writer.try_append(record(1))
    writer.after_commit()
    writer.try_append(record(2))  # the writer "dies" before its upkeep
    assert [r.sequence for r in RevisionLog(storage).refresh()] == [1, 2]
    fresh = RevisionLog(storage)
    fresh.refresh()
    assert not fresh.description_is_current()
    fresh.publish_description()
    assert len(pd.read_parquet(tmp_path / DESCRIPTION)) == 2


def test_a_damaged_checkpoint_only_costs_a_longer_probe(tmp_path, monkeypatch):
    monkeypatch.setattr(log_module, "CHECKPOINT_INTERVAL", 5)
    storage = LocalStorage(tmp_path)
    writer = RevisionLog(storage)
    for seq in range(1, 8):
        writer.try_append(record(seq))
        writer.after_commit()
    (tmp_path / checkpoint_path(5)).write_bytes(b"not parquet")
    assert [r.sequence for r in RevisionLog(storage).refresh()] == list(range(1, 8))


def test_an_unreadable_entry_is_reported(tmp_path):
    storage = LocalStorage(tmp_path)
    storage.write(entry_path(1), b"{broken")
    with pytest.raises(CorruptLogError, match="00000000000000000001.json"):
        RevisionLog(storage).refresh()


def test_positions_name_upstreams_relative_to_a_shared_folder_and_survive_a_copy(tmp_path):
    """A consumer's log stores an upstream root that shares a folder with its own root as
    a relative path (an S3 bucket counts as no shared folder, like the filesystem root):
    a tree copied elsewhere keeps its positions; in memory, positions name roots."""
    tree = tmp_path / "tree"
    scores, features = tree / "scores", str((tree / "features").resolve())
    outside = "/elsewhere/features"
    upstream = (UpstreamPosition(features, "f", 3), UpstreamPosition(outside, "g", 2))
    log = RevisionLog(LocalStorage(scores))
    log.refresh()
    assert log.try_append(replace(record(1), upstream=upstream))
    assert log.try_append(replace(record(2), upstream=upstream))
    log.write_checkpoint(1)
    log.publish_description()
    stored = json.loads((scores / entry_path(2)).read_text())["upstream"]
    assert [p["dataset"] for p in stored] == ["../features", outside]
    assert log.records[1].upstream == upstream
    description = read_parquet_bytes((scores / DESCRIPTION).read_bytes())
    assert json.loads(description.column("upstream")[1].as_py()) == {
        "../features#f": 3,
        "/elsewhere/features#g": 2,
    }

    copied = tmp_path / "copy"
    shutil.copytree(tree, copied)
    moved = str((copied / "features").resolve())
    reopened = RevisionLog(LocalStorage(copied / "scores")).refresh()  # checkpoint + entry
    assert [r.upstream for r in reopened] == [
        (UpstreamPosition(moved, "f", 3), UpstreamPosition(outside, "g", 2))
    ] * 2
    assert consumer_position(reopened, moved, "f") == 3
    assert consumer_position(reopened, features, "f") == 0  # the original is not it


def test_positions_recorded_absolute_stay_absolute(tmp_path):
    """Logs written before positions were relative read as they always did."""
    storage = LocalStorage(tmp_path / "tree" / "scores")
    features = str((tmp_path / "tree" / "features").resolve())
    old = replace(record(1), upstream=(UpstreamPosition(features, "f", 3),))
    assert storage.create_exclusive(entry_path(1), old.to_json().encode())  # no root: absolute
    (read,) = RevisionLog(storage).refresh()
    assert read.upstream == old.upstream and '"dataset":"/' in read.to_json()


@pytest.mark.parametrize(
    "root, upstream, stored",
    [
        ("s3://b/p/scores", "s3://b/p/features", "../features"),
        ("s3://b/p/x/scores", "s3://b/p/y/features", "../../y/features"),
        ("s3://b/p/scores", "s3://b/q/features", "s3://b/q/features"),  # no shared folder
        ("s3://b/scores", "s3://b/features", "s3://b/features"),  # the bucket alone
        ("s3://b/p/scores", "s3://c/p/features", "s3://c/p/features"),
        ("/d/scores", "s3://b/d/features", "s3://b/d/features"),
        ("/d/own", "/d/own", "."),  # a dataset consuming itself
        ("/d", "/d/sub/x", "./sub/x"),
        ("/d/scores", "/d/x/../features", "/d/x/../features"),  # only exact spellings
        ("/d/scores", "up", "up"),
    ],
)
def test_stored_upstream_roots(root, upstream, stored):
    assert stored_dataset(root, upstream) == stored
    assert located_dataset(root, stored) == upstream
