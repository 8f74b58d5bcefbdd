"""Building the SparkSession: local[*] by default, a cluster or Spark Connect when asked.

Precedence: explicit arguments, then ``SPARK_REMOTE`` (Spark Connect) or
``SPARK_MASTER`` from the environment, then ``local[*]``. Read at call time,
never at import time.

A local session's Python workers (the ``format("revisions")`` data source, UDFs) run the
driver's own interpreter, with its packages, unless ``PYSPARK_PYTHON`` names another:
PySpark's default is whatever ``python3`` the ``PATH`` finds first, which often lacks them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from .arguments import check_text, check_type

#: settings that suit small and medium revisions; every one can be overridden
DEFAULT_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.parquet.compression.codec": "snappy",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.sources.partitionOverwriteMode": "static",
}


def build_spark_session(
    master: str | None = None,
    remote: str | None = None,
    app_name: str = "revisions-assets",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Get or create the SparkSession for the engine (see module docstring for precedence)."""
    check_text(master, "master", optional=True)
    check_text(remote, "remote", optional=True)
    check_text(app_name, "app_name")
    if conf is not None:
        check_type(conf, Mapping, "conf", "a dict of Spark settings")
        for key, value in conf.items():
            check_text(key, "a key of conf")
            check_type(value, (str, int, float, bool), f"conf[{key!r}]", "a string or number")
    remote = remote or (None if master else os.environ.get("SPARK_REMOTE"))
    builder = SparkSession.builder.appName(app_name)
    if remote:
        builder = builder.remote(remote)
    else:
        master = master or os.environ.get("SPARK_MASTER") or "local[*]"
        builder = builder.master(master)
        if master.startswith("local"):  # read by PySpark when it starts the SparkContext
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = {**DEFAULT_CONF, **(conf or {})}
    for key, value in settings.items():
        if remote and not key.startswith("spark.sql."):
            continue  # a Connect client cannot set static/core settings of the server
        builder = builder.config(key, value)
    return builder.getOrCreate()
