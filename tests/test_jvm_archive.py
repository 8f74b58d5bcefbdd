"""The tests' JVMs load Spark's classes from the archive the test command builds
(tests/harness/jvm_archive.py): a JVM started as the tests start Spark (``spark-submit``,
``SPARK_SUBMIT_OPTS``) finds Spark's own classes in it. Built here if it is missing, so a
build that leaves no archive fails this test rather than slowing the suite unseen."""

from __future__ import annotations

import os
import subprocess

import pytest
from harness.jvm_archive import BASE_JVM_OPTS, archive_option, ensure, spark_jars


@pytest.mark.slow  # builds the archive when it is missing (a JVM, ~40 s)
def test_a_spark_jvm_loads_its_classes_from_the_archive():
    archive = ensure()
    assert archive is not None and archive.exists(), "the JVM archive could not be built"
    assert str(archive) in archive_option()
    flags = f"{BASE_JVM_OPTS} {archive_option()} -Xlog:class+load=info"
    done = subprocess.run(
        [str(spark_jars().parent / "bin" / "spark-submit"), "--version"],
        env={**os.environ, "SPARK_SUBMIT_OPTS": flags},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    loaded = [
        line for line in done.stdout.splitlines() if " org.apache.spark.deploy.SparkSubmit " in line
    ]
    assert loaded and loaded[0].endswith("source: shared objects file (top)"), loaded
