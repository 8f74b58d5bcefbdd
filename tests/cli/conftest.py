"""Datasets for the command-line tests, staged through the log layer (no Spark job each).

``features`` holds the docs/concepts/read-semantics.md worked example in table ``t`` (``v`` = the
day of the
revision), then a minor that sets id 9 and deletes id 10, then a major of a second table
``u`` whose description rewrite is left out, as if its writer died right after its
commit: ``description.parquet`` stays stale, so any command that wrote would be caught.
``scores`` is a consumer that recorded position 3 (the major r4) in ``features#t``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from core.helpers import stage_revision, tree
from core.legacy_layout import worked_example
from harness.dates import day

from revisions_assets import UpstreamPosition
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage

TOMB = None
#: what an error in the command line's terms never shows: Python calls, arguments and lists
PYTHON_WORDS = ("():", "since_sequence", "until_sequence", "as_of", "known_at", "['", "int()")
#: (name, day, major, {id: v or TOMB}) of table t
REVISIONS = [
    ("r0", 0, True, {i: 0 for i in range(0, 5)}),
    ("r2", 2, False, {i: 2 for i in range(2, 7)}),
    ("r4", 4, True, {i: 4 for i in range(4, 9)}),
    ("r6", 6, False, {i: 6 for i in range(6, 11)}),
    ("r7", 7, False, {9: 7, 10: TOMB}),
]


@dataclass(frozen=True)
class Staged:
    features: str
    scores: str
    # a root of the original layout (the read semantics' worked example, written by pandas)
    legacy: str

    def snapshot(self) -> dict[str, bytes]:
        """Every file of both datasets with its bytes: commands must never change them."""
        out = {}
        for root in (self.features, self.scores):
            for rel in tree(root):
                out[f"{root}/{rel}"] = Path(root, rel).read_bytes()
        return out


def stage(base: Path) -> Staged:
    base = base.resolve()
    features, scores = str(base / "features"), str(base / "scores")
    log = RevisionLog(open_storage(features))
    for name, n, major, rows in REVISIONS:
        keyed = {(i,): None if v is TOMB else {"v": v} for i, v in rows.items()}
        stage_revision(log, features, name, day(n), major, keyed)
    log.after_commit()
    stage_revision(log, features, "u1", day(8), True, {(1,): {"v": 1}}, table="u")
    consumer = RevisionLog(open_storage(scores))
    position = UpstreamPosition(open_storage(features).uri, "t", 3)
    stage_revision(
        consumer, scores, "s1", day(5), True, {(4,): {"v": 4}}, table="s", upstream=[position]
    )
    consumer.after_commit()
    legacy = base / "legacy"
    worked_example(legacy)
    return Staged(features, scores, str(legacy))


@pytest.fixture(scope="session")
def staged(tmp_path_factory) -> Staged:
    return stage(tmp_path_factory.mktemp("cli"))


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


#: (name, logical time, commit time, major, {id: v}) of table t: two days of features, then a
#: deploy on Wednesday whose new code (v x 10) re-ran them as one major stamped Monday
REDEPLOYED = [
    ("sun", "2024-03-03", "2024-03-03T06:00", True, {1: 1, 2: 1}),
    ("mon", "2024-03-04", "2024-03-04T06:00", False, {2: 2}),
    ("rerun", "2024-03-04", "2024-03-06T10:00", True, {1: 10, 2: 20}),
]


@pytest.fixture(scope="session")
def redeployed(tmp_path_factory) -> str:
    """A dataset whose logical and commit times tell two stories (``--as-of``, ``--known-at``)."""
    root = str(tmp_path_factory.mktemp("cli") / "redeployed")
    log = RevisionLog(open_storage(root))
    for name, stamped, committed, major, rows in REDEPLOYED:
        keyed = {(i,): {"v": v} for i, v in rows.items()}
        stage_revision(log, root, name, at(stamped), major, keyed, committed_at=at(committed))
    log.after_commit()
    return root
