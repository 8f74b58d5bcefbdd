"""The racers' side of ``processes.race``: count lost races, and line up the log appends.

Imported by the processes the race tests start (on tests/ through ``PYTHONPATH``).

``count_lost_races()`` counts the engine's own record of each lost race (one INFO record
of ``revisions_assets.core.write.transaction`` per put-if-absent that found the sequence taken),
so a test can insist that the writers really contended, through ``RevisionedDataset.commit``.

``align_appends(work, writer, writers)`` makes every commit of this writer wait, after its
data is written and before it validates against the log and appends, until every writer
reached the same commit: the appends of one round start together, so they contend for one
sequence and all but one must lose, re-validate and retry.

``landing_at(point, land)`` runs another command in the middle of the next one, in one
process: the maintenance race tests' deterministic interleavings.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.maintain import compaction, purge
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


#: where ``landing_at`` lets another command land in the command under test: before its
#: first data file is written (after it planned on its snapshot of the log), or before its
#: first attempt to append its log entry (after everything it writes is written)
POINTS = ("write", "append")


@contextmanager
def landing_at(point: str, land: Callable[[], Any]) -> Iterator[list[Any]]:
    """Run ``land`` (another command, on its own handle) once, in this thread, at ``point``
    of the next command that reaches it: a deterministic interleaving of two commands.

    Yields a list that holds what ``land`` returned once it ran (empty: the command under
    test never reached the point). ``write`` patches ``write_observed``, through which every
    commit, compaction and purge writes its files (a vacuum writes none); ``append`` patches
    ``RevisionLog.try_append``, which every kind of entry goes through: the entry built
    before ``land`` loses its sequence, so the command re-validates against what landed."""
    landed: list[Any] = []
    pending = [land]

    def first() -> None:
        if pending:
            landed.append(pending.pop()())

    patches: list[tuple[Any, str, Any]] = []
    if point == "write":
        for module in (transaction, compaction, purge):
            original = module.write_observed

            def write_observed(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                first()
                return _original(*args, **kwargs)

            patches.append((module, "write_observed", write_observed))
    elif point == "append":
        original_append = RevisionLog.try_append

        def try_append(self: RevisionLog, record: Any) -> bool:
            first()
            return original_append(self, record)

        patches.append((RevisionLog, "try_append", try_append))
    else:
        raise ValueError(f"point {point!r} is not one of {POINTS}")
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, patched in patches:
        setattr(owner, name, patched)
    try:
        yield landed
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
