"""The demo pipeline's featurization and scoring, materialized through Dagster on any Spark.

References (planes, airlines), two daily partitions of plane delay features (a major,
then a minor) and the delay-risk scores of both days (one run: the days the scores
consume), with ``dg.materialize`` on an
ephemeral instance. The Spark session comes from the demo's ``SparkSessionResource``, so
``SPARK_MASTER`` decides where it runs. Returns a fingerprint of every table's state
(row count and an order-independent hash computed by Spark, doubles rounded so that a
different summation order cannot matter) and of the logs.

Run as a script, it is the one driver application the cluster tests start: the demo, then
the engine workload in the same session: ``python demo_workload.py BASE_DIR OUT.json``.
"""

from __future__ import annotations

import json
import sys

import dagster as dg
from harness.processes import TEST_JVM_OPTS
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType

from cluster.workload import executor_dirs, run  # tests/ is on the path, as for the harness
from revisions_assets import RevisionedDataset
from revisions_assets.dagster import SparkSessionResource, revisions_resources
from revisions_assets.dagster.resources.slice import RANGE_END_TAG, RANGE_START_TAG
from revisions_assets.demo.assets import FLIGHTS, build_demo_assets

CLUSTER_APP = "revisions-assets-on-cluster"

STEPS = [
    ("planes", None),
    ("airlines", None),
    ("plane_delay_features", "2013-01-01"),
    ("plane_delay_features", "2013-01-02"),
    ("plane_delay_risk", "2013-01-01...2013-01-02"),
]
TABLES = [
    ("reference", "planes"),
    ("reference", "airlines"),
    ("planes", "delay_features"),
    ("scores", "delay_risk"),
]


def fingerprint(df: DataFrame) -> list:
    cols = [
        F.round(F.col(f.name), 6)
        if isinstance(f.dataType, DoubleType | FloatType)
        else F.col(f.name)
        for f in df.schema.fields
    ]
    row = (
        df.select(F.xxhash64(*cols).cast("decimal(38,0)").alias("h"))
        .agg(F.count(F.lit(1)).alias("n"), F.sum("h").alias("h"))
        .collect()[0]
    )
    return [int(row["n"]), str(row["h"])]


def run_demo(base: str, spark: SparkSessionResource) -> dict:
    assets = build_demo_assets()
    resources = dict(revisions_resources(base, spark))
    kinds = []
    for name, partition in STEPS:
        first, _, last = (partition or "").partition("...")
        result = dg.materialize(
            [FLIGHTS, *assets.values()],
            selection=[assets[name].key],
            partition_key=None if last else partition,
            tags={RANGE_START_TAG: first, RANGE_END_TAG: last} if last else None,
            resources=resources,
            raise_on_error=True,
        )
        mat, *_ = result.asset_materializations_for_node(assets[name].node_def.name)
        kinds.append([name, partition, mat.metadata["kind"].value, mat.metadata["rows"].value])
    out: dict = {"materializations": kinds, "tables": {}}
    session = spark.spark_session
    for dataset, table in TABLES:
        ds = RevisionedDataset(f"{base}/{dataset}", spark=session)
        log = [
            [
                r.sequence,
                r.is_major,
                r.version_of(table),
                r.tables[table].rows,
                r.tables[table].tombstones,
            ]
            for r in ds.revisions(table)
        ]
        out["tables"][f"{dataset}/{table}"] = {"state": fingerprint(ds.read(table)), "log": log}
    return out


def main(base: str, out_path: str) -> None:
    """One driver application on the cluster (``SPARK_MASTER``): the demo through Dagster,
    then the engine workload (tests/cluster/workload.py) in the same session."""
    spark = SparkSessionResource(
        app_name=CLUSTER_APP,
        spark_config={
            "spark.ui.enabled": "false",
            "spark.driver.memory": "1g",
            "spark.driver.host": "127.0.0.1",
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.executor.extraJavaOptions": TEST_JVM_OPTS,
            "spark.cores.max": "2",
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            # start only once both executors (one per worker) have registered
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        },
    )
    session = spark.spark_session
    result = {"master": session.sparkContext.master, "demo": run_demo(f"{base}/demo", spark)}
    result["workload"] = run(session, f"{base}/engine")
    result["executors"] = session.sparkContext._jsc.sc().getExecutorIds().size()
    result["executor_dirs"] = executor_dirs(session)
    with open(out_path, "w") as fh:
        json.dump(result, fh)
    session.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
