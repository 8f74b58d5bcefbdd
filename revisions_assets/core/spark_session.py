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
import tempfile
from collections.abc import Mapping
from pathlib import Path

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


#: the root logger at a level; the logger of PySpark's gateway too: Spark starts it as a
#: shell, whose level is WARN unless configured (it then prints 'Setting default log level to
#: "WARN"')
QUIET_LOG4J = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = stderr
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = {level}
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %p %c{1}: %m%n%ex
"""


def quiet_log4j_config(level: str = "error") -> Path:
    """A log4j2 configuration for a JVM that should log at ``level`` and above only (no WARN
    lines at start or during jobs), written once per machine: give a new session
    ``spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=<its URI>``."""
    text = QUIET_LOG4J.replace("{level}", level)
    path = Path(tempfile.gettempdir()) / f"revisions-log4j2-{level}.properties"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path
