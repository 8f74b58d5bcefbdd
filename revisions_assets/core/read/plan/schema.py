"""The columns of a read, engine-free: what the log records, resolved once per plan.

The log records each write's schema as Spark's ``StructType`` JSON. A read's schema is
the first write's columns, then the columns later writes added, in order, all nullable;
each executor turns a ``Schema`` into its own types (a Spark ``StructType``, a Polars
schema) and conforms the files of every write to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ...errors import InvalidArgumentError
from ...log.records import Revision, TableWrite


@dataclass(frozen=True)
class Field:
    """One column: its name and its Spark type as recorded (canonical JSON)."""

    name: str
    type_json: str

    @property
    def type(self) -> object:
        """The recorded type: a string (``"long"``) or a dict (arrays, structs, maps)."""
        return json.loads(self.type_json)


Schema = tuple[Field, ...]


@lru_cache(maxsize=512)
def parse_schema(schema_json: str) -> Schema:
    """A recorded schema's columns, in order; revisions of a table mostly share one string."""
    return tuple(
        Field(f["name"], json.dumps(f["type"], sort_keys=True, separators=(",", ":")))
        for f in json.loads(schema_json)["fields"]
    )


def read_schema(writes: Iterable[TableWrite]) -> Schema:
    """The read schema: the first write's columns, then columns added later, in order."""
    fields: dict[str, Field] = {}
    for schema_json in dict.fromkeys(w.schema_json for w in writes):
        for field in parse_schema(schema_json):
            fields.setdefault(field.name, field)
    return tuple(fields.values())


def table_schema(revisions: Sequence[Revision], table: str) -> Schema:
    """The read schema of ``table`` over ``revisions`` (given in key order)."""
    return read_schema(r.tables[table] for r in revisions)


def agrees(own: Schema, schema: Schema) -> bool:
    """Whether files of ``own`` read under ``schema`` as they are: every column they hold has
    the read type (columns they lack read as null)."""
    types = {f.name: f.type_json for f in schema}
    return all(types.get(f.name, f.type_json) == f.type_json for f in own)


def names(schema: Schema) -> list[str]:
    return [f.name for f in schema]


def value_columns(schema: Iterable[object], id_columns: Iterable[str]) -> list[str]:
    """The columns a row hash covers: a recorded schema's columns (system columns are never
    recorded) except the ids; ``schema`` is a ``Schema`` or a Spark ``StructType``."""
    ids = set(id_columns)
    return [f.name for f in schema if f.name not in ids]  # type: ignore[attr-defined]


def to_struct_json(schema: Schema) -> str:
    """``schema`` as Spark's ``StructType`` JSON (every column nullable)."""
    fields = [{"name": f.name, "type": f.type, "nullable": True, "metadata": {}} for f in schema]
    return json.dumps({"type": "struct", "fields": fields}, sort_keys=True, separators=(",", ":"))


def column_names(columns: Any, call: str, option: str = "columns") -> tuple[str, ...]:
    """``columns`` (the option ``option``) as a tuple of names: a list (or tuple) of
    strings, nothing else."""
    if (
        isinstance(columns, str)
        or not isinstance(columns, Sequence)
        or not all(isinstance(c, str) for c in columns)
    ):
        raise InvalidArgumentError(
            f"{call}(): {option} must be a list of column names, got {columns!r}"
        )
    return tuple(columns)


def projected(
    schema: Schema,
    id_columns: Sequence[str],
    columns: Sequence[str],
    table: str,
    call: str,
    option: str = "columns",
) -> Schema:
    """The id columns and ``columns`` (the option ``option``) of ``schema``, checked: the
    ids come first, then the columns in the order given."""
    columns = column_names(columns, call, option)
    by_name = {f.name: f for f in schema}
    unknown = [c for c in columns if c not in by_name]
    if unknown:
        raise InvalidArgumentError(
            f"{call}(): {option} {unknown} are not columns of table {table!r}; its "
            f"columns are {names(schema)}"
        )
    return tuple(by_name[c] for c in dict.fromkeys([*id_columns, *columns]))
