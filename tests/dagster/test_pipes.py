"""Featurized and scoring assets whose Spark runs in a remote job (Dagster Pipes).

The job is a real process (``pipes_job.py``, launched by ``PipesSubprocessClient``) with its
own local Spark, committing through ``revisions_assets.pipes``; the orchestrator's side
reads logs only. The same runs made in process and through Pipes give the same log entries,
rows and materializations; GraphQL shows the remote run's revision metadata. One remote
process (one JVM) per run: the module keeps to three.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import EmptyWorkspaceTarget
from dagster_graphql.test.utils import execute_dagster_graphql
from harness.processes import with_tests_on_path
from pipeline_functions import featurize, window_events
from revisions_pipeline import DAILY, P1, P2, Pipeline

from revisions_assets.core.errors import InvalidArgumentError
from revisions_assets.core.runs.run_slice import RunSlice, RunSliceError
from revisions_assets.dagster import RevisionJob, featurized_asset
from revisions_assets.pipes import JobInput, open_revision_job

pytestmark = pytest.mark.dagster

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "pipes.md"


@pytest.fixture
def instance(instance_on_disk) -> dg.DagsterInstance:
    """On disk: GraphQL reads the remote run's materializations from it."""
    return instance_on_disk


@pytest.fixture
def remote_pipe(tmp_path, spark_resource, instance) -> Pipeline:
    client = dg.PipesSubprocessClient(env=with_tests_on_path(None))
    return Pipeline(str(tmp_path / "remote"), spark_resource, instance, remote=client)


def log_entries(pipe: Pipeline, dataset: str, base: str) -> list[tuple[Any, ...]]:
    """What a log records of each revision, but its random name (roots relative to base)."""
    out = []
    for r in pipe.dataset(dataset).revisions():
        out.append(
            (
                r.kind,
                r.timestamp,
                {
                    t: (w.version, w.rows, w.tombstones, w.rows_offered, len(w.carries))
                    for t, w in r.tables.items()
                },
                dict(r.producer) | {"run_id": bool(r.producer.get("run_id"))},
                dict(r.properties),
                [(p.dataset.removeprefix(base), p.table, p.sequence) for p in r.upstream],
            )
        )
    return out


def shown(result: dg.ExecuteInProcessResult, asset: dg.AssetsDefinition, base: str) -> dict:
    """A run's materialization metadata, paths relative to ``base``, random names dropped."""
    mat = result.asset_materializations_for_node(asset.node_def.name)[0]  # one per partition
    meta = {k: v.value for k, v in mat.metadata.items() if k not in ("revision",)}
    for key in ("dagster/uri", "dataset_root"):
        meta[key] = str(meta[key]).removeprefix(base)
    if "upstream_positions" in meta:
        meta["upstream_positions"] = [
            {**p, "dataset": p["dataset"].removeprefix(base)} for p in meta["upstream_positions"]
        ]
    return {**meta, "data_version": mat.tags.get("dagster/data_version")}


def test_runs_through_pipes_commit_what_in_process_runs_commit(pipe, remote_pipe, instance):
    shown_by, run_ids = {}, {}
    for p in (pipe, remote_pipe):
        p.run(p.groups_asset)
        runs = [
            (p.features, p.run(p.features, P1)),  # a major
            (p.features, p.run(p.features, P2)),  # a minor
            (p.scores, p.run(p.scores, partitions=(P1, P2))),  # a major over both days
        ]
        shown_by[p.base] = [shown(result, asset, p.base) for asset, result in runs]
        run_ids[p.base] = runs[-1][1].run_id
    local, remote = shown_by[pipe.base], shown_by[remote_pipe.base]
    for mine, theirs in zip(local, remote, strict=True):
        assert theirs.pop("remote_report") == "reported by the job"
        assert theirs == mine
    assert [m["kind"] for m in remote] == ["major", "minor", "major"]
    assert remote[2]["upstream_positions"][0]["to"] == 2  # both features revisions consumed
    for dataset in ("main", "out"):
        assert log_entries(remote_pipe, dataset, remote_pipe.base) == log_entries(
            pipe, dataset, pipe.base
        )
    assert remote_pipe.state("main", "features") == pipe.state("main", "features")
    assert remote_pipe.state("out", "scores") == pipe.state("out", "scores")
    # the catalog shows the remote run's revision (GraphQL over the instance's events)
    revision = remote_pipe.dataset("out").revisions("scores")[-1]
    with WorkspaceProcessContext(instance, EmptyWorkspaceTarget()) as workspace:
        answer = execute_dagster_graphql(
            workspace.create_request_context(), MATERIALIZATIONS, {"key": {"path": ["scores"]}}
        )
    assert answer.errors is None, answer.errors
    mats = answer.data["assetOrError"]["assetMaterializations"]
    remote_mats = [m for m in mats if m["runId"] == run_ids[remote_pipe.base]]
    assert {m["partition"] for m in remote_mats} == {P1, P2}
    entries = {e["label"]: e for e in remote_mats[0]["metadataEntries"]}
    assert entries["revision"]["text"] == revision.name
    assert entries["sequence"]["intValue"] == revision.sequence
    assert entries["remote_report"]["text"] == "reported by the job"
    tags = {t["key"]: t["value"] for t in remote_mats[0]["tags"]}
    assert tags["dagster/data_version"] == f"scores@{revision.sequence}"
    # nothing new upstream: the slice says so before any launch, and nothing is materialized
    idle = remote_pipe.run(remote_pipe.scores, P2)
    assert remote_pipe.partitions(idle, remote_pipe.scores) == []
    assert not [e for e in idle.all_events if "[pipes]" in (e.message or "")]


