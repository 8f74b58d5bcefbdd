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
from rich.cells import cell_len
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


#: the width of piped output when COLUMNS is unset: no limit (nothing is cut or folded)
UNLIMITED = 1_000_000
#: the narrowest a wrapping column (free text) gets before columns are left out
WRAP_MIN = 24


class Output:
    """Where a command's results go: stdout (tables or JSON), notes and warnings.

    A table is never cut silently: on a terminal (or with ``COLUMNS``), columns that do not
    fit are left out from the right and a note names them; piped output has no width limit.
    """

    def __init__(self, as_json: bool):
        self.as_json = as_json
        width = int(os.environ.get("COLUMNS") or 0) or (None if sys.stdout.isatty() else UNLIMITED)
        self.console = Console(width=width, markup=False, highlight=False, soft_wrap=False)

    def rows(
        self,
        rows: Sequence[Mapping[str, Any]],
        *,
        columns: Sequence[str] | None = None,
        headers: Mapping[str, str] | None = None,
        wrap: Sequence[str] = (),
    ) -> None:
        """A list of rows: a JSON array, or a table of ``columns`` (default: every key, in
        the order they matter: the last ones are left out first when the table is too wide)
        whose headers may be shortened (``headers``: column -> label). Columns in ``wrap``
        (free text) wrap their values; the others never fold."""
        if self.as_json:
            self.json([{k: jsonable(v) for k, v in row.items()} for row in rows])
            return
        columns = list(columns or (rows[0].keys() if rows else []))
        cells = [[text(row.get(c)) for c in columns] for row in rows]
        labels = [(headers or {}).get(c, c) for c in columns]
        widths = self._fit(columns, labels, cells, wrap)
        table = Table(box=box.SIMPLE_HEAD, show_edge=False)
        for label, width in zip(labels, widths, strict=False):
            table.add_column(label, width=width, overflow="fold")  # widths hold the values
        for row in cells:
            table.add_row(*row[: len(widths)])
        self.console.print(table)
        if len(widths) < len(columns):
            cut = ", ".join(labels[len(widths) :])
            self.note(
                f"left out to fit {self.console.width} columns: {cut} "
                "(--json has every field; COLUMNS=N sets the width)"
            )

    def _fit(
        self,
        columns: Sequence[str],
        labels: Sequence[str],
        cells: Sequence[Sequence[str]],
        wrap: Sequence[str],
    ) -> list[int]:
        """The width of each column shown: every value whole (columns that do not fit are
        left out from the right), free-text columns (``wrap``) sharing what is left."""
        natural = [
            max(
                [cell_len(label), *(cell_len(line) for row in cells for line in row[n].split("\n"))]
            )
            for n, label in enumerate(labels)
        ]
        least = [
            max(cell_len(label), min(WRAP_MIN, w)) if c in wrap else w
            for c, label, w in zip(columns, labels, natural, strict=True)
        ]

        def total(widths: Sequence[int]) -> int:  # padding 1 each side, 1 between columns
            return sum(widths) + 3 * len(widths) - 1

        shown = len(columns)
        while shown > 1 and total(least[:shown]) > self.console.width:
            shown -= 1
        if total(natural[:shown]) <= self.console.width:
            return natural[:shown]
        widths = least[:shown]
        spare = self.console.width - total(widths)
        wrapping = [n for n in range(shown) if columns[n] in wrap]
        for n in wrapping:  # what is left goes to the free text
            widths[n] = min(natural[n], widths[n] + max(spare, 0) // len(wrapping))
        if shown == 1 and spare < 0:  # one value wider than the screen: folded, not cut
            widths[0] = max(self.console.width - 2, 1)
        return widths

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
