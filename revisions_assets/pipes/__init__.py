"""The remote side of Dagster Pipes: a Spark job that computes and commits one run's revision.

A ``pipes=True`` featurized or scoring asset (``revisions_assets.dagster``) resolves the
run's slice and launches a job with a Pipes client; the job opens the run here::

    from revisions_assets.pipes import open_revision_job

    with open_revision_job() as job:       # the Pipes context and the run's slice
        spark = job.spark()
        rows = compute(spark, job.window.start, job.window.end)
        job.commit({"features": rows})     # the engine's commit at the slice; reported

The job needs ``pip install 'revisions-assets[pipes]'`` (the engine, pyspark and
``dagster-pipes``), not Dagster itself. Run by hand (no Pipes context), the same script takes
its slice as arguments: ``open_revision_job(dataset_root=..., table=..., ...)``.
"""

from ..core.extras import needs_extra

with needs_extra("revisions_assets.pipes", "pipes"):
    from .by_hand import JobInput, slice_by_hand
    from .job import JobCommitError, RevisionJobContext, Window, open_revision_job

__all__ = [
    "JobCommitError",
    "JobInput",
    "RevisionJobContext",
    "Window",
    "open_revision_job",
    "slice_by_hand",
]
