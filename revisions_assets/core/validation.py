"""Checks made before anything is committed (SPEC §4). Driver-side, from schemas and the log."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pyspark.sql.types import BooleanType, StructType

from .errors import IdColumnsError, InvalidNameError, SchemaMismatchError
from .merge import DELETED, REVISION_COLUMNS
from .selection import HEAD_PATTERN

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
RESERVED_NAMES = {"description.parquet", "_log"}


def check_name(name: str, what: str) -> str:
    """A table or revision name: ``[A-Za-z0-9._-]+``, never escaping the root, not reserved."""
    if not isinstance(name, str) or not name:
        raise InvalidNameError(f"{what} name must be a non-empty string, got {name!r}")
    if "/" in name or "\\" in name or name in (".", "..") or ".." in name:
        raise InvalidNameError(
            f"{what} name {name!r} could escape the dataset root: "
            "'/', '\\' and '..' are not allowed"
        )
    if not _NAME.match(name):
        raise InvalidNameError(f"{what} name {name!r} is invalid: use only [A-Za-z0-9._-]")
    if what == "revision" and HEAD_PATTERN.match(name):
        raise InvalidNameError(f"revision name {name!r} is reserved for positional reads")
    if name.startswith(("_", ".")) or name in RESERVED_NAMES:
        raise InvalidNameError(
            f"{what} name {name!r} is reserved: names may not start with '_' or '.'"
        )
    return name


def data_schema(table: str, schema: StructType, id_columns: Sequence[str]) -> StructType:
    """The schema to record for ``table`` (without ``_deleted``), after checking its columns."""
    names = schema.fieldNames()
    missing = [c for c in id_columns if c not in names]
    if missing:
        raise IdColumnsError(
            f"table {table!r}: id column(s) {missing} not in the data; columns are {names}"
        )
    clashes = [c for c in names if c in REVISION_COLUMNS]
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


def normalize_id_columns(
    id_columns: Sequence[str] | Mapping[str, Sequence[str]] | None,
) -> tuple[tuple[str, ...] | None, dict[str, tuple[str, ...]] | None]:
    """Split the constructor argument into (default ids, per-table declared ids)."""
    if id_columns is None:
        return None, None
    if isinstance(id_columns, str):
        return (id_columns,), None
    if isinstance(id_columns, Mapping):
        declared = {}
        for table, cols in id_columns.items():
            check_name(table, "table")
            declared[table] = (cols,) if isinstance(cols, str) else tuple(cols)
            if not declared[table]:
                raise IdColumnsError(f"table {table!r}: at least one id column is needed")
        return None, declared
    cols = tuple(id_columns)
    if not cols:
        raise IdColumnsError("at least one id column is needed")
    return cols, None
