"""Guards over the package's source: a dataset is untrusted input (issue 53).

Every data file is opened through the two places that open it literally (Spark:
``spark_scan.parquet_files``; Polars: ``scan_parquet(..., glob=False)``), so no new reader
can bring pattern expansion back; and no SQL text is built in the package but the reviewed
constant texts and the caller's own filters, so no name taken from data can reach Spark's
parser (``core/spark_columns.py``). No Spark.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "revisions_assets"

#: the one function that opens data files with Spark
SPARK_OPENER = ("core/read/execute/spark_scan.py", "parquet_files")
#: Spark and Polars calls that open files by path
OPENING = {"parquet", "load", "csv", "json", "orc", "text"}
SCANNING = {"scan_parquet", "read_parquet", "scan_ipc", "read_ipc", "scan_csv", "read_csv"}


@cache
def trees() -> dict[str, ast.Module]:
    """Every module of the package, parsed once: its path below the package -> its tree."""
    return {
        path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text(), str(path))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


@cache
def calls() -> tuple[tuple[str, str, ast.Call], ...]:
    """(module path, innermost enclosing function, call) of every call in the package."""
    found = []
    for module, tree in trees().items():
        todo: list[tuple[ast.AST, str]] = [(tree, "<module>")]
        while todo:
            node, function = todo.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                function = node.name
            if isinstance(node, ast.Call):
                found.append((module, function, node))
            todo.extend((child, function) for child in ast.iter_child_nodes(node))
    return tuple(found)


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


#: calls whose arguments are SQL text, and filters that take SQL text as well as columns
SQL_TEXT = {"selectExpr", "expr", "sql", "sql_expr", "fromDDL"}
FILTERS = {"where", "filter"}
#: the constant SQL texts of the package, reviewed: the demo's own column names only
REVIEWED_TEXTS = {"rank = 1", "flights_28d >= 5"}
#: the functions that hand a caller's own SQL text to an engine: a read's ``filter=``
#: (``RevisionedDataset``) and the command line's ``--where``, never a name from data
CALLERS_TEXT = {
    ("core/dataset.py", "_filtered"),
    ("cli/spark_data.py", "filtered"),
    ("cli/data_commands.py", "filtered"),
    ("core/read/execute/spark_ids.py", "spark_id_bounds"),  # a scan's filter, for pruning
}


def built_text(node: ast.AST) -> bool:
    """Whether ``node`` builds a string: an f-string, a concatenation or a ``%`` with a
    string, a ``.format`` or ``.join`` call."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return any(
            built_text(side) or (isinstance(side, ast.Constant) and isinstance(side.value, str))
            for side in (node.left, node.right)
        )
    return isinstance(node, ast.Call) and chain(node)[-1:] in (["format"], ["join"])


def test_no_sql_text_is_built_in_the_package():
    texts, found = set(), []
    for module, function, call in calls():
        names = chain(call)
        if not names or names[-1] not in SQL_TEXT | FILTERS:
            continue
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                texts.add(arg.value)
            elif (names[-1] in SQL_TEXT or built_text(arg)) and (
                module,
                function,
            ) not in CALLERS_TEXT:
                found.append(f"{module}:{call.lineno} in {function}: {'.'.join(names)}")
    assert not found, f"SQL text built from values (use spark_columns): {found}"
    assert texts == REVIEWED_TEXTS, f"constant SQL texts to review: {texts - REVIEWED_TEXTS}"


def test_no_sql_text_function_is_passed_around():
    """``map(F.expr, texts)`` parses as surely as a call."""
    found = []
    for module, tree in trees().items():
        called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in SQL_TEXT and id(node) not in called:
                found.append(f"{module}:{node.lineno}: {node.attr}")
    assert not found, found
