"""Type and range checks at the API boundary: a wrong argument is refused before it can
reach the log (``is_major="False"`` is not a major, ``version=123`` is not a version).

Every message names the argument and shows the bad value (type and a short, redacted
repr); errors are ``ArgumentTypeError`` for a wrong type and ``InvalidArgumentError``
for a value out of range.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Collection, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .errors import ArgumentTypeError, InvalidArgumentError
from .uris import describe

if TYPE_CHECKING:  # imported by the checks of Spark inputs only: the reader needs no PySpark
    from pyspark.sql import DataFrame, SparkSession


def check_type(value: Any, types: type | tuple[type, ...], what: str, expected: str) -> Any:
    if not isinstance(value, types):
        raise ArgumentTypeError(f"{what} must be {expected}, got {describe(value)}")
    return value


def check_bool(value: Any, what: str) -> bool:
    """A real bool: the string 'False' is truthy and must never commit a major."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{what} must be True or False, got {describe(value)}")
    return value


def check_text(value: Any, what: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    return check_type(value, str, what, "a string" + (" or None" if optional else ""))


def check_sequence_number(value: Any, what: str, *, optional: bool = False) -> int | None:
    """A position in the commit order: an int >= 0 (0 is "before the first revision")."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{what} must be a sequence number (an int), got {describe(value)}")
    if value < 0:
        raise InvalidArgumentError(
            f"{what} must be >= 0, got {value}: sequences count commits from 1 "
            "(0 is before the first revision)"
        )
    return int(value)


def check_count(value: Any, what: str, *, minimum: int, optional: bool = False) -> int | None:
    """An int >= ``minimum`` (a policy threshold, a file size)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        expected = "an int" + (" or None" if optional else "")
        raise ArgumentTypeError(f"{what} must be {expected}, got {describe(value)}")
    if value < minimum:
        raise InvalidArgumentError(f"{what} must be >= {minimum}, got {value}")
    return int(value)


def check_duration(value: Any, what: str) -> timedelta:
    """A non-negative ``datetime.timedelta`` (a retention, a grace period)."""
    check_type(value, timedelta, what, "a datetime.timedelta")
    if value < timedelta(0):
        raise InvalidArgumentError(f"{what} must not be negative, got {value}")
    return value


def check_choice(value: Any, choices: Collection[str], what: str) -> str:
    check_type(value, str, what, f"one of {sorted(choices)}")
    if value not in choices:
        raise InvalidArgumentError(f"{what} must be one of {sorted(choices)}, got {value!r}")
    return value


def check_spark(spark: Any) -> SparkSession | None:
    """A classic or Spark Connect session, or None (the active/default one is used)."""
    from pyspark.sql import SparkSession

    connect = sys.modules.get("pyspark.sql.connect.session")  # loaded iff Connect is in use
    types: tuple[type, ...] = (SparkSession,)
    if connect is not None:
        types += (connect.SparkSession,)
    if spark is not None and not isinstance(spark, types):
        raise ArgumentTypeError(f"spark must be a SparkSession or None, got {describe(spark)}")
    return spark


def check_tables(tables: Any) -> Mapping[str, DataFrame]:
    """``{table name: Spark DataFrame}`` with at least one table."""
    from pyspark.sql import DataFrame

    if isinstance(tables, DataFrame):
        raise ArgumentTypeError(
            "tables must be a dict {table name: Spark DataFrame}, got a bare DataFrame: "
            "pass {'<table>': df}"
        )
    check_type(tables, Mapping, "tables", "a dict {table name: Spark DataFrame}")
    if not tables:
        raise InvalidArgumentError("tables is empty: commit() needs at least one table")
    for name, df in tables.items():
        check_type(name, str, "a table name in tables", "a string")
        if not isinstance(df, DataFrame):
            hint = (
                "; convert it with spark.createDataFrame(pdf)"
                if type(df).__module__.startswith("pandas")
                else ""
            )
            raise ArgumentTypeError(
                f"table {name!r} must be a Spark DataFrame, got {describe(df)}{hint}"
            )
    return tables


def check_version(version: Any, tables: Collection[str]) -> None:
    """A str, None, or a dict {table: str | None} naming only tables of this commit."""
    if version is None or isinstance(version, str):
        return
    if not isinstance(version, Mapping):
        raise ArgumentTypeError(
            f"version must be a string, None or a dict {{table: string}}, got {describe(version)}"
        )
    for table, value in version.items():
        if table not in tables:
            raise InvalidArgumentError(
                f"version names table {table!r}, which this commit does not write "
                f"(tables: {sorted(tables)})"
            )
        check_text(value, f"version[{table!r}]", optional=True)


def check_string_map(value: Any, what: str) -> dict[str, str]:
    """A dict of strings (``producer``, ``properties``); None values are dropped."""
    if value is None:
        return {}
    check_type(value, Mapping, what, "a dict of strings")
    out = {}
    for key, item in value.items():
        check_text(key, f"a key of {what}")
        if item is not None:
            out[key] = check_text(item, f"{what}[{key!r}]")
    return out


def check_options(value: Any, what: str) -> dict[str, object]:
    """A dict of named options; the values are never shown (they may be secrets)."""
    if value is None:
        return {}
    check_type(value, Mapping, what, "a dict of options")
    names = [k for k in value if not isinstance(k, str)]
    if names:
        raise ArgumentTypeError(f"{what} names must be strings, got {describe(names[0])}")
    return dict(value)
