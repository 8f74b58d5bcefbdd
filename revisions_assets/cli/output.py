"""Printing results: rich tables for people, stable JSON for programs.

JSON is always an array of row objects (or one object where a command says so), with
stable keys: times as ISO 8601 with an offset (``2020-01-03T00:00:00+00:00``), times
without a zone (Spark ``timestamp_ntz``) without one, decimals as strings, bytes as
base64, NaN and infinities as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.
"""

from __future__ import annotations

import base64
import json
import math
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.table import Table


def jsonable(value: Any) -> Any:
    """A value as JSON sees it (see the module docstring)."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return value if math.isfinite(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if hasattr(value, "asDict"):  # a Spark Row (a struct)
        return jsonable(value.asDict(recursive=False))
    if isinstance(value, Iterable):
        return [jsonable(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars from pandas
        return jsonable(value.item())
    return str(value)


def text(value: Any) -> str:
    """A value in a table cell."""
    if value is None:
        return "-"
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() != timedelta(0):
            return value.isoformat(sep=" ")
        shown = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
        if value.second or value.microsecond:
            shown += f":{value.second:02d}" + (
                f".{value.microsecond:06d}" if value.microsecond else ""
            )
        return shown + "Z"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping)):
        return ", ".join(text(v) for v in value)
    return str(jsonable(value))


class Output:
    """Where a command's results go: stdout (tables or JSON), notes and warnings."""

    def __init__(self, as_json: bool):
        self.as_json = as_json
        # piped output is not cut to 80 columns: COLUMNS decides, else a wide page
        width = int(os.environ.get("COLUMNS") or 0) or (None if sys.stdout.isatty() else 200)
        self.console = Console(width=width, markup=False, highlight=False, soft_wrap=False)

    def rows(
        self,
        rows: Sequence[Mapping[str, Any]],
        *,
        columns: Sequence[str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """A list of rows: a JSON array, or a table of ``columns`` (default: every key)
        whose headers may be shortened (``headers``: column -> label)."""
        if self.as_json:
            self.json([{k: jsonable(v) for k, v in row.items()} for row in rows])
            return
        columns = list(columns or (rows[0].keys() if rows else []))
        table = Table(box=box.SIMPLE_HEAD, show_edge=False)
        for column in columns:
            label = (headers or {}).get(column, column)
            table.add_column(label, overflow="fold", min_width=len(label))  # values fold
        for row in rows:
            table.add_row(*[text(row.get(c)) for c in columns])
        self.console.print(table)

    def json(self, value: Any) -> None:
        click.echo(json.dumps(value, ensure_ascii=False))

    def stream_json(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """A JSON array written row by row: the driver never holds all of it."""
        out = sys.stdout
        out.write("[")
        for n, row in enumerate(rows):
            out.write(("," if n else "") + json.dumps({k: jsonable(v) for k, v in row.items()}))
        out.write("]\n")
        out.flush()

    def note(self, message: str) -> None:
        """A line for people (never in JSON output)."""
        if not self.as_json:
            self.console.print(message)


def warn(message: str) -> None:
    click.echo(f"revisions: warning: {message}", err=True)
