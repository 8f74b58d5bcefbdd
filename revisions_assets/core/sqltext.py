"""SQL text of names and values of the driver's own making: one ``selectExpr`` or ``expr``
is one call into the JVM, where building the same columns from Column objects costs a
call per function and argument (every read and commit builds many)."""

from __future__ import annotations


def quoted(name: str) -> str:
    """A column name as a SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def sql_literal(value: object) -> str:
    """A SQL literal of a string or an integer (log values, column names).

    A string holding a quote or a backslash is spelled as its UTF-8 bytes (``X'…'``): how
    the parser reads escapes depends on ``spark.sql.parser.escapedStringLiterals``."""
    if isinstance(value, str):
        if "'" in value or "\\" in value:
            return f"CAST(X'{value.encode().hex()}' AS STRING)"
        return f"'{value}'"
    return f"{int(value)}L"  # type: ignore[call-overload]
