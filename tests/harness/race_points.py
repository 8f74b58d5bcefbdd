"""The racers' side of ``processes.race``: count lost races, and line up the log appends.

Imported by the processes the race tests start (on tests/ through ``PYTHONPATH``).

``count_lost_races()`` counts the engine's own record of each lost race (one INFO record
of ``revisions_assets.core.write.transaction`` per put-if-absent that found the sequence taken),
so a test can insist that the writers really contended, through ``RevisionedDataset.commit``.

``align_appends(work, writer, writers)`` makes every commit of this writer wait, after its
data is written and before it validates against the log and appends, until every writer
reached the same commit: the appends of one round start together, so they contend for one
sequence and all but one must lose, re-validate and retry.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from revisions_assets.core.write import transaction
from revisions_assets.core.write.transaction import CommitTransaction

LOST_RACE = "lost the race"


class _LostRaces(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if LOST_RACE in record.getMessage():
            self.count += 1


def count_lost_races() -> _LostRaces:
    """A handler whose ``count`` is the number of lost races of this process so far."""
    handler = _LostRaces()
    logger = logging.getLogger(transaction.__name__)
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return handler


def align_appends(work: Path, writer: int, writers: int) -> None:
    original = CommitTransaction.append
    rounds = iter(range(1_000_000))

    def aligned(self: CommitTransaction, *args: Any, **kwargs: Any) -> Any:
        n = next(rounds)
        (work / f"round-{n}-{writer}").touch()
        while not all((work / f"round-{n}-{w}").exists() for w in range(writers)):
            time.sleep(0.002)
        return original(self, *args, **kwargs)

    CommitTransaction.append = aligned  # type: ignore[method-assign]
