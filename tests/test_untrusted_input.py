"""Guards over the package's source: a dataset is untrusted input (issue 53).

Every data file is opened through the two places that open it literally (Spark:
``spark_scan.parquet_files``; Polars: ``scan_parquet(..., glob=False)``), so no new reader
can bring pattern expansion back. No Spark.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "revisions_assets"

#: the one function that opens data files with Spark
SPARK_OPENER = ("core/read/execute/spark_scan.py", "parquet_files")
#: Spark and Polars calls that open files by path
OPENING = {"parquet", "load", "csv", "json", "orc", "text"}
SCANNING = {"scan_parquet", "read_parquet", "scan_ipc", "read_ipc", "scan_csv", "read_csv"}


def calls() -> Iterator[tuple[str, str, ast.Call]]:
    """(module path, enclosing function, call) of every call in the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        module = path.relative_to(PACKAGE).as_posix()
        functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        owner = {id(c): f.name for f in functions for c in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                yield module, owner.get(id(node), "<module>"), node


def chain(node: ast.AST) -> list[str]:
    """The attribute names of a call's receiver chain: ``spark.read.schema(s).parquet`` ->
    ``["spark", "read", "schema", "parquet"]``."""
    names = []
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            names.append(node.id)
            return names[::-1]
        else:
            return names[::-1]


def test_spark_opens_data_files_only_through_the_literal_reader():
    found = []
    for module, function, call in calls():
        names = chain(call)
        if names and names[-1] in OPENING and "read" in names and "write" not in names:
            if (module, function) != SPARK_OPENER:
                found.append(f"{module}:{call.lineno} in {function}: {'.'.join(names)}")
    assert not found, f"Spark reads files without parquet_files (globbing): {found}"


def test_polars_scans_data_files_without_globbing():
    found = []
    for module, function, call in calls():
        names = chain(call)
        if names and names[-1] in SCANNING:
            literal = any(
                k.arg == "glob" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in call.keywords
            )
            if not literal:
                found.append(f"{module}:{call.lineno} in {function}: {'.'.join(names)}")
    assert not found, f"Polars scans that expand patterns: {found}"
