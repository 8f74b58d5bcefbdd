"""An S3-compatible server on loopback (moto), started and stopped by the tests themselves
(``bench/s3_server.py``: the benchmarks run the same one); its log of requests counts what a
read fetched.

Spark reaches it through the real ``s3a`` connector. The connector's jars must be on the
JVM's classpath when it starts, so the shared SparkSession has to be built with
``revisions_assets.s3a.s3a_conf()``: this conftest builds it that way when it is the first
Spark user of the process, and fails loudly (instead of skipping) when a session without
the connector is already running.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Iterator

import boto3
import pytest
from harness.sessions import TEST_SESSION_CONF
from pyspark.sql import SparkSession

from bench.s3_server import S3Server
from revisions_assets.core.spark_session import build_spark_session
from revisions_assets.s3a import apply_s3a_conf, s3a_conf

BUCKET = "revisions-tests"
#: fake credentials for the loopback server; tests assert they never leak
ACCESS_KEY = "AKIAREVISIONSTESTKEY"
SECRET_KEY = "revisions/Test+Secret/Key/never-printed"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A fresh moto server on 127.0.0.1 holding bucket BUCKET, logging its requests."""
    server = S3Server()
    boto3.client("s3", **server.options(ACCESS_KEY, SECRET_KEY)).create_bucket(Bucket=BUCKET)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_options(s3_server) -> dict[str, str]:
    """Storage options that reach the server with the fake credentials."""
    return s3_server.options(ACCESS_KEY, SECRET_KEY)


@pytest.fixture(scope="session")
def s3_env(s3_options) -> dict[str, str]:
    """The environment of a child process that reaches the server with its credentials."""
    return {
        **os.environ,
        "AWS_ACCESS_KEY_ID": s3_options["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": s3_options["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": s3_options["region_name"],
    }


def new_s3_root(label: str = "dataset") -> str:
    """A fresh dataset root in the test bucket."""
    return f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}/{label}"


@pytest.fixture
def s3_root() -> str:
    return new_s3_root()


@pytest.fixture(scope="session")
def s3_root_factory() -> Callable[[str], str]:
    return new_s3_root


@pytest.fixture(scope="session")
def s3_spark(s3_options) -> Iterator[SparkSession]:
    """The process's SparkSession, with s3a pointed at the loopback server."""
    session = SparkSession.getActiveSession()
    if session is None:
        # first Spark user of this process: start the JVM with the connector on its classpath
        session = build_spark_session(
            master="local[2]",
            app_name="revisions-assets-tests",
            conf={
                **s3a_conf(),
                "spark.ui.enabled": "false",
                "spark.driver.memory": "2g",
                "spark.sql.shuffle.partitions": "2",
                "spark.default.parallelism": "2",
                **TEST_SESSION_CONF,
            },
        )
    try:
        session._jvm.java.lang.Class.forName(
            "org.apache.hadoop.fs.s3a.S3AFileSystem",
            True,
            session._jvm.Thread.currentThread().getContextClassLoader(),
        )
    except Exception:  # py4j error: the class is not on the running JVM's classpath
        pytest.fail(
            "the shared SparkSession was started without the s3a connector: build it with "
            "revisions_assets.s3a.s3a_conf() in tests/conftest.py, or run the S3 tests in "
            "their own process (python -m pytest -m s3 tests/s3)"
        )
    apply_s3a_conf(session, s3a_conf(**s3_options, jars="none"), bucket=BUCKET)
    yield session
    session.stop()  # idempotent: the shared fixture may stop the same session again
