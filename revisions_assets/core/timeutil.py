"""The one place where user-supplied times become timezone-aware UTC datetimes."""

from __future__ import annotations

import sys
from datetime import UTC, date, datetime, timedelta

from .errors import InvalidTimestampError, NaiveTimestampError
from .uris import describe

#: a point in time as users give it (a pandas Timestamp is a datetime)
TimeLike = datetime | str
#: how a time is spelled, in messages
EXAMPLE = "2020-01-03T00:00:00Z"


def to_utc(value: TimeLike, what: str = "timestamp") -> datetime:
    """Return ``value`` as an aware UTC ``datetime``.

    Naive values are refused (never read as local time): pass ``tzinfo=timezone.utc``
    or an ISO string with an offset such as ``2020-01-03T00:00:00Z``. Anything that is not
    a point in time (an int, None, NaN/NaT, an unparsable string) is refused as well.
    """
    given = value
    if isinstance(value, str):
        parsed = _parse(value, what)
        if parsed.tzinfo is None:
            raise NaiveTimestampError(
                f"{what} {value!r} has no timezone; give one, e.g. "
                f"'{parsed.isoformat()}Z' or '{parsed.isoformat()}+01:00' "
                "(revisions-assets never assumes local time)"
            )
        value = parsed
    pd = sys.modules.get("pandas")  # a Timestamp or NaT implies pandas is loaded
    if pd is not None and value is pd.NaT:
        raise InvalidTimestampError(f"{what} is NaT (not a time); pass an aware datetime")
    try:
        if pd is not None and isinstance(value, pd.Timestamp):
            if value.tzinfo is None:
                shown = repr(given) if isinstance(given, str) else value.isoformat()
                raise NaiveTimestampError(
                    f"{what} {shown} has no timezone; give one, e.g. "
                    f"'{value.isoformat()}Z' or '{value.isoformat()}+01:00' "
                    "(revisions-assets never assumes local time)"
                )
            return value.tz_convert("UTC").to_pydatetime()
        if isinstance(value, datetime):
            if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
                raise NaiveTimestampError(
                    f"{what} {value.isoformat()} has no timezone; pass e.g. datetime(..., "
                    "tzinfo=timezone.utc) (revisions-assets never assumes local time)"
                )
            return value.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        if isinstance(exc, NaiveTimestampError):
            raise
        shown = repr(given) if isinstance(given, str) else describe(value)
        raise InvalidTimestampError(f"{what} {shown} is out of range in UTC: {exc}") from exc
    if isinstance(value, date):
        raise NaiveTimestampError(
            f"{what} {value.isoformat()} is a date without a timezone; pass an aware datetime"
        )
    raise InvalidTimestampError(
        f"{what} must be an aware datetime, pandas Timestamp or ISO string, got {describe(value)}"
    )


def _parse(text: str, what: str) -> datetime:
    """An ISO 8601 time; other spellings pandas reads (``2024-03-05 00:00 UTC``) when pandas
    is installed (the base install has none)."""
    try:
        return datetime.fromisoformat(text)
    except ValueError as exc:
        try:
            import pandas as pd
        except ModuleNotFoundError:
            raise InvalidTimestampError(
                f"{what}: cannot parse {describe(text)} as a time; give an ISO 8601 time "
                f"with an offset, e.g. {EXAMPLE}"
            ) from exc
    try:
        parsed = pd.Timestamp(text)
    except (ValueError, OverflowError, TypeError) as exc:
        raise InvalidTimestampError(
            f"{what}: cannot parse {describe(text)} as a time; give an ISO 8601 time "
            f"with an offset, e.g. {EXAMPLE}"
        ) from exc
    if parsed is pd.NaT:
        raise InvalidTimestampError(
            f"{what}: {describe(text)} is not a time (NaT); give e.g. {EXAMPLE}"
        )
    return parsed


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
