"""Checks made before anything is committed (docs/guides/engine.md). Driver-side, from schemas and
the log."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql.types import (
    BooleanType,
    ByteType,
    CharType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    VarcharType,
)

from ..arguments import check_type
from ..columns import DELETED, REVISION_COLUMNS, ROW_HASH
from ..errors import (
    ArgumentTypeError,
    DuplicateColumnError,
    IdColumnsError,
    InvalidNameError,
    SchemaMismatchError,
)
from ..read.plan.refs import HEAD_PATTERN
from ..spark_columns import unnameable
from ..uris import describe, redact

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
RESERVED_NAMES = {"description.parquet", "_log"}
#: table and revision names become folder names: well below the 255 bytes of a file name
MAX_NAME_LENGTH = 128
#: id columns identify an entity: atomic types with an exact equality. Floating point is
#: refused because float equality is not identity (NaN, -0.0 vs 0.0, a value that does not
#: round-trip): the same entity could get two ids, or one id could never be found again.
ID_TYPES = (
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    DecimalType,
    StringType,
    CharType,
    VarcharType,
    DateType,
    TimestampType,
    TimestampNTZType,
    BooleanType,
)


def check_name(name: str, what: str, *, digits: bool = False) -> str:
    """A table or revision name: ``[A-Za-z0-9._-]+``, at most MAX_NAME_LENGTH characters,
    never escaping the root, not reserved; a revision name is not all digits (``at="3"``
    must mean sequence 3) unless ``digits`` (the names of an imported original dataset,
    which ``at="3"`` finds by name)."""
    check_type(name, str, f"{what} name", "a string")
    shown = redact(repr(name))  # a name may be a pasted URI with credentials
    if not name:
        raise InvalidNameError(f"{what} name must be a non-empty string, got {shown}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(
            f"{what} name {shown[:40]}… is {len(name)} characters long; "
            f"the limit is {MAX_NAME_LENGTH}"
        )
    if "/" in name or "\\" in name or name in (".", "..") or ".." in name:
        raise InvalidNameError(
            f"{what} name {shown} could escape the dataset root: '/', '\\' and '..' are not allowed"
        )
    if not _NAME.match(name):
        raise InvalidNameError(f"{what} name {shown} is invalid: use only [A-Za-z0-9._-]")
    if what == "revision" and HEAD_PATTERN.match(name):
        raise InvalidNameError(f"revision name {shown} is reserved for positional reads")
    if what == "revision" and name.isdigit() and not digits:
        raise InvalidNameError(
            f"revision name {shown} is all digits: at={shown} must mean sequence {int(name)}; "
            "add a letter (e.g. 'r" + name + "')"
        )
    if name.startswith(("_", ".")) or name in RESERVED_NAMES:
        raise InvalidNameError(
            f"{what} name {shown} is reserved: names may not start with '_' or '.'"
        )
    return name


def data_schema(table: str, schema: StructType, id_columns: Sequence[str]) -> StructType:
    """The schema to record for ``table`` (without ``_deleted``), after checking its columns."""
    names = schema.fieldNames()
    seen: dict[str, str] = {}
    for name in names:
        if name.lower() in seen:
            raise DuplicateColumnError(
                f"table {table!r}: column {name!r} appears twice"
                + (f" (as {seen[name.lower()]!r})" if seen[name.lower()] != name else "")
                + "; column names are compared case-insensitively: rename or drop one"
            )
        seen[name.lower()] = name
    missing = [c for c in id_columns if c not in names]
    if missing:
        raise IdColumnsError(
            f"table {table!r}: id column(s) {missing} not in the data; columns are {names}"
        )
    for column in id_columns:
        data_type = schema[column].dataType
        if not isinstance(data_type, ID_TYPES):
            why = (
                " (floating point equality is not identity: NaN, -0.0/0.0 and rounding would "
                "split or lose entities; cast to decimal, long or string)"
                if data_type.typeName() in ("float", "double")
                else " (ids must be atomic and exactly comparable: integers, decimal, string, "
                "date, timestamp or boolean)"
            )
            raise IdColumnsError(
                f"table {table!r}: id column {column!r} has type {data_type.simpleString()}, "
                f"which cannot identify an entity{why}"
            )
    for field in schema.fields:
        why = unnameable(field.name, field.dataType.json())
        if why:
            raise InvalidNameError(
                f"table {table!r}: column {field.name!r} holds {why}: Spark cannot name it; "
                "rename it (e.g. with '_' instead)"
            )
    clashes = [c for c in names if c in (*REVISION_COLUMNS, ROW_HASH)]
    if clashes:
        raise InvalidNameError(f"table {table!r}: column(s) {clashes} are reserved for reads")
    if DELETED in names and not isinstance(schema[DELETED].dataType, BooleanType):
        raise SchemaMismatchError(
            f"table {table!r}: column {DELETED!r} must be boolean, "
            f"got {schema[DELETED].dataType.simpleString()}"
        )
    return StructType([f for f in schema.fields if f.name != DELETED])


def check_compatible(table: str, major: StructType, current: StructType, new: StructType) -> None:
    """A minor may add columns and omit columns that minors added, but it may not drop a
    column of the current major, nor change the type of any current column."""
    new_types = {f.name: f.dataType for f in new.fields}
    for f in major.fields:
        if f.name not in new_types:
            raise SchemaMismatchError(
                f"table {table!r}: the minor drops column {f.name!r} of the current major; "
                "write the column (null where unknown) or commit a major"
            )
    for f in current.fields:
        if f.name in new_types and new_types[f.name] != f.dataType:
            raise SchemaMismatchError(
                f"table {table!r}: column {f.name!r} changes type from "
                f"{f.dataType.simpleString()} to {new_types[f.name].simpleString()}; "
                "cast it or commit a major"
            )


def _id_list(columns: Any, where: str) -> tuple[str, ...]:
    """One table's id columns: a name or a list of distinct, non-empty names."""
    if isinstance(columns, str):
        columns = (columns,)
    if isinstance(columns, Mapping) or not isinstance(columns, Sequence):
        raise ArgumentTypeError(
            f"{where}id_columns must be a list of column names, got {describe(columns)}"
        )
    cols = tuple(columns)
    if not cols:
        raise IdColumnsError(f"{where}at least one id column is needed")
    for col in cols:
        if not isinstance(col, str):
            raise ArgumentTypeError(f"{where}id column names must be strings, got {describe(col)}")
        if not col:
            raise IdColumnsError(f"{where}an id column name is empty")
    repeated = sorted({c for c in cols if cols.count(c) > 1})
    if repeated:
        raise IdColumnsError(f"{where}id column(s) {repeated} are listed twice")
    return cols


def normalize_id_columns(
    id_columns: Sequence[str] | Mapping[str, Sequence[str]] | None,
) -> tuple[tuple[str, ...] | None, dict[str, tuple[str, ...]] | None]:
    """Split the constructor argument into (default ids, per-table declared ids)."""
    if id_columns is None:
        return None, None
    if isinstance(id_columns, Mapping):
        if not id_columns:
            raise IdColumnsError("id_columns is an empty dict: declare at least one table")
        declared = {}
        for table, cols in id_columns.items():
            check_name(table, "table")
            declared[table] = _id_list(cols, f"table {table!r}: ")
        return None, declared
    return _id_list(id_columns, ""), None
