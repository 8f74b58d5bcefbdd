"""The README, the documentation site and ``examples/`` stay true to the code.

The Python blocks of the README and of every page in ``docs/`` run as written: the blocks of
one file in order, in one namespace (later blocks use names earlier ones define); a block
that stands for user code and cannot run alone is marked ``<!-- fragment: why -->`` on the
line above it and is only compiled. The site builds with ``mkdocs build --strict`` (a broken
link, anchor or API reference fails it).
"""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "```python" in p.read_text())
EXAMPLES = sorted((REPO / "examples").glob("*.py"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
FRAGMENT = "<!-- fragment:"
SPARK_SQL_CONF = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")
#: an absolute path of somebody's machine (a home, temporary or work folder): sample
#: outputs use a neutral root instead (/path/to/revisions-assets, /data/revisions)
MACHINE_PATH = re.compile(
    r"(?<![\w.~/-])/(?:home|Users|root|tmp|work|private|mnt|var/folders)/[\w.-]+"
    r"|\b[A-Za-z]:\\(?:Users|Documents and Settings)\\"
)


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """(line, code, is_fragment) of every ```python block."""
    blocks = []
    for match in BLOCK.finditer(text):
        above = text[: match.start()].rstrip("\n").splitlines()
        line = len(above) + 1
        blocks.append((line, match.group(1), bool(above) and above[-1].startswith(FRAGMENT)))
    return blocks


def run_blocks(path: Path) -> dict:
    namespace: dict = {"__name__": path.stem}
    for line, code, fragment in python_blocks(path.read_text()):
        compiled = compile(code, f"{path.relative_to(REPO)}:{line}", "exec")
        if not fragment:
            exec(compiled, namespace)
    return namespace


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(README.read_text())
    assert [fragment for *_, fragment in blocks].count(False) >= 1
    defs = run_blocks(README)["defs"]
    assert isinstance(defs, dg.Definitions)
    dg.Definitions.validate_loadable(defs)


def test_docs_show_no_machine_paths():
    found = [
        f"{path.relative_to(REPO)}:{n}: {match[0]}"
        for path in [README, REPO / "CHANGELOG.md", *sorted(DOCS.rglob("*.md"))]
        for n, line in enumerate(path.read_text().splitlines(), 1)
        for match in MACHINE_PATH.finditer(line)
    ]
    assert not found, "absolute paths of a machine in the docs:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "text, machine",
    [
        ("delay_risk  /work/wt/cli/demo_data/datasets/planes", True),
        ("--out /tmp/bench2m/results.md", True),
        ("DatasetReader('/home/ana/data')", True),
        (r"C:\Users\ana\revisions", True),
        ("/path/to/revisions-assets/demo_data/datasets/planes", False),
        ('DatasetReader("/data/revisions/drivers")', False),
        ("s3://bucket/tmp/x and demo_data/work/y", False),
    ],
)
def test_a_machine_path_is_recognized(text, machine):
    assert bool(MACHINE_PATH.search(text)) is machine


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(DOCS).as_posix() for p in PAGES])
def test_docs_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = run_blocks(page)
    if "defs" in namespace:
        dg.Definitions.validate_loadable(namespace["defs"])


def test_the_site_builds_strict(tmp_path):
    """``./dev.sh docs build``: every link, anchor, API reference and CLI page resolves."""
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    api = (site / "reference" / "python" / "index.html").read_text()
    assert "DatasetReader" in api and "doc-signature" in api  # signatures rendered
    guide = (site / "guides" / "first-assets" / "index.html").read_text()
    assert 'class="highlight"' in guide  # code blocks highlighted
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "revisions show" in cli and "--as-of" in cli  # the click app's pages


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
