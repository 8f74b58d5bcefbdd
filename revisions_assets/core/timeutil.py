"""The one place where user-supplied times become timezone-aware UTC datetimes."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pandas as pd

from .errors import NaiveTimestampError

TimeLike = datetime | pd.Timestamp | str


def to_utc(value: TimeLike, what: str = "timestamp") -> datetime:
    """Return ``value`` as an aware UTC ``datetime``.

    Naive values are refused (never read as local time): pass ``tzinfo=timezone.utc``
    or an ISO string with an offset such as ``2020-01-03T00:00:00Z``.
    """
    if isinstance(value, str):
        try:
            parsed = pd.Timestamp(value)
        except ValueError as exc:
            raise NaiveTimestampError(f"{what}: cannot parse {value!r} as a time") from exc
        value = parsed
    if isinstance(value, pd.Timestamp):
        if value.tzinfo is None:
            raise NaiveTimestampError(
                f"{what} {value!r} has no timezone; pass an aware time such as "
                f"'{value.isoformat()}+00:00' (revisions-assets never assumes local time)"
            )
        return value.tz_convert("UTC").to_pydatetime()
    if isinstance(value, datetime):
        if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
            raise NaiveTimestampError(
                f"{what} {value.isoformat()} has no timezone; pass e.g. "
                f"datetime(..., tzinfo=timezone.utc) (revisions-assets never assumes local time)"
            )
        return value.astimezone(UTC)
    if isinstance(value, date):
        raise NaiveTimestampError(
            f"{what} {value.isoformat()} is a date without a timezone; pass an aware datetime"
        )
    raise TypeError(f"{what} must be a datetime, pandas Timestamp or ISO string, got {value!r}")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_micros(value: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (the log's time unit)."""
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    """The aware UTC datetime of ``micros`` (exact: integer arithmetic, no float)."""
    return _EPOCH + timedelta(microseconds=micros)


def now_utc() -> datetime:
    return datetime.now(UTC)
