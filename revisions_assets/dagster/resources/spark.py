"""The SparkSession as a Dagster resource, created lazily (no JVM for sensors or the UI)."""

from typing import Any

from dagster_pyspark import LazyPySparkResource
from pydantic import Field, PrivateAttr
from pyspark.sql import SparkSession

from revisions_assets.core.spark_session import build_spark_session, quiet_log4j_config

JAVA_OPTIONS = "spark.driver.extraJavaOptions"


class SparkSessionResource(LazyPySparkResource):
    """dagster-pyspark's lazy resource, built by ``revisions_assets.build_spark_session``.

    So ``SPARK_REMOTE`` (Spark Connect) and ``SPARK_MASTER`` are honoured at run time,
    and a session already running in the process (a test's) is reused: one JVM. A session it
    starts logs errors only (``quiet_logs``).
    """

    spark_config: dict[str, Any] = Field(
        default_factory=dict, description="Extra Spark settings (override the engine defaults)."
    )
    master: str | None = Field(
        default=None, description="Spark master URL; default SPARK_MASTER or local[*]."
    )
    remote: str | None = Field(
        default=None, description="Spark Connect URL; default SPARK_REMOTE (wins over master)."
    )
    app_name: str = Field(default="revisions-assets", description="Spark application name.")
    quiet_logs: bool = Field(
        default=True,
        description="Spark's own log at ERROR: no WARN lines when a run's session starts or "
        "while it runs (a local session, started by the run; errors are still logged). "
        "False: Spark's defaults. Ignored when spark_config sets log4j2.configurationFile in "
        "spark.driver.extraJavaOptions.",
    )
    _session: SparkSession | None = PrivateAttr(default=None)

    @classmethod
    def _is_dagster_maintained(cls) -> bool:
        return False

    @property
    def spark_session(self) -> SparkSession:
        if self._session is None:
            conf = {k: str(v) for k, v in self.spark_config.items()}
            options = conf.get(JAVA_OPTIONS, "")
            if self.quiet_logs and "log4j2.configurationFile" not in options:
                quiet = f"-Dlog4j2.configurationFile={quiet_log4j_config().as_uri()}"
                conf[JAVA_OPTIONS] = f"{options} {quiet}".strip()
            self._session = build_spark_session(
                master=self.master, remote=self.remote, app_name=self.app_name, conf=conf
            )
        return self._session

    @property
    def spark_context(self) -> Any:
        return self.spark_session.sparkContext
