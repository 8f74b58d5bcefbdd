"""The README's Python blocks and ``examples/`` run as written.

The README's ```python blocks run in order in one namespace (later blocks use names
earlier ones define); a block that stands for user code and cannot run alone is marked
``<!-- fragment: why -->`` on the line above it and is only compiled.
"""

from __future__ import annotations

import re
import runpy
import sys
from pathlib import Path

import dagster as dg
import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
EXAMPLES = sorted((REPO / "examples").glob("*.py"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
FRAGMENT = "<!-- fragment:"
SPARK_SQL_CONF = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """(line, code, is_fragment) of every ```python block."""
    blocks = []
    for match in BLOCK.finditer(text):
        above = text[: match.start()].rstrip("\n").splitlines()
        line = len(above) + 1
        blocks.append((line, match.group(1), bool(above) and above[-1].startswith(FRAGMENT)))
    return blocks


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(README.read_text())
    assert [fragment for *_, fragment in blocks].count(False) >= 2
    namespace: dict = {"__name__": "readme"}
    for line, code, fragment in blocks:
        compiled = compile(code, f"README.md:{line}", "exec")
        if not fragment:
            exec(compiled, namespace)
    defs = namespace["defs"]
    assert isinstance(defs, dg.Definitions)
    dg.Definitions.validate_loadable(defs)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path, tmp_path, monkeypatch, spark):
    """Each example as ``python examples/X.py ROOT``, in this process (the session's Spark)."""
    monkeypatch.setattr(sys, "argv", [str(path), str(tmp_path / "root")])
    saved = {k: spark.conf.get(k) for k in SPARK_SQL_CONF}
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)
