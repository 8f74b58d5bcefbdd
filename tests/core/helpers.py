"""Small helpers shared by the engine tests: building tiny frames and collecting tiny results."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame, SparkSession

EPOCH = datetime(2020, 1, 1, tzinfo=UTC)


def day(n: float) -> datetime:
    """2020-01-01 + n days, UTC (the worked example's calendar)."""
    return EPOCH + timedelta(days=n)


def frame(spark: SparkSession, rows: Sequence[tuple], schema: str) -> DataFrame:
    """A tiny DataFrame with an explicit DDL schema (so empty frames keep their types)."""
    return spark.createDataFrame(list(rows), schema)


def by_id(df: DataFrame, *columns: str, id_column: str = "id") -> dict:
    """Collect a tiny result as {id: tuple(columns)} and insist ids are unique."""
    rows = df.select(id_column, *columns).collect()
    out = {row[0]: tuple(row[1:]) for row in rows}
    assert len(out) == len(rows), f"duplicate ids in result: {sorted(r[0] for r in rows)}"
    return out


def input_files(df: DataFrame, root: str) -> set[str]:
    """The files a DataFrame reads, relative to the dataset root ('/'-separated)."""
    base = Path(root).resolve()
    out = set()
    for uri in df.inputFiles():
        path = Path(unquote(urlparse(uri).path)).resolve()
        out.add(path.relative_to(base).as_posix())
    return out


def top_dirs(paths: Iterable[str]) -> set[str]:
    """The first path component of each path: the revision folder of a data file."""
    return {p.split("/", 1)[0] for p in paths}


def tree(root: str, sub: str = "") -> list[str]:
    """Every file below root/sub, relative to root, sorted (to prove nothing changed)."""
    base = Path(root)
    top = base / sub
    if not top.exists():
        return []
    return sorted(
        (Path(d) / f).relative_to(base).as_posix() for d, _, fs in os.walk(top) for f in fs
    )


def micros(value: datetime) -> int:
    """Microseconds since 1970 of an aware datetime (Spark's unix_micros, computed apart)."""
    return (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
