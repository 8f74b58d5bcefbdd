"""The lost-race path of the commit protocol (docs/guides/engine.md), forced deterministically.

A writer's storage is the real ``LocalStorage`` with one twist: when the writer is about to
create its log entry (the put-if-absent of ``head + 1``, after it validated against the
log), a rival commit lands first, as delta-rs's history tests do. The writer's put-if-absent
then loses for real, and what it does next is the engine's re-validation: a plain commit
retries at the new head; a consumer whose position the rival moved, or a custom name the
rival took, is refused with nothing committed. A storage whose put-if-absent always loses
exhausts the retries (``CommitConflictError``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from harness.dates import day

from revisions_assets import RevisionedDataset, UpstreamPosition
from revisions_assets.core.errors import (
    CommitConflictError,
    ConsumerPositionConflictError,
    DuplicateRevisionNameError,
)
from revisions_assets.core.log.layout import LOG_DIR
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.base import LocalStorage
from revisions_assets.core.write import transaction

from .helpers import by_id, frame, tree

UP = "upstream-features"


class RivalFirstStorage(LocalStorage):
    """LocalStorage where the first log-entry creation first lets ``rival`` commit."""

    def __init__(self, root: str, rival: Callable[[], None]):
        super().__init__(root)
        self.rival = rival
        self.entries_tried: list[str] = []

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        if rel.startswith(f"{LOG_DIR}/") and rel.endswith(".json"):
            self.entries_tried.append(rel.rsplit("/", 1)[-1])
            if len(self.entries_tried) == 1:
                self.rival()  # validated already: the rival takes the sequence first
        return super().create_exclusive(rel, data)


class AlwaysLosingStorage(LocalStorage):
    """LocalStorage whose put-if-absent of a log entry always answers "already exists"."""

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        if rel.startswith(f"{LOG_DIR}/") and rel.endswith(".json"):
            return False
        return super().create_exclusive(rel, data)


def lost_races(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == transaction.__name__ and "lost the race" in r.getMessage()
    ]


@pytest.fixture
def base(spark, root):
    """A dataset with one major (sequence 1) and a plain handle for the rival."""
    ds = RevisionedDataset(root, spark=spark, id_columns=["id"])
    ds.commit(
        {"t": frame(spark, [(0, 0), (1, 0)], "id long, v long")},
        timestamp=day(0),
        is_major=True,
        upstream=[UpstreamPosition(UP, "f", 3)],
        name="base",
    )
    return ds


def test_a_plain_commit_that_lost_the_race_retries_at_the_new_head(spark, root, base, caplog):
    caplog.set_level(logging.INFO, logger=transaction.__name__)

    def rival():
        base.commit(
            {"t": frame(spark, [(1, 10)], "id long, v long")},
            timestamp=day(1),
            is_major=False,
            name="rival",
        )

    storage = RivalFirstStorage(root, rival)
    writer = RevisionedDataset(storage, spark=spark)
    rev = writer.commit(
        {"t": frame(spark, [(2, 20)], "id long, v long")},
        timestamp=day(2),
        is_major=False,
        name="writer",
    )
    # tried sequence 2, lost it to the rival, re-validated and landed at the new head + 1
    assert storage.entries_tried == [f"{2:020d}.json", f"{3:020d}.json"]
    assert len(lost_races(caplog)) == 1 and "sequence 2" in lost_races(caplog)[0]
    assert rev.sequence == 3
    assert [(r.sequence, r.name) for r in base.revisions()] == [
        (1, "base"),
        (2, "rival"),
        (3, "writer"),
    ]
    assert by_id(base.read("t", with_revision=True), "v", "_revision") == {
        0: (0, "base"),
        1: (10, "rival"),
        2: (20, "writer"),
    }


def test_a_consumer_whose_position_the_rival_moved_is_refused(spark, root, base, caplog):
    caplog.set_level(logging.INFO, logger=transaction.__name__)

    def rival():  # another run of the same consumer consumed 3 -> 5 first
        base.commit(
            {"t": frame(spark, [(1, 10)], "id long, v long")},
            timestamp=day(1),
            is_major=False,
            upstream=[UpstreamPosition(UP, "f", 5)],
            expected_positions={(UP, "f"): 3},
            name="rival",
        )

    writer = RevisionedDataset(RivalFirstStorage(root, rival), spark=spark)
    with pytest.raises(ConsumerPositionConflictError, match=r"from sequence 3, but 5 is already"):
        writer.commit(
            {"t": frame(spark, [(2, 20)], "id long, v long")},
            timestamp=day(2),
            is_major=False,
            upstream=[UpstreamPosition(UP, "f", 5)],
            expected_positions={(UP, "f"): 3},
            name="writer",
        )
    assert len(lost_races(caplog)) == 1  # the refusal came from the re-check, not the first
    assert [r.name for r in base.revisions()] == ["base", "rival"]
    assert base.inspect.upstream_position(UP, "f") == 5
    assert not any(p.startswith("writer/") for p in tree(root))  # its folder is cleaned up
    assert by_id(base.read("t"), "v") == {0: (0,), 1: (10,)}


def test_a_custom_name_taken_by_the_rival_is_refused_on_the_re_check(spark, root, base, caplog):
    """Through the API the folder claim stops a second writer of a name first, so the rival
    here appends its entry through the log layer (as an import or another tool could); the
    writer's re-validation after the lost race must still see the name taken."""
    caplog.set_level(logging.INFO, logger=transaction.__name__)
    other = base.revision("base")

    def rival():
        log = RevisionLog(LocalStorage(root))
        log.refresh()
        taken = type(other)(
            **{**other.__dict__, "name": "nightly", "sequence": 2, "is_major": False}
        )
        assert log.try_append(taken)

    writer = RevisionedDataset(RivalFirstStorage(root, rival), spark=spark)
    with pytest.raises(DuplicateRevisionNameError, match="nightly"):
        writer.commit(
            {"t": frame(spark, [(2, 20)], "id long, v long")},
            timestamp=day(2),
            is_major=False,
            name="nightly",
        )
    assert len(lost_races(caplog)) == 1
    assert [r.name for r in RevisionedDataset(root, spark=spark).revisions()] == [
        "base",
        "nightly",
    ]
    assert not any(p.startswith("nightly/") for p in tree(root))  # the loser's folder is gone


def test_retries_run_out_with_commit_conflict_and_nothing_committed(
    spark, root, base, caplog, monkeypatch
):
    caplog.set_level(logging.INFO, logger=transaction.__name__)
    monkeypatch.setattr(transaction, "MAX_COMMIT_ATTEMPTS", 3)  # the backoff is real: keep it short
    before = tree(root)
    writer = RevisionedDataset(AlwaysLosingStorage(root), spark=spark)
    with pytest.raises(CommitConflictError, match="after 3 attempts") as error:
        writer.commit(
            {"t": frame(spark, [(2, 20)], "id long, v long")},
            timestamp=day(2),
            is_major=False,
            name="doomed",
        )
    assert type(error.value) is CommitConflictError  # not a consumer conflict
    assert len(lost_races(caplog)) == 3
    fresh = RevisionedDataset(root, spark=spark)
    assert [r.name for r in fresh.revisions()] == ["base"]
    assert tree(root) == before  # no folder, no entry: nothing left behind
    assert by_id(fresh.read("t"), "v") == {0: (0,), 1: (0,)}
