"""The tests' calendar: ``day(n)`` and ``instant(k)`` count from one epoch.

Day 0 is 2020-01-01 UTC (the worked example's calendar) unless a test passes its own
``epoch``: the day before the 1st of a month makes ``day(d, epoch)`` the d-th of that
month, a naive epoch gives naive timestamps (the original writer's). ``instant(k)``
counts in half days by default, the property tests' grid: revisions on even k, queries
on any k.

(Not named ``calendar``: a worker launched by path from this folder has it first on its
path, and would shadow the standard library's ``calendar``.)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

#: day 0 of the tests' calendar
EPOCH = datetime(2020, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
HALF_DAY = timedelta(hours=12)
DAY = timedelta(days=1)


def day(n: float, epoch: datetime = EPOCH) -> datetime:
    """``n`` days after ``epoch`` (fractions allowed: ``day(2.5)`` is noon)."""
    return epoch + timedelta(days=n)


def instant(k: int, step: timedelta = HALF_DAY, epoch: datetime = EPOCH) -> datetime:
    """The ``k``-th step after ``epoch`` (``k`` may be negative: before day 0)."""
    return epoch + k * step
