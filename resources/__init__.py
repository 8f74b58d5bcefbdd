"""This project's Dagster resources: where the demo's datasets live and which Spark runs
them, configured from the environment and built from the library's classes
(``revisions_assets.dagster``). A project of yours keeps its own resources beside its
definitions, the same way; this package is not part of the ``revisions-assets`` wheel.

- ``REVISIONS_DATASETS``: the datasets' root, a path or ``s3://`` URI (default: the
  repository's ``demo_data/datasets``, git-ignored);
- ``SPARK_REMOTE`` / ``SPARK_MASTER``: read by the session resource when a run starts
  (default: ``local[*]``).
"""

from __future__ import annotations

import os
from pathlib import Path

from revisions_assets.dagster import SparkSessionResource

DATASETS_ENV = "REVISIONS_DATASETS"
LOCAL_DATASETS = Path(__file__).resolve().parents[1] / "demo_data" / "datasets"


def datasets_root() -> str:
    """The root of the demo's datasets: ``REVISIONS_DATASETS``, else demo_data/datasets."""
    return os.environ.get(DATASETS_ENV) or str(LOCAL_DATASETS)


def spark() -> SparkSessionResource:
    """The Spark session of the runs (created lazily: sensors and the UI start no JVM)."""
    return SparkSessionResource(app_name="revisions-assets-demo")
