"""Fixtures of the Dagster tests: real instances (in memory, on disk where a test needs one),
the session's Spark, a pipeline."""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg
import pytest
from revisions_pipeline import Pipeline

from revisions_assets.dagster import SparkSessionResource


@pytest.fixture(scope="session")
def spark_resource(spark) -> SparkSessionResource:
    """The Spark resource around the tests' session (getOrCreate: same JVM, same settings)."""
    conf = {
        k: spark.conf.get(k) for k in ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")
    }
    return SparkSessionResource(spark_config=conf)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    """An in-memory instance, as ``dg.materialize`` makes by default. A temporary instance on
    disk (``dg.instance_for_test``) stores every event through a new SQLite connection: that
    was about a quarter of the in-process Dagster tests' time. A test that reads the instance
    from another process or through GraphQL uses ``instance_on_disk``."""
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def instance_on_disk() -> Iterator[dg.DagsterInstance]:
    """A temporary instance on disk (its own DAGSTER_HOME)."""
    with dg.instance_for_test() as inst:
        yield inst


@pytest.fixture
def pipe(tmp_path, spark_resource, instance) -> Pipeline:
    return Pipeline(str(tmp_path / "datasets"), spark_resource, instance)
