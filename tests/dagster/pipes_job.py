"""The remote job of the Pipes tests, launched by a Pipes client as its own process.

It becomes the leader of a new process group first, so a crash test can SIGKILL it with its
JVM. Its own local Spark computes the run the asset's slice describes, with the functions
the in-process assets use (``pipeline_functions``), and commits it through
``revisions_assets.pipes``. Extras: ``events`` (the source rows), and optionally
``kill_at`` (``commit``: stop before the engine's commit; ``report``: after it, before the
report) with ``marker`` (the file it writes its pid to when it stops), ``s3_endpoint`` (the
S3 variant: context and messages through the bucket ``s3_bucket``, data through s3a).
At the end it checks that Dagster itself was never imported.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.setsid()  # its own process group (the Pipes client started it in the test's)

from dagster_pipes import PipesContext, PipesEnvVarParamsLoader  # noqa: E402
from harness.kill_points import stop_at  # noqa: E402
from harness.sessions import PROCESS_CONF  # noqa: E402
from pipeline_functions import events_from_json, featurize, score, window_events  # noqa: E402

from revisions_assets import RevisionedDataset  # noqa: E402
from revisions_assets.core.spark_session import build_spark_session  # noqa: E402
from revisions_assets.pipes import open_revision_job  # noqa: E402


def s3_access() -> dict:
    """The S3 variant's Pipes loader and writer and the engine's storage options, from the
    bootstrap context (the endpoint is in the environment: the extras are not read yet)."""
    endpoint = os.environ.get("REVISIONS_TEST_S3_ENDPOINT")
    if not endpoint:
        return {}
    import boto3
    from dagster_pipes import PipesS3ContextLoader, PipesS3MessageWriter

    client = boto3.client("s3", endpoint_url=endpoint)
    return {
        "context_loader": PipesS3ContextLoader(client),
        "message_writer": PipesS3MessageWriter(client, interval=0.2),
        "storage_options": {"endpoint_url": endpoint},
    }


def main() -> None:
    assert PipesEnvVarParamsLoader().is_dagster_pipes_process(), "not launched by Pipes"
    access = s3_access()
    with open_revision_job(**access) as job:
        kill_at, marker = job.extras.get("kill_at"), job.extras.get("marker")
        if kill_at == "commit":
            stop_at(
                RevisionedDataset, "commit", lambda *a, **k: True, Path(marker), str(os.getpid())
            )
        elif kill_at == "report":
            stop_at(
                PipesContext,
                "report_asset_materialization",
                lambda *a, **k: True,
                Path(marker),
                str(os.getpid()),
            )
        conf = dict(PROCESS_CONF)
        if access:
            from harness.s3_writer_spark import s3a_after_spark

            conf.update(s3a_after_spark(access["storage_options"]["endpoint_url"]))
        spark = build_spark_session(master="local[1]", app_name="pipes-job", conf=conf)
        if job.run.upstream:
            inputs = job.scoring_inputs(spark)
            job.commit(score(inputs.main, **inputs.references))
        else:
            events = events_from_json(job.extras["events"])
            rows = window_events(spark, events, job.window.source_start, job.window.end)
            job.commit({job.run.table: featurize(rows)})
        imported = sorted(m for m in sys.modules if m.split(".")[0] == "dagster")
        assert not imported, f"the remote job imported Dagster: {imported[:5]}"


if __name__ == "__main__":
    main()
