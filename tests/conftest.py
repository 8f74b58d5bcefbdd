"""Shared fixtures: one local SparkSession for the whole test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness.examples import EXPLORE
from harness.processes import TEST_JVM_OPTS
from harness.sessions import TEST_SESSION_CONF
from hypothesis import settings

from revisions_assets.core.spark_session import build_spark_session
from revisions_assets.s3a import s3a_conf

# every JVM a test starts through spark-submit (the demo, the CLI, bench probes, drivers)
os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTS)
if os.environ.get("PYTEST_XDIST_WORKER"):
    # xdist workers get COLUMNS=80, LINES=24: the CLI would cut its tables as in a terminal
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)

# ./dev.sh explore: new random examples on every run, kept in the example database so that
# the next run replays a failure first (./dev.sh test and CI load the derandomized ``ci``)
settings.register_profile(EXPLORE, derandomize=False, deadline=None, print_blob=True)


@pytest.fixture(scope="session")
def spark():
    session = build_spark_session(
        master="local[2]",
        app_name="revisions-assets-tests",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.driver.memory": "2g",
            "spark.sql.adaptive.enabled": "true",  # as build_spark_session gives users
            "spark.driver.extraJavaOptions": TEST_JVM_OPTS,
            # the s3a connector on the JVM's classpath from the start (tests/s3 need it)
            **s3a_conf(jars="classpath"),
            **TEST_SESSION_CONF,
        },
    )
    yield session
    session.stop()


@pytest.fixture
def root(tmp_path):
    """A fresh dataset root on the local filesystem."""
    return str(tmp_path / "dataset")


#: one representative test per area that needs Spark or Dagster, for the fast tier
REPRESENTATIVES = (
    "tests/core/test_worked_example.py",
    "tests/core/test_validation.py::test_null_ids",
    "tests/core/test_lifecycle.py::test_compact_after_policy",
    "tests/core/test_reader_cache.py::test_a_read_as_of_fetches_only_its_revisions",
    "tests/core/test_legacy.py",
    "tests/cli/test_commands.py::test_show",
    "tests/dagster/test_featurized.py::test_first_run_major_then_minor_then_code_change_major",
    "tests/dagster/test_scoring.py::test_consumes_only_new_revisions_exactly_once",
)
#: fixtures that start a JVM (directly or through what they build)
JVM_FIXTURES = {"spark", "s3_spark", "cluster"}


#: the longest test files (a minute or more each, a few tests each): collected first, so that
#: ``./dev.sh test`` (``--no-loadscope-reorder``) starts them first and no worker is left
#: running one of them alone at the end; pytest-xdist's default order, most tests first,
#: puts exactly these last
LONGEST_FIRST = (
    "tests/dagster/test_ui.py",
    "tests/bench/test_bench_smoke.py",
    "tests/cluster/test_cluster.py",
    "tests/spark_source/test_exactly_once.py",
    "tests/dagster/test_your_project.py",
    "tests/dagster/test_automation.py",
    "tests/test_many_entries.py",
    "tests/dagster/test_pipes.py",
    "tests/install/test_dagster_install.py",
    "tests/s3/test_s3_concurrency.py",
)


def pytest_collection_modifyitems(config, items):
    """``-m fast`` (``./dev.sh fast``): the tests that start no JVM, plus REPRESENTATIVES.
    The files of LONGEST_FIRST move to the front, in that order (a stable sort)."""
    for item in items:
        spark_free = not JVM_FIXTURES & set(getattr(item, "fixturenames", ()))
        heavy = {"slow", "s3", "cluster", "dagster"} & {m.name for m in item.iter_markers()}
        representative = any(item.nodeid.startswith(r) for r in REPRESENTATIVES)
        if representative or (spark_free and not heavy):
            item.add_marker(pytest.mark.fast)
    repo = Path(__file__).resolve().parents[1]
    moved = [path for path in LONGEST_FIRST if not (repo / path).is_file()]
    if moved:
        raise pytest.UsageError(f"tests/conftest.py LONGEST_FIRST names missing files: {moved}")
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
