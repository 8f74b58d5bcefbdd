"""``format("revisions")``: revisioned datasets as a Spark data source, on PySpark's Python
Data Source API.

Spark runs a Python data source in Python processes of its own: the source's schema and
partitions are planned in processes on the driver, its rows read in the executors' Python
workers. ``RevisionsDataSource`` plans a read once (``planning.py``: one snapshot of the
log, the engine's plan) when Spark asks for its schema, and hands the plan to its reader,
which splits it into parts; each task reads its part with the engine's Polars executor
(``worker.py``) and streams Arrow batches to Spark. Nothing is collected to the driver.

A batch read (``spark.read``, SQL's ``USING revisions``) returns what the library's read
with the same options returns; a stream (``spark.readStream``) is the table's change feed
(``stream.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, Filter, InputPartition

from ..core.errors import InvalidArgumentError
from .filters import taken
from .options import parse_options
from .planning import PlannedRead, check_schema, plan_source_read, split
from .worker import ReadPart, read_part

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSourceStreamReader
    from pyspark.sql.types import StructType

#: the format's name: ``spark.read.format("revisions")``, ``USING revisions``
FORMAT = "revisions"
#: Spark calls ``pushFilters`` of a Python data source only when this is on
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


class RevisionsDataSource(DataSource):
    """A revisioned dataset's table as a Spark data source (``format("revisions")``): the
    options are those of ``RevisionedDataset.read``, ``changes`` and ``history``
    (docs/guides/spark-sql.md); ``readStream`` gives the table's change feed
    (docs/guides/change-feed.md)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _planned(self) -> PlannedRead:
        """The read, planned once: Spark asks for the schema, then for a reader, of the same
        copy of the source (pickled between the two), so both see one snapshot."""
        planned = getattr(self, "_read", None)
        if planned is None:
            planned = plan_source_read(parse_options(self.options))
            self._read: PlannedRead | None = planned
        return planned

    def schema(self) -> StructType:
        return self._planned().spark_schema

    def reader(self, schema: StructType) -> RevisionsReader:
        planned = self._planned()
        self._read = None  # the copy each task gets needs no plan: its part carries one
        given = planned.options.stream.given
        if given:
            raise InvalidArgumentError(
                f"{planned.plan.what}: the options {list(given)} set how a change feed "
                "follows the log; they apply to spark.readStream only"
            )
        check_schema(planned.fields, schema, planned.plan.what)
        return RevisionsReader(planned, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .stream import ChangeFeedReader

        return ChangeFeedReader(parse_options(self.options), schema)


class RevisionsReader(DataSourceReader):
    """The batch reader of one planned read: takes the filters on the id columns, splits the
    plan into parts, reads a part in a task."""

    def __init__(self, planned: PlannedRead, schema: StructType):
        self._planned: PlannedRead | None = planned
        self.schema = schema
        self.conditions: list[Filter] = []

    def __getstate__(self) -> dict[str, Any]:
        # Spark ships the reader to every task: the plan travels in the parts only
        return {**self.__dict__, "_planned": None}

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        assert self._planned is not None
        ids = self._planned.id_columns
        for condition in filters:
            if taken(condition, ids):
                self.conditions.append(condition)
            else:
                yield condition

    def partitions(self) -> list[InputPartition]:
        assert self._planned is not None
        return list(split(self._planned, self.conditions))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ReadPart)
        return read_part(partition, self.schema)


def register(spark: SparkSession) -> None:
    """Make ``format("revisions")`` available in ``spark`` (a classic session or a Spark
    Connect client): ``spark.read``/``readStream.format("revisions")`` and SQL's
    ``CREATE TEMPORARY VIEW ... USING revisions``. Also turns on Spark's filter pushdown
    into Python data sources (``spark.sql.python.filterPushdown.enabled``), which the
    source's reader needs. The Python processes of Spark run the source: they need this
    package (docs/guides/spark-sql.md, "Where it runs")."""
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(RevisionsDataSource)
