"""Settings of the Spark sessions the test workers hold (``spark``, ``s3_spark``)."""

from __future__ import annotations

#: Spark's interpreted expressions instead of generated code. The tests' jobs are tiny: a
#: worker's JVM spent more of its time compiling generated classes (Janino) than running
#: them, about a tenth of the suite's CPU. Spark gives the same results either way (its own
#: tests run both). Every JVM a test starts as a process (the command line, Dagster's runs,
#: Pipes jobs, the cluster, the demo's runs under dg dev) keeps Spark's default, generated
#: code, as users run it.
INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
