"""The row hash (``_row_hash``): what tells a real change from a rewrite of the same values.

A stable 64-bit hash of a row's value columns (not its ids, not system columns), written
beside every data row and compared by skip-unchanged commits, change reads and soft
majors. The rules, which the docs' guide on versions and soft majors states for users:

- ``F.xxhash64`` (seed 42) over, for each value column **sorted by name**, the pair
  ``struct(name, value)``, but **only for non-null values**: Spark's hash skips null
  arguments, so a null column contributes nothing. Hence column order is irrelevant, and
  adding a nullable column that is null leaves every existing row's hash unchanged. A row
  whose values are all null hashes to 42 (the seed).
- Types are canonical: every integral type (byte, short, int, long) hashes as a long and
  ``float`` as a double, so widening a column (int → long) changes no hash. Other types
  hash as Spark hashes them (a decimal by its unscaled value and scale, a string by its
  UTF-8 bytes, nested types field by field).
- A tombstone's hash is null; a row of a revision written before hashes existed reads as
  null. A null hash always counts as a change.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ByteType,
    DataType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StructType,
)

from .columns import ROW_HASH
from .spark_errors import HASH_MISMATCH
from .sqltext import quoted, sql_literal

_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


def _canonical(name: str, data_type: DataType) -> str:
    if isinstance(data_type, _INTEGRAL):
        return f"CAST({quoted(name)} AS BIGINT)"
    if isinstance(data_type, FloatType):
        return f"CAST({quoted(name)} AS DOUBLE)"
    return quoted(name)


def row_hash_sql(schema: StructType, columns: Iterable[str]) -> str:
    """The SQL expression of ``row_hash``."""
    parts = [
        f"CASE WHEN {quoted(name)} IS NOT NULL "
        f"THEN struct({sql_literal(name)}, {_canonical(name, t)}) END"
        for name, t in sorted((c, schema[c].dataType) for c in columns)
    ]
    if not parts:
        return "CAST(42 AS BIGINT)"  # no value columns: every row has the same values
    return f"xxhash64({', '.join(parts)})"


def row_hash(schema: StructType, columns: Iterable[str]) -> Column:
    """The hash of ``columns`` (value columns of ``schema``) of each row, by the rules above.

    One SQL expression: built from Column objects it costs many calls into the JVM per
    commit (docs/benchmarks/index.md, "Measured while choosing")."""
    return F.expr(row_hash_sql(schema, columns))


def checked_hash_sql(schema: StructType, columns: Iterable[str], file: str) -> str:
    """The stored ``_row_hash``, checked against the row's values as it is read: a row whose
    stored hash is not the hash of its ``columns`` (by the rules above) fails the job, with
    ``HASH_MISMATCH`` and the file (``file``: SQL giving it, ``_metadata.file_path``).

    What compaction and purge read before they write rows again, so values changed outside
    revisions-assets are never copied into new files. A null stored hash (a tombstone, a
    row of a file written before hashes) is not checked: there is nothing to compare."""
    stored = quoted(ROW_HASH)
    return (
        f"CASE WHEN {stored} IS NOT NULL AND {stored} <> {row_hash_sql(schema, columns)} "
        f"THEN raise_error(concat({sql_literal(HASH_MISMATCH)}, {file})) ELSE {stored} END"
    )
