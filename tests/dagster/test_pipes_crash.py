"""A remote job (Dagster Pipes) killed at the worst moments: the log decides what the run shows.

The job (``pipes_job.py``, its own process and JVM) stops at a kill point and the test
SIGKILLs its process group: before its commit (nothing committed, the run fails with the
job's error), then, in the next run, after its commit and before its report (the run finds
the revision by its run id and reports it, once).
"""

from __future__ import annotations

import dagster as dg
import pytest
from harness.processes import killing_at, with_tests_on_path
from revisions_pipeline import P1, Pipeline

from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage

pytestmark = pytest.mark.dagster


def test_a_killed_job_commits_once_or_not_at_all(tmp_path, spark_resource, instance):
    client = dg.PipesSubprocessClient(env=with_tests_on_path(None))
    pipe = Pipeline(str(tmp_path / "remote"), spark_resource, instance, remote=client)
    features = pipe.features
    log = RevisionLog(open_storage(f"{pipe.base}/main"))

    marker = tmp_path / "before-commit"
    pipe.remote_extras = {"kill_at": "commit", "marker": str(marker)}
    with killing_at(marker):
        failed = pipe.run(features, P1, raise_on_error=False)
    assert not failed.success
    (failure,) = [e for e in failed.all_events if e.is_step_failure]
    error = failure.step_failure_data.error.cause  # what the asset raised
    assert error.cls_name == "RemoteJobError"
    assert "the remote job failed and committed nothing" in error.message
    assert "External execution process failed with code -9" in error.message  # the job's
    assert log.refresh() == ()  # nothing committed
    assert not instance.fetch_materializations(features.key, limit=10).records

    marker = tmp_path / "before-report"
    pipe.remote_extras = {"kill_at": "report", "marker": str(marker)}
    with killing_at(marker):
        result = pipe.run(features, P1)  # the run succeeds: the log has its revision
    (revision,) = log.refresh()
    assert revision.producer["run_id"] == result.run_id
    meta = pipe.meta(result, features)
    assert meta["remote_report"] == "lost: found in the log by the run's id"
    assert "failed with code -9" in meta["remote_error"]
    assert (meta["sequence"], meta["kind"], meta["rows"]) == (1, "major", 3)
    assert meta["data_version"] == "features@1"
    # reported exactly once, with the data version of the revision
    (record,) = instance.fetch_materializations(features.key, limit=10).records
    event = record.asset_materialization
    assert event.tags["dagster/data_version"] == "features@1"
    assert set(pipe.state("main", "features")) == {"a", "b", "c"}
