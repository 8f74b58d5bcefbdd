"""The SparkSession of a writer process of the S3 tests: local[1], s3a at the loopback server
(shared by tests/s3/crash_writer.py and commit_writer.py)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from harness.sessions import PROCESS_CONF
from revisions_assets.core.spark_session import build_spark_session
from revisions_assets.s3a import s3a_conf


def writer_spark(endpoint: str, app_name: str) -> SparkSession:
    return build_spark_session(
        master="local[1]",
        app_name=app_name,
        conf={
            **s3a_conf(endpoint_url=endpoint),
            **PROCESS_CONF,
        },
    )
