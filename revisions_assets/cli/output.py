"""Printing results: rich tables for people, stable JSON for programs.

Everything a command prints on stdout is held until the command ends (``flush``, or
``discard`` on an error): a command that fails after it started printing leaves stdout
empty; only a JSON array ``stream_json`` writes row by row goes out as it is read.

JSON is an array of row objects (or one object where a command says so; rows capped by
an explicit ``--limit`` come as ``{"rows", "limit", "truncated", "total"}``), with
stable keys: times as ISO 8601 with an offset (``2020-01-03T00:00:00+00:00``), times
without a zone (Spark ``timestamp_ntz``) without one, decimals as strings, bytes as
base64, NaN and infinities as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import shutil
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
#: what a wrapping column (free text, paths) keeps before other columns are left out;
#: several share about twice it
WRAP_MIN = 24
#: the narrowest it gets on a terminal too narrow for the columns that are never left out
FOLD_MIN = 8

#: what the commands print on stdout, held until the command ends (``flush`` or ``discard``)
_PENDING = io.StringIO()


#: what ``flush`` writes at a time: a larger write that the reader cuts short can be lost
#: without an error (CPython's buffered writer), a closed pipe must raise BrokenPipeError
CHUNK = 1 << 15


def flush() -> None:
    """Write what the command printed to stdout (it ended: ok, or a check found something)."""
    held = _PENDING.getvalue()
    discard()
    for start in range(0, len(held), CHUNK):
        sys.stdout.write(held[start : start + CHUNK])
        sys.stdout.flush()


def discard() -> None:
    """Drop what the command printed (it failed: stdout stays empty)."""
    _PENDING.seek(0)
    _PENDING.truncate()


class Output:
    """Where a command's results go: stdout (tables or JSON), notes and warnings.

    A table is never cut silently: on a terminal (or with ``COLUMNS``), free text and paths
    (``wrap``) wrap, other columns that do not fit are left out from the right and a note
    names them; piped output has no width limit.
    """

    def __init__(self, as_json: bool):
        self.as_json = as_json
        terminal = sys.stdout.isatty()
        width = int(os.environ.get("COLUMNS") or 0) or (None if terminal else UNLIMITED)
        self.console = Console(
            file=_PENDING,
            width=width or shutil.get_terminal_size().columns,
            force_terminal=terminal,
            markup=False,
            highlight=False,
            soft_wrap=False,
        )

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
        (free text, paths) wrap their values and are never left out; the others never
        fold."""
        if self.as_json:
            self.json([{k: jsonable(v) for k, v in row.items()} for row in rows])
            return
        columns = list(columns or (rows[0].keys() if rows else []))
        cells = [[text(row.get(c)) for c in columns] for row in rows]
        labels = [(headers or {}).get(c, c) for c in columns]
        widths = self._fit(columns, labels, cells, wrap)
        table = Table(box=box.SIMPLE_HEAD, show_edge=False)
        for n, width in widths.items():  # widths hold the values; wrapped ones fold
            table.add_column(labels[n], width=width, overflow="fold")
        for row in cells:
            table.add_row(*(row[n] for n in widths))
        self.console.print(table)
        if len(widths) < len(columns):
            cut = ", ".join(label for n, label in enumerate(labels) if n not in widths)
            self.note(
                f"left out to fit {self.console.width} columns: {cut} "
                "(--json has every field; COLUMNS=N sets the width)"
            )

    def limited(
        self,
        rows: Sequence[Mapping[str, Any]],
        limit: int,
        truncated: bool,
        total: int | None = None,
        what: str = "rows",
        **table: Any,
    ) -> None:
        """Rows capped by ``--limit`` (0: all): a table with a note when some were left out;
        with ``--json`` the array, or with a limit ``{"rows", "limit", "truncated",
        "total"}`` (``total``: every row, when it is known without reading them all)."""
        if self.as_json and limit:
            self.json(
                {
                    "rows": [{k: jsonable(v) for k, v in row.items()} for row in rows],
                    "limit": limit,
                    "truncated": truncated,
                    "total": total,
                }
            )
            return
        self.rows(rows, **table)
        if truncated:
            self.note(f"the first {limit} {what} (--limit N shows more, --limit 0 all)")

    def _fit(
        self,
        columns: Sequence[str],
        labels: Sequence[str],
        cells: Sequence[Sequence[str]],
        wrap: Sequence[str],
    ) -> dict[int, int]:
        """The width of each column shown, by position: every value whole, except that
        free text and paths (``wrap``) share what is left and fold; the other columns that
        do not fit are left out from the right."""
        natural = [
            max(
                [cell_len(label), *(cell_len(line) for row in cells for line in row[n].split("\n"))]
            )
            for n, label in enumerate(labels)
        ]
        wrapped = [n for n, c in enumerate(columns) if c in wrap]
        # wrapping columns together get about twice WRAP_MIN (one gets WRAP_MIN) before
        # other columns are left out
        floor = 2 * WRAP_MIN // (len(wrapped) + 1)
        least = [
            max(cell_len(labels[n]), min(floor, natural[n])) if n in wrapped else natural[n]
            for n in range(len(columns))
        ]

        def total(shown: Sequence[int], widths: Sequence[int]) -> int:
            return sum(widths[n] for n in shown) + 3 * len(shown) - 1  # padding, separators

        shown = list(range(len(columns)))
        room = self.console.width
        while total(shown, least) > room:
            droppable = [n for n in shown[1:] if n not in wrapped]
            if not droppable:
                break
            shown.remove(droppable[-1])
        if total(shown, natural) <= room:
            return {n: natural[n] for n in shown}
        widths = {n: least[n] for n in shown}
        # the wrapping columns share what is left (a lone value wider than the screen folds
        # too), narrowest first, in equal shares; one that needs at most FOLD_MIN more than
        # its share gets its values whole if the others keep their least width (a path one
        # character short is not folded); a terminal too narrow for what stays folds them
        # down to FOLD_MIN
        growing = sorted([n for n in shown if n in wrapped] or shown[-1:], key=natural.__getitem__)
        free = room - total(shown, least) + sum(least[n] for n in growing)
        for i, n in enumerate(growing):
            keep = sum(least[m] for m in growing[i + 1 :])
            fair = free // (len(growing) - i)
            whole = natural[n] <= min(free - keep, fair + FOLD_MIN)
            widths[n] = natural[n] if whole else max(min(FOLD_MIN, natural[n]), fair)
            free -= widths[n]
        return widths

    def json(self, value: Any) -> None:
        _PENDING.write(json.dumps(value, ensure_ascii=False) + "\n")

    def stream_json(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """A JSON array written row by row: the driver never holds all of it (an error
        while it is read leaves the array unfinished)."""
        flush()
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
