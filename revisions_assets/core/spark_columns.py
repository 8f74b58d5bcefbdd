"""Names and values from a dataset reach Spark as columns and constants, never as SQL text.

A dataset is untrusted input: its revision, table and column names and its values come
from files that anyone with write access may have crafted. SQL text (``selectExpr``,
``F.expr``) is parsed, and while ``spark.sql.variable.substitute`` is on (Spark's default)
every ``${env:NAME}`` in it, inside a string literal too, is first replaced by that
environment variable: a revision named ``${env:AWS_SECRET_ACCESS_KEY}`` would print the
secret. So a name from data becomes a ``Column`` by its quoted identifier (``column``,
parsed by Spark's attribute-name parser, which substitutes nothing), and a value a literal
or a ``constant``. ``tests/test_untrusted_input.py`` allows no SQL text in the package.

Some column names Spark cannot take at all (``unnameable``): commits refuse them and Spark
reads of a log that holds one say so, instead of reading nulls.
"""

from __future__ import annotations

import json

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType


def quoted(name: str) -> str:
    """A column name as an identifier for ``F.col``: in backticks (doubled inside), so that
    a dot or a backtick is part of the name."""
    return "`" + name.replace("`", "``") + "`"


def column(name: str) -> Column:
    """The column named exactly ``name``."""
    return F.col(quoted(name))


def constant(value: object, data_type: DataType) -> Column:
    """``value`` (a dict with string keys, or a list) as a Spark constant of ``data_type`` (a
    map or an array). It crosses into the JVM as one JSON string literal, which ``from_json``
    reads and the optimizer folds into a literal: one call whatever its size, where a literal
    per element costs a call each, and a value that is never parsed as SQL."""
    return F.from_json(F.lit(json.dumps(value)), data_type)


def unnameable(name: str, type_json: str = "") -> str | None:
    """Why Spark cannot read or write a column named ``name`` (of the type ``type_json``,
    JSON), None when it can. A dot or a backtick reads as a nested field or as quoting
    wherever a column is named (Narwhals names columns unquoted). ``${``, in the name or a
    nested field's: Spark's Parquet reader and writer pass the columns they read and write
    through Hadoop's configuration, which replaces ``${name}`` by a setting, a system
    property or (``${env.NAME}``) an environment variable, so the column would read nulls."""
    if "${" in name or "${" in type_json:
        nested = "" if "${" in name else " (in a nested field's name)"
        return f"'${{'{nested}, which Hadoop's configuration replaces by a setting or a variable"
    if "." in name:
        return "a dot, which Spark reads as a nested field"
    if "`" in name:
        return "a backtick, which Spark reads as quoting"
    return None