MATERIALIZATIONS = """
query($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) {
    ... on Asset {
      assetMaterializations {
        runId
        partition
        tags { key value }
        metadataEntries {
          label
          ... on TextMetadataEntry { text }
          ... on IntMetadataEntry { intValue }
        }
      }
    }
  }
}
"""


def test_a_job_by_hand_commits_what_its_window_and_the_log_say(pipe, spark, tmp_path):
    root = str(tmp_path / "main")
    day = [datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 2, tzinfo=UTC)]
    by_hand = {"dataset_root": root, "table": "features", "id_columns": ["entity"]}
    with open_revision_job(**by_hand, code_version="1", window=day, is_major=True) as job:
        assert job.run_id == "" and job.window.start == day[0]
        first = job.commit(featurize(window_events(spark, pipe.events, *day)))
    assert first.is_major and first.producer["run_id"] == ""
    # the next day: a minor, decided from the log
    next_day = [day[1], datetime(2024, 1, 3, tzinfo=UTC)]
    with open_revision_job(**by_hand, code_version="1", window=next_day) as job:
        assert not job.is_major and "unchanged since revision 1" in job.reason
        second = job.commit({"features": featurize(window_events(spark, pipe.events, *next_day))})
    assert not second.is_major and second.sequence == 2
    # a new code version makes a major due: the window must cover everything, said so
    with pytest.raises(RunSliceError, match="a major is due .*code version changed"):
        with open_revision_job(**by_hand, code_version="2", window=next_day):
            pass
    # a scoring job by hand: its position is read from its own log, recorded in its revision
    scoring = {"dataset_root": str(tmp_path / "out"), "table": "scores", "id_columns": ["entity"]}
    upstream = [JobInput("features", root, "features")]
    with open_revision_job(**scoring, code_version="1", upstream=upstream) as job:
        inputs = job.scoring_inputs(spark)
        assert job.is_major and job.reason == "first revision of the table"
        scores = job.commit(inputs.main.select("entity", (inputs.main.total * 2).alias("s")))
    assert [(p.table, p.sequence) for p in scores.upstream] == [("features", 2)]
    with pytest.raises(InvalidArgumentError, match="exactly one of them"):
        with open_revision_job(**scoring, code_version="1", upstream=upstream, window=day):
            pass


def test_a_pipes_asset_is_declared_without_a_source(remote_pipe):
    with pytest.raises(InvalidArgumentError, match="takes no source"):
        featurized_asset(
            id_columns=["id"],
            partitions_def=DAILY,
            code_version="1",
            source=lambda spark, start, end: None,
            pipes=True,
        )
    asset = remote_pipe.features
    assert asset.metadata_by_key[asset.key]["revisions/remote"] == "pipes"
    assert "pipes_client" in asset.required_resource_keys
    # the slice travels as plain JSON and comes back whole
    slice_ = RunSlice("features", "/r", "features", ("entity",), "1", True, "why", DAILY.start)
    assert RunSlice.from_dict(RevisionJob(slice_).extras["revisions_slice"]) == slice_
    with pytest.raises(RunSliceError, match="install the same revisions-assets version"):
        RunSlice.from_dict({**slice_.to_dict(), "format": 99})


def test_the_local_recipe_runs_as_written(tmp_path, monkeypatch, instance, capfd):
    """docs/guides/pipes.md's local recipe: its job script as job.py, its asset and
    Definitions, one partition materialized through a subprocess, quietly."""
    text = GUIDE.read_text()
    section = text[text.index("## Try it locally") : text.index("## Shipping the engine")]
    job, declared = re.findall(r"```python\n(.*?)```", section, re.S)
    (tmp_path / "job.py").write_text(job)
    monkeypatch.chdir(tmp_path)
    recipe: dict[str, Any] = {}
    exec(compile(declared, str(GUIDE), "exec"), recipe)
    result = dg.materialize(
        [recipe["local_features"]],
        partition_key="2024-01-01",
        resources=recipe["defs"].resources,
        instance=instance,
    )
    (mat,) = result.asset_materializations_for_node("local_features")
    meta = {k: v.value for k, v in mat.metadata.items()}
    assert (meta["kind"], meta["rows"], meta["remote_report"]) == (
        "major",
        2,
        "reported by the job",
    )
    assert "[Stage " not in capfd.readouterr().err  # Spark's progress bars stay off
