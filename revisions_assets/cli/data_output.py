"""What ``show``, ``diff`` and ``history`` share, whichever engine read the rows: the
``--id`` values, the shape of a diff row and how diffs and their counts are printed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from ..core.timeutil import to_utc
from .common import InputError
from .output import Output, text

CHANGE = "_change"
BEFORE = "_before"
_INTEGRAL = ("byte", "short", "integer", "long")
#: how SQL spells the integral types
_SQL_NAMES = {"byte": "tinyint", "short": "smallint", "integer": "int", "long": "bigint"}
_DECIMAL = re.compile(r"^decimal\(\d+,\s*\d+\)$")


def sql_type(data_type: Any) -> str:
    """A recorded (Spark JSON) type as Spark SQL spells it: ``bigint``, ``decimal(10,2)``,
    ``array<string>``, ``struct<a:int,b:string>``, ``map<string,double>``."""
    if isinstance(data_type, str):
        return _SQL_NAMES.get(data_type, data_type)
    kind = data_type["type"]
    if kind == "array":
        return f"array<{sql_type(data_type['elementType'])}>"
    if kind == "map":
        return f"map<{sql_type(data_type['keyType'])},{sql_type(data_type['valueType'])}>"
    if kind == "struct":
        fields = ",".join(f"{f['name']}:{sql_type(f['type'])}" for f in data_type["fields"])
        return f"struct<{fields}>"
    return str(kind)


def id_types(schema_json: str, id_columns: Sequence[str]) -> dict[str, Any]:
    """The recorded types (Spark's JSON names: ``long``, ``decimal(10,2)`` …) of the ids."""
    fields = {f["name"]: f["type"] for f in json.loads(schema_json)["fields"]}
    return {c: fields[c] for c in id_columns}


def parse_ids(
    pairs: Sequence[str], table: str, id_columns: Sequence[str], types: Mapping[str, Any]
) -> dict[str, Any]:
    """``--id col=value`` pairs, each value converted to its id column's recorded type."""
    out: dict[str, Any] = {}
    for pair in pairs:
        column, sep, raw = pair.partition("=")
        if not sep or not column:
            raise InputError(f"--id {pair!r}: expected column=value, e.g. --id {id_columns[0]}=42")
        if column not in id_columns:
            raise InputError(
                f"--id {pair!r}: {column!r} is not an id column of table {table!r} "
                f"(id columns: {', '.join(id_columns)})"
            )
        name = sql_type(types[column])
        try:
            out[column] = id_value(raw, types[column])
        except IdValueError as exc:
            raise InputError(f"--id {pair!r}: {raw!r} is not a {name} ({exc})") from exc
        except (ValueError, InvalidOperation) as exc:  # Python's own words name its calls
            raise InputError(f"--id {pair!r}: {raw!r} is not a {name}") from exc
    return out


def parse_entities(
    pairs: Sequence[str], table: str, id_columns: Sequence[str], types: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """``--id`` pairs grouped into entities: a column that comes again starts the next one,
    so ``--id id=1 --id id=2`` are two entities, ``--id a=1 --id b=2`` one of two columns."""
    entities: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for pair in pairs:
        ((column, value),) = parse_ids([pair], table, id_columns, types).items()
        if column in current:
            entities.append(current)
            current = {}
        current[column] = value
    if current:
        entities.append(current)
    return entities


def shown_entities(entities: Sequence[Mapping[str, Any]]) -> str:
    """``id=1, id=2`` or ``(a=1 b=2), (a=3 b=4)``: entities as the command line gave them."""
    parts = [" ".join(f"{c}={text(v)}" for c, v in e.items()) for e in entities]
    return ", ".join(p if len(e) == 1 else f"({p})" for p, e in zip(parts, entities, strict=True))


class IdValueError(ValueError):
    """A command-line value that is not of its id column's type, and why."""


def id_value(raw: str, data_type: Any) -> Any:
    """A command-line value as the Python value of a recorded (Spark JSON) type."""
    if data_type in ("string",) or (isinstance(data_type, str) and "char(" in data_type):
        return raw
    if data_type in _INTEGRAL:
        return int(raw)
    if data_type in ("float", "double"):
        return float(raw)
    if isinstance(data_type, str) and _DECIMAL.match(data_type):
        return Decimal(raw)
    if data_type == "boolean":
        if raw.lower() not in ("true", "false"):
            raise IdValueError("expected true or false")
        return raw.lower() == "true"
    if data_type == "date":
        return date.fromisoformat(raw)
    if data_type == "timestamp":
        return to_utc(raw, "--id")
    if data_type == "timestamp_ntz":
        return datetime.fromisoformat(raw)
    raise IdValueError(f"ids of type {sql_type(data_type)} cannot be given on the command line")


def diff_row(row: dict, ids: list[str], values: list[str]) -> dict[str, Any]:
    """A diff row for people and JSON: values after, and ``_before`` for what changed."""
    change = row[CHANGE]
    out: dict[str, Any] = {CHANGE: change, **{c: row[c] for c in ids}}
    after = {c: row[f"__a{i}"] for i, c in enumerate(values)}
    before = {c: row[f"__b{i}"] for i, c in enumerate(values)}
    out.update(after if change != "deleted" else dict.fromkeys(values))
    if change == "changed":
        out[BEFORE] = {c: before[c] for c in values if before[c] != after[c]}
    else:
        out[BEFORE] = before if change == "deleted" else None
    out["_reset"] = row["_reset"]
    return out


def emit_diff(
    out: Output,
    shaped: Iterable[dict[str, Any]],
    ids: list[str],
    values: list[str],
    limit: int,
    more: bool,
    total: int | None = None,
) -> None:
    """Diff rows: streamed as JSON, listed as JSON, or a table with ``before -> after``
    (``more``: rows past ``limit`` were left out; ``total``: all of them, when known)."""
    if out.as_json and not limit:
        out.stream_json(shaped)
        return
    rows = list(shaped)
    if out.as_json:
        out.limited(rows, limit, more, total)
        return
    for row in rows:
        before_values = row[BEFORE] or {}
        for c in values:
            if c in before_values and row[CHANGE] == "changed":
                row[c] = f"{text(before_values[c])} -> {text(row[c])}"
            elif row[CHANGE] == "deleted":
                row[c] = before_values.get(c)
    out.limited(rows, limit, more, total, columns=[CHANGE, *ids, *values])


def emit_stats(out: Output, result: dict[str, Any]) -> None:
    """``diff --stats``: counts by kind of change and of changed values per column."""
    if out.as_json:
        out.json(result)
        return
    out.note(f"{result['added']} added, {result['changed']} changed, {result['deleted']} deleted")
    out.rows(
        [{"column": c, "changed values": n} for c, n in result["columns"].items()],
        columns=["column", "changed values"],
    )


def emit_history(
    out: Output,
    table: str,
    id_columns: Sequence[str],
    entities: list[dict],
    rows: list[dict],
    capped: tuple[int, bool, int | None],
):
    """``history`` rows: the ids, the SCD2 columns, then the table's values; ``capped``:
    the limit, whether versions past it were left out, and all of them when known."""
    if out.as_json:
        out.limited(rows, *capped)
        return
    if not rows:
        out.note(f"no version of {table} with {shown_entities(entities)}")
        return
    system = ["valid_from", "valid_to", "_revision", "_revision_kind", "is_current", "is_deleted"]
    data = [c for c in rows[0] if c not in system and c != "_revision_sequence"]
    ids = [c for c in data if c in id_columns]
    short = ("from", "to", "revision", "kind", "current", "deleted")
    out.limited(  # the ids first, then when and by which revision, then the values
        rows,
        *capped,
        what="versions",
        columns=[*ids, *system, *[c for c in data if c not in ids]],
        headers=dict(zip(system, short, strict=True)),
    )
