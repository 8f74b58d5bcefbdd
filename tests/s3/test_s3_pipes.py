"""A remote job (Dagster Pipes) as EMR runs one: context and messages through S3.

``PipesSubprocessClient`` with dagster-aws's ``PipesS3ContextInjector`` and
``PipesS3MessageReader`` on the loopback moto server launches the tests' remote job
(``tests/dagster/pipes_job.py``) with its own local Spark; the dataset lives in the same
bucket (s3a for the data, the engine's conditional writes for the log). The orchestrator's
side needs no Spark: it reads the log, and the test reads the rows with DatasetReader.
"""

from __future__ import annotations

import sys
from pathlib import Path

import boto3
import dagster as dg
import pytest
from dagster_aws.pipes import PipesS3ContextInjector, PipesS3MessageReader
from dagster_aws.s3 import S3Resource
from harness.processes import with_tests_on_path

from revisions_assets import DatasetReader
from revisions_assets.dagster import (
    DatasetLocation,
    RevisionsIOManager,
    SparkSessionResource,
    featurized_asset,
)
from revisions_assets.dagster.resources.keys import IO_MANAGER_KEY, LOCATION_KEY, SPARK_KEY

from .conftest import BUCKET

pytestmark = pytest.mark.s3

PIPES_JOB = str(Path(__file__).resolve().parents[1] / "dagster" / "pipes_job.py")
DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")
EVENTS = [
    {"day": "2024-01-01", "entity": "a", "grp": "g1", "value": 1, "deleted": False},
    {"day": "2024-01-01", "entity": "b", "grp": "g1", "value": 2, "deleted": False},
    {"day": "2024-01-02", "entity": "a", "grp": "g1", "value": 10, "deleted": False},
]


@featurized_asset(
    id_columns=["entity"],
    partitions_def=DAILY,
    code_version="1",
    dataset="main",
    table="features",
    pipes=True,
)
def features(context: dg.AssetExecutionContext, job, pipes_s3: dg.PipesSubprocessClient):
    """Features computed by a remote job that talks to Dagster through S3."""
    extras = {**job.extras, "events": EVENTS}
    return pipes_s3.run(context=context, extras=extras, command=[sys.executable, PIPES_JOB])


def test_a_remote_job_reports_through_s3(s3_options, s3_env, s3_root_factory):
    base = s3_root_factory("pipes")
    client = boto3.client("s3", **s3_options)
    location = DatasetLocation(base_uri=base, s3=S3Resource(**s3_options))
    spark = SparkSessionResource()  # never started: the job runs Spark, this side reads logs
    env = {**with_tests_on_path(s3_env), "REVISIONS_TEST_S3_ENDPOINT": s3_options["endpoint_url"]}
    resources = {
        LOCATION_KEY: location,
        SPARK_KEY: spark,
        IO_MANAGER_KEY: RevisionsIOManager(location=location, spark=spark),
        "pipes_s3": dg.PipesSubprocessClient(
            env=env,
            context_injector=PipesS3ContextInjector(bucket=BUCKET, client=client),
            message_reader=PipesS3MessageReader(bucket=BUCKET, client=client, interval=0.2),
        ),
    }
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            [features], partition_key="2024-01-01", instance=instance, resources=resources
        )
    (mat,) = result.asset_materializations_for_node("features")
    meta = {k: v.value for k, v in mat.metadata.items()}
    assert meta["remote_report"] == "reported by the job"  # its message came through S3
    assert (meta["kind"], meta["sequence"], meta["rows"]) == ("major", 1, 2)
    assert meta["dagster/uri"] == f"{base}/main" and meta["dagster/row_count"] == 2
    assert mat.tags["dagster/data_version"] == "features@1"
    reader = DatasetReader(f"{base}/main", storage_options=s3_options)
    rows = reader.read("features").sort("entity").to_dicts()
    assert [(r["entity"], r["total"]) for r in rows] == [("a", 1), ("b", 2)]
    (revision,) = reader.revisions()
    assert revision.producer["run_id"] == result.run_id
