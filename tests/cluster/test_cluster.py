"""The engine on a real multi-process Spark standalone cluster gives the local[*] results.

The workload (tests/cluster/workload.py: featurization with majors, minors, tombstones and
a backfill, then scoring from recorded upstream positions) runs in its own Spark
application against the cluster (one SparkContext per process), writing to a shared
local folder; the same workload then runs on the tests' local session.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .workload import run

pytestmark = pytest.mark.cluster

RUN_TIMEOUT_S = 600


def test_engine_on_the_standalone_cluster_matches_local(standalone_cluster, spark, tmp_path):
    out = tmp_path / "cluster.json"
    log = tmp_path / "driver.log"
    with open(log, "w") as driver_log:
        proc = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).with_name("workload.py")),
                standalone_cluster.master_url,
                str(tmp_path / "on-cluster"),
                str(out),
            ],
            stdout=driver_log,
            stderr=subprocess.STDOUT,
            env=standalone_cluster.env,
            timeout=RUN_TIMEOUT_S,
        )
    assert proc.returncode == 0, f"{log.read_text()[-4000:]}\n{standalone_cluster.logs()}"
    on_cluster = json.loads(out.read_text())

    # it really ran on the cluster: two executors, one per worker process
    assert on_cluster["master"] == standalone_cluster.master_url
    assert on_cluster["executors"] == 2
    dirs = on_cluster["executor_dirs"]
    assert len(dirs) == 2 and {Path(d).parent.parent.name for d in dirs} == {"worker-0", "worker-1"}
    apps = standalone_cluster.status()["completedapps"]
    assert [a["name"] for a in apps] == ["revisions-assets-cluster-workload"]

    local = json.loads(json.dumps(run(spark, str(tmp_path / "local"))))  # tuples -> lists
    assert on_cluster["workload"] == local
    assert len(local["latest"]) == 250 and local["score_positions"] == 5
