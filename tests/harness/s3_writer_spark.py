"""The SparkSession of a writer process of the S3 tests: local[1], s3a at the loopback server
(shared by tests/s3/crash_writer.py and commit_writer.py, and the Pipes tests' job on S3)."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from harness.sessions import PROCESS_CONF
from revisions_assets.core.spark_session import build_spark_session
from revisions_assets.s3a import s3a_conf, s3a_jars


def s3a_after_spark(endpoint: str) -> dict[str, str]:
    """The s3a settings of a test process's session, with the connector's jars appended to the
    JVM's class path (``SPARK_DIST_CLASSPATH``, read by Spark's launcher) instead of put first
    (``s3a_conf``'s default): the archive of Spark's classes (harness/jvm_archive.py) applies
    only to a class path that begins as the archive's did, and halves such a JVM's start-up
    CPU. The workers' own sessions keep the default, as users run it."""
    os.environ["SPARK_DIST_CLASSPATH"] = os.pathsep.join(str(jar) for jar in s3a_jars())
    return dict(s3a_conf(endpoint_url=endpoint, jars="none"))


def writer_spark(endpoint: str, app_name: str) -> SparkSession:
    return build_spark_session(
        master="local[1]",
        app_name=app_name,
        conf={**s3a_after_spark(endpoint), **PROCESS_CONF},
    )
