"""The workload the cluster test runs twice: on the standalone cluster and on ``local[*]``.

A featurized dataset (majors, minors, tombstones, an out-of-order backfill) and a scoring
dataset that consumes its changes with recorded upstream positions, through the engine.
Returns small, deterministic results (revision names are fixed) for comparison, row
hashes of the latest state included.

On the standalone cluster it runs in the demo's driver (tests/cluster/demo_workload.py).
Run as a script it is a Spark Connect client and writes the results as JSON:
``python workload.py sc://host:port ROOT OUT.json``.
"""

from __future__ import annotations

import json
import os
import sys

from harness.dates import day
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from revisions_assets import RevisionedDataset, UpstreamPosition
from revisions_assets.core.hashing import row_hash
from revisions_assets.core.spark_session import build_spark_session
from revisions_assets.spark import register

FEATURES = "id long, grp int, v long"


def features(spark: SparkSession, start: int, stop: int, bump: int = 0) -> DataFrame:
    """Computed by the executors: ``spark.range`` over 4 partitions."""
    return spark.range(start, stop, 1, 4).select(
        "id", (F.col("id") % 7).cast("int").alias("grp"), (F.col("id") * 2 + bump).alias("v")
    )


def rows(df: DataFrame) -> list[list]:
    return sorted([list(r) for r in df.collect()], key=repr)


def score(ds_in: RevisionedDataset, scores: RevisionedDataset, name: str, when: float) -> dict:
    """Consume the features' changes since the recorded position; commit scores atomically
    with the new position (a reset makes the scoring revision major)."""
    since = scores.inspect.upstream_position(ds_in.root, "features")
    cs = ds_in.changes("features", since_sequence=since)
    out = cs.df.select("id", (F.col("v") * F.col("grp")).alias("score"), "_deleted")
    rev = scores.commit(
        {"scores": out},
        timestamp=day(when),
        is_major=cs.is_reset,
        version="s1",
        name=name,
        upstream=[UpstreamPosition(ds_in.root, "features", cs.until_sequence)],
        expected_positions={(ds_in.root, "features"): since},
    )
    return {
        "since": since,
        "until": cs.until_sequence,
        "reset": cs.is_reset,
        "changes": rows(cs.df),
        "committed": rev is not None and [rev.sequence, rev.is_major, rev.tables["scores"].rows],
    }


def run(spark: SparkSession, root: str) -> dict:
    feats = RevisionedDataset(f"{root}/features", spark=spark, id_columns=["id"])
    scores = RevisionedDataset(f"{root}/scores", spark=spark, id_columns=["id"])
    out: dict = {"scoring": []}
    feats.commit(
        {"features": features(spark, 0, 200)},
        timestamp=day(0),
        is_major=True,
        version="v1",
        name="f0",
    )
    out["scoring"].append(score(feats, scores, "s0", 0))
    tombstones = spark.range(0, 10, 1, 2).select("id", F.lit(True).alias("_deleted"))
    updates = features(spark, 100, 150, bump=1000).withColumn("_deleted", F.lit(False))
    feats.commit(
        {"features": updates.unionByName(tombstones, allowMissingColumns=True)},
        timestamp=day(1),
        is_major=False,
        version="v1",
        name="f1",
    )
    feats.commit(
        {"features": features(spark, 200, 250)},
        timestamp=day(2),
        is_major=False,
        version="v1",
        name="f2",
    )
    out["scoring"].append(score(feats, scores, "s1", 2))
    feats.commit(
        {"features": features(spark, 50, 300, bump=5)},
        timestamp=day(3),
        is_major=True,
        version="v2",
        name="f3",
    )
    feats.commit(
        {"features": features(spark, 20, 30, bump=7)},
        timestamp=day(2.5),
        is_major=False,
        version="v1",
        name="f4-backfill",
    )
    out["scoring"].append(score(feats, scores, "s2", 3))
    out["latest"] = rows(feats.read("features"))
    out["as_of_day_2"] = rows(feats.read("features", as_of=day(2)))
    out["at_f2"] = rows(
        feats.read("features", at="f2", with_revision=True).drop("_revision_timestamp")
    )
    window = feats.changes("features", since=day(0), until=day(2))
    out["changes_day_0_2"] = [window.is_reset, rows(window.df)]
    out["scores"] = rows(scores.read("scores", with_revision=True).drop("_revision_timestamp"))
    log = feats.inspect.log()[["name", "is_major", "version", "sequence", "rows", "tombstones"]]
    out["log"] = log.astype(str).values.tolist()
    out["score_positions"] = scores.inspect.upstream_position(feats.root, "features")
    # row hashes (core/hashing.py) are the same under every Spark: equal to the local ones
    latest = feats.read("features")
    out["row_hashes"] = rows(latest.select("id", row_hash(latest.schema, ["grp", "v"])))
    return out


def executor_dirs(spark: SparkSession) -> list[str]:
    """Working directories of the processes that ran a 4-task job (executor dirs on a cluster)."""
    return sorted(
        set(spark.sparkContext.parallelize(range(8), 4).map(lambda _: os.getcwd()).collect())
    )


def main(url: str, root: str, out_path: str) -> None:
    """The workload through a Spark Connect server (``sc://host:port``)."""
    spark = build_spark_session(remote=url, app_name="revisions-assets-connect-workload")
    result = {"session": type(spark).__module__, "workload": run(spark, root)}
    # format("revisions") over Connect: registered by the client, run by the server's Python
    register(spark)
    view = f"CREATE TEMPORARY VIEW features USING revisions OPTIONS (path '{root}/features', "
    spark.sql(view + "table 'features', as_of '2020-01-03T00:00:00Z')")
    result["source_as_of_day_2"] = rows(spark.sql("SELECT * FROM features"))
    with open(out_path, "w") as fh:
        json.dump(result, fh)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
