"""Settings of the Spark sessions the tests build themselves: the workers' (``spark``,
``s3_spark``), the crash and race processes' (``tests/harness``) and the Pipes tests' job
(``tests/dagster/pipes_job.py``)."""

from __future__ import annotations

#: Spark's interpreted expressions instead of generated code, and no call-site capture. The
#: tests' jobs are tiny: a session spent more of its CPU compiling generated classes (Janino)
#: than running them, and PySpark's DataFrame debugging (on by default) costs each Column
#: function call a walk of the Python stack and five calls into the JVM, to name the
#: caller's line in an error's context (about 8% of an in-process test's CPU). Spark gives
#: the same results either way (its own tests run both); error messages lose that context
#: only. The sessions the product builds in its own processes (the command line, Dagster's
#: runs under dg launch and dg dev, the cluster's driver, the benchmarks' fresh processes)
#: keep Spark's defaults, as users run them: the cluster tests compare their results with
#: the workers'. PySpark reads the debugging setting once per process, from the first
#: session active when a Column function is called: setting it later changes nothing.
TEST_SESSION_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}

#: the session of a process a test starts to crash, race or run a Pipes job in: one core,
#: no UI, little memory (many of them run beside the workers' sessions)
PROCESS_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.driver.memory": "512m",
    **TEST_SESSION_CONF,
}
