"""The engine on a real multi-process Spark standalone cluster, classic and through Spark
Connect, gives the local[*] results.

The workload (tests/cluster/workload.py: featurization with majors, minors, tombstones and
a backfill, then scoring from recorded upstream positions, and row hashes) runs in one
driver application on the cluster after the demo's Dagster assets (one SparkContext per
process), and through a Spark Connect server; the same workload on the tests' local
session is the reference, itself checked against hand-written model revisions. The local
references (the workload and the demo) run while the cluster's driver does.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from subprocess import STDOUT, Popen

import pytest
from core.model import Model
from harness.dates import day
from harness.processes import with_tests_on_path

from revisions_assets.dagster import SparkSessionResource

from .demo_workload import CLUSTER_APP, run_demo
from .workload import run

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.long]  # several JVMs

RUN_TIMEOUT_S = 600


def features_model() -> Model:
    """The workload's feature revisions (tests/cluster/workload.py), written out by hand."""

    def rows(ids: range, bump: int = 0) -> dict:
        return {(i,): {"grp": i % 7, "v": 2 * i + bump} for i in ids}

    model = Model()
    model.commit("f0", day(0), True, {"features": rows(range(0, 200))})
    f1 = {**rows(range(100, 150), 1000), **{(i,): None for i in range(0, 10)}}
    model.commit("f1", day(1), False, {"features": f1})
    model.commit("f2", day(2), False, {"features": rows(range(200, 250))})
    model.commit("f3", day(3), True, {"features": rows(range(50, 300), 5)})
    model.commit("f4-backfill", day(2.5), False, {"features": rows(range(20, 30), 7)})
    return model


def check_against_model(result: dict) -> None:
    """A run's results are the model's states, not just another run's: independent rows."""
    model = features_model()

    def state(**where: object) -> set[tuple]:
        found = model.state("features", **where).rows.items()
        return {(k[0], row["grp"], row["v"]) for k, (row, _rev) in found}

    assert {tuple(r) for r in result["latest"]} == state()  # f3 alone: f4 is stamped before it
    assert {tuple(r) for r in result["as_of_day_2"]} == state(as_of=day(2))
    at_f2 = model.state("features", at="f2").rows.items()
    assert {tuple(r) for r in result["at_f2"]} == {
        (k[0], row["grp"], row["v"], rev.name, rev.sequence) for k, (row, rev) in at_f2
    }
    # the last scoring run consumed (3, 5]: f3 is a major, so a reset to its state, scored
    # v * grp by a major scoring revision s2 (the scores dataset's third)
    assert result["score_positions"] == 5
    assert {tuple(r) for r in result["scores"]} == {
        (i, v * grp, "s2", 3) for i, grp, v in state(at=5)
    }


def start_script(script: str, args: list[str], env: dict[str, str], log: Path) -> Popen:
    """Start a driver script of this folder (tests/ on its path); its output goes to ``log``."""
    with open(log, "w") as driver_log:
        return Popen(
            [sys.executable, str(Path(__file__).with_name(script)), *args],
            stdout=driver_log,
            stderr=STDOUT,
            env=with_tests_on_path(env),
        )


def waited(process: Popen) -> int:
    """The exit code of ``process``, killed if it outlives ``RUN_TIMEOUT_S``."""
    try:
        return process.wait(timeout=RUN_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()


@dataclass(frozen=True)
class Runs:
    """The driver application's results on the cluster, and the references: the same
    workload and demo on the tests' local session."""

    cluster: dict
    local_workload: dict
    local_demo: dict


@pytest.fixture(scope="module")
def runs(standalone_cluster, spark, tmp_path_factory) -> Runs:
    """One driver application on the standalone cluster (``SPARK_MASTER``): the demo through
    Dagster, then the engine workload (tests/cluster/demo_workload.py). The references run
    on the local session meanwhile: the driver spends most of its time starting up and
    waiting for its executors."""
    work = tmp_path_factory.mktemp("on-cluster")
    env = {**standalone_cluster.env, "SPARK_MASTER": standalone_cluster.master_url}
    env.pop("SPARK_REMOTE", None)
    out, log = work / "result.json", work / "driver.log"
    driver = start_script("demo_workload.py", [str(work / "data"), str(out)], env, log)
    try:
        local = tmp_path_factory.mktemp("local")
        local_workload = as_json(run(spark, str(local / "engine")))
        local_demo = as_json(run_demo(str(local / "demo"), SparkSessionResource()))
    except BaseException:
        driver.kill()
        raise
    code = waited(driver)
    assert code == 0, f"{log.read_text()[-4000:]}\n{standalone_cluster.logs()}"
    return Runs(json.loads(out.read_text()), local_workload, local_demo)


def as_json(result: dict) -> dict:
    """A result as it comes back from JSON (tuples become lists), to compare with a run's."""
    return json.loads(json.dumps(result))


def test_engine_on_the_standalone_cluster_matches_local(standalone_cluster, runs):
    on_cluster = runs.cluster
    # it really ran on the cluster: two executors, one per worker process
    assert on_cluster["master"] == standalone_cluster.master_url
    assert on_cluster["executors"] == 2
    dirs = on_cluster["executor_dirs"]
    assert len(dirs) == 2 and {Path(d).parent.parent.name for d in dirs} == {"worker-0", "worker-1"}
    deadline = time.monotonic() + 60  # the master files the stopped application shortly after
    while CLUSTER_APP not in [a["name"] for a in standalone_cluster.status()["completedapps"]]:
        assert time.monotonic() < deadline, standalone_cluster.status()
        time.sleep(0.5)

    assert on_cluster["workload"] == runs.local_workload
    check_against_model(runs.local_workload)


def test_engine_through_spark_connect_matches_local(connect_server, runs, tmp_path):
    env = {k: v for k, v in connect_server.env.items() if k != "SPARK_REMOTE"}
    out, log = tmp_path / "result.json", tmp_path / "driver.log"
    args = [connect_server.url, str(tmp_path / "data"), str(out)]
    assert waited(start_script("workload.py", args, env, log)) == 0, log.read_text()[-4000:]
    remote = json.loads(out.read_text())
    assert remote["session"] == "pyspark.sql.connect.session"
    assert remote["workload"] == runs.local_workload
    check_against_model(remote["workload"])
    # format("revisions") registered over Connect: a SQL view of the state as of day 2
    assert remote["source_as_of_day_2"] == runs.local_workload["as_of_day_2"]


def test_demo_pipeline_on_the_standalone_cluster_matches_local(runs):
    """The demo's featurization and scoring assets, materialized by Dagster with
    SPARK_MASTER pointing at the cluster, leave the same datasets as on local[*]."""
    local = runs.local_demo
    assert runs.cluster["demo"] == local
    kinds = [m[2] for m in local["materializations"]]
    assert kinds[2:] == ["major", "minor", "major"]  # features major then minor; first scores
    assert all(t["state"][0] > 0 for t in local["tables"].values())
