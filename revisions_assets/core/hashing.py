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
  UTF-8 bytes, nested types field by field); a map, wherever it is, as the array of its
  entries sorted by key, so equal maps hash alike whatever the order of their entries.
- A tombstone's hash is null; a row of a revision written before hashes existed reads as
  null. A null hash always counts as a change.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StructType,
)

from .columns import ROW_HASH
from .spark_columns import column
from .spark_errors import HASH_MISMATCH

_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


def _canonical(value: Column, data_type: DataType) -> Column:
    if isinstance(data_type, _INTEGRAL):
        return value.cast(LongType())
    if isinstance(data_type, FloatType):
        return value.cast(DoubleType())
    return _hashable(value, data_type)


def _holds_map(data_type: DataType) -> bool:
    if isinstance(data_type, MapType):
        return True
    if isinstance(data_type, ArrayType):
        return _holds_map(data_type.elementType)
    if isinstance(data_type, StructType):
        return any(_holds_map(f.dataType) for f in data_type.fields)
    return False


def _hashable(value: Column, data_type: DataType) -> Column:
    """``value`` with every map in it as the array of its entries sorted by key: Spark
    refuses to hash a map (two equal maps may differ in entry order), and the sorted
    entries of equal maps are equal. Values of other types are left as they are."""
    if not _holds_map(data_type):
        return value
    if isinstance(data_type, MapType):
        inner = data_type.valueType
        values = F.transform_values(value, lambda _, v: _hashable(v, inner))
        return F.array_sort(F.map_entries(values))
    if isinstance(data_type, ArrayType):
        element = data_type.elementType
        return F.transform(value, lambda v: _hashable(v, element))
    assert isinstance(data_type, StructType)
    fields = [_hashable(value.getField(f.name), f.dataType).alias(f.name) for f in data_type]
    return F.when(value.isNotNull(), F.struct(*fields))


def row_hash(schema: StructType, columns: Iterable[str]) -> Column:
    """The hash of ``columns`` (value columns of ``schema``) of each row, by the rules above.

    Built from Column objects (a column name is data: never SQL text, ``spark_columns``):
    five calls into the JVM per column (docs/benchmarks/index.md, "Measured while
    choosing")."""
    parts = []
    for name, data_type in sorted((c, schema[c].dataType) for c in columns):
        value = column(name)
        pair = F.struct(F.lit(name), _canonical(value, data_type))
        parts.append(F.when(value.isNotNull(), pair))
    if not parts:
        return F.lit(42).cast("long")  # no value columns: every row has the same values
    return F.xxhash64(*parts)


def hash_disagrees(schema: StructType, columns: Iterable[str]) -> Column:
    """Whether a row's stored ``_row_hash`` is not the hash of its ``columns``; false where
    nothing is stored (a tombstone, a row of a file written before hashes)."""
    stored = column(ROW_HASH)
    return stored.isNotNull() & (stored != row_hash(schema, columns))


def checked_hash(schema: StructType, columns: Iterable[str]) -> Column:
    """The stored ``_row_hash``, checked against the row's values as it is read: a row whose
    stored hash is not the hash of its ``columns`` (by the rules above) fails the job, with
    ``HASH_MISMATCH`` and its file (``_metadata.file_path``: only on a relation of files).

    What compaction and purge read before they write rows again, so values changed outside
    revisions-assets are never copied into new files. A null stored hash is not checked:
    there is nothing to compare."""
    failure = F.raise_error(F.concat(F.lit(HASH_MISMATCH), F.col("_metadata.file_path")))
    return F.when(hash_disagrees(schema, columns), failure).otherwise(column(ROW_HASH))
