"""The Spark executor: a ``MergePlan`` as one Spark plan; nothing is collected to the driver.

"Latest row per entity wins" is done by Spark, on the rows ``spark_scan`` reads (each
knowing its revision's order). Two physical plans for the base and the rows on top of it
(Spark-specific tuning; the Polars executor runs the same program its own way):

* ``broadcast``: one broadcast of the newer rows' ids and order; the base anti-joined with
  it, unioned with the newer rows anti-joined with the later ones among them. No shuffle
  at all: the base is read once, the newer rows twice (for the broadcast, and as rows).
* ``window``: ``row_number()`` over all rows, partitioned by the ids. Shuffles
  everything; right when the updates are as big as the base, or when some revision read
  on top of a compaction is older than rows the compaction holds (an out-of-order
  backfill).

``auto`` picks by the row counts recorded in the log.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import reduce
from typing import Literal

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructType, TimestampType

from ...columns import DELETED, ROW_HASH, SOURCE_SEQUENCE
from ...errors import RevisionsError, StorageError
from ...hashing import row_hash
from ...spark_columns import column
from ...spark_errors import damaged_file, storage_cause
from ...storage.base import Storage
from ...timeutil import to_micros
from ..plan.as_of_join import AsOfJoinPlan
from ..plan.requests import LogSnapshot, current_schema
from ..plan.scans import MergePlan, major_schema
from ..plan.schema import Schema
from .as_of_join import spark_as_of_join
from .files import damaged_file_error, missing_file_error
from .frames import SMALL_ROWS, SPAN_ORDER, STATE, Executor, Rows, SpanScan
from .spark_scan import (
    ORDER,
    SEQUENCE,
    STAMP,
    Scanner,
    empty_frame,
    file_key,
    revision_rows,
    revision_value,
    spark_file_key,
    spark_schema,
)

MergeStrategy = Literal["auto", "broadcast", "window"]
_LATER = "__later_order"


def state_schemas(snapshot: LogSnapshot, table: str) -> tuple[StructType, StructType]:
    """(the governing major's schema, the current state's schema) of ``table`` at the head,
    as Spark types (what a commit's schema is checked against)."""
    major = major_schema(snapshot.view, table)
    return spark_schema(major), spark_schema(current_schema(snapshot, table))


def _about(plan: MergePlan) -> dict[int, tuple]:
    """(sequence, order, name, timestamp in µs) of every revision of the plan's merge, and
    of the tasks older than it (order -1)."""
    about = {
        r.sequence: (r.sequence, n, r.name, to_micros(r.timestamp))
        for n, r in enumerate(plan.merge)
    }
    for t in (*plan.tasks, *(plan.only_ids_of or ())):
        if not t.is_compaction and t.sequence not in about:
            about[t.sequence] = (t.sequence, t.order, t.entry, to_micros(t.timestamp))
    return about


def merge_kind(plan: MergePlan, strategy: MergeStrategy = "auto") -> str:
    """``single`` (nothing on top of the base), ``broadcast`` or ``window`` for a plan."""
    if not plan.newer:
        return "single"
    if not plan.base_is_prefix:
        return "window"
    if strategy != "auto":
        return strategy
    newer = sum(t.rows for t in plan.newer)
    return "broadcast" if newer <= min(SMALL_ROWS, max(plan.base.rows, 1)) else "window"


def _latest_per_entity(df: DataFrame, ids: Sequence[str]) -> DataFrame:
    by_entity = Window.partitionBy(*map(column, ids)).orderBy(F.col(ORDER).desc())
    rank = F.row_number().over(by_entity)
    return df.withColumn("__rank", rank).where(F.col("__rank") == 1).drop("__rank")


def latest_frame(
    spark: SparkSession,
    storage: Storage,
    plan: MergePlan,
    rows_wanted: Rows,
    strategy: MergeStrategy = "auto",
    check_hashes: bool = False,
) -> DataFrame:
    """The latest row per entity over a merge plan, tombstones included, with the revision
    columns or ``_revision_sequence`` if ``rows_wanted`` asks; ``check_hashes``: every row
    read fails the job if its stored hash disagrees with its values (``Scanner``)."""
    ids = list(plan.id_columns)
    checked = ids if check_hashes else None
    scan = Scanner(spark, storage, plan.schema, _about(plan), checked)
    newer = plan.newer
    kind = merge_kind(plan, strategy)

    with_revision = rows_wanted.with_revision
    annotate_base = with_revision or kind == "window"
    annotate_newer = with_revision or kind == "window" or len(newer) > 1
    if plan.base.is_compaction:
        base = scan.compaction(plan.base, annotate_base)
    else:
        base = scan.revisions([plan.base], annotate_base)
    if kind == "single":
        merged = base
    elif kind == "broadcast":
        rows = scan.revisions(newer, annotate_newer)
        # one broadcast of the newer rows' ids (and order): the base rows they replace and
        # the newer rows a later one replaces drop out by anti-joins, with no shuffle
        keys = rows.select(
            *[column(c).alias("__key_" + c) for c in ids],
            *([F.col(ORDER).alias(_LATER)] if len(newer) > 1 else []),
        )
        keys = F.broadcast(keys)
        same = reduce(operator.and_, [column(c) == column("__key_" + c) for c in ids])
        kept = base.join(keys, on=same, how="left_anti")
        top = rows
        if len(newer) > 1:
            replaced = same & (F.col(ORDER) < F.col(_LATER))
            top = rows.join(keys, on=replaced, how="left_anti")
        merged = kept.unionByName(top, allowMissingColumns=True)
    else:
        rows = scan.revisions(newer, True)
        merged = _latest_per_entity(base.unionByName(rows), ids)
    if with_revision:
        return merged.withColumns(
            {
                "_revision_timestamp": F.timestamp_micros(F.col(STAMP)),
                "_revision_sequence": F.col(SEQUENCE),
            }
        )
    if rows_wanted.with_sequence:
        return merged.withColumn(SOURCE_SEQUENCE, F.col(SEQUENCE))
    return merged


class SparkExecutor(Executor[DataFrame]):
    """Runs plans on Spark: the session (asked for only when a read runs), where the files
    are, and the merge strategy. The files of a plan have passed the file gate
    (``execute/files.py``) first. ``check_hashes``: the rows a merge reads are checked
    against their stored hashes as they are read (what compaction rewrites)."""

    def __init__(
        self,
        storage: Storage,
        spark: Callable[[], SparkSession],
        strategy: MergeStrategy,
        check_hashes: bool = False,
    ):
        self.storage = storage
        self._spark = spark
        self.strategy = strategy
        self.check_hashes = check_hashes

    def checking_hashes(self) -> SparkExecutor:
        """This executor, checking every row it reads against its stored hash: a row whose
        values changed since it was written fails the job (``failures`` names its file)."""
        return SparkExecutor(self.storage, self._spark, self.strategy, check_hashes=True)

    @property
    def spark(self) -> SparkSession:
        return self._spark()

    def merge(self, plan: MergePlan, rows: Rows = STATE) -> DataFrame:
        """The rows of ``plan`` as one Spark plan; a storage failure names the files."""
        with self.failures(plan.table, plan.files):
            return super().merge(plan, rows)

    def as_of_join(
        self, plan: AsOfJoinPlan, events: DataFrame, *, event_time: str, on: object
    ) -> DataFrame:
        return spark_as_of_join(
            self.spark, self.storage, plan, events, event_time=event_time, on=on
        )

    def read_failure(
        self,
        table: str,
        files: Sequence[tuple[str, str]],
        exc: BaseException,
        operation: str | None = None,
    ) -> StorageError | None:
        """A storage failure of a Spark job over ``files`` (entry, path) of ``table``, naming
        the missing data files when files are gone (removed after the file gate passed
        them), or the damaged file the job failed on (``spark_errors.damaged_file``); None
        for other failures. ``operation``: what the job did, for another storage failure
        (by default, a read of the table)."""
        cause = storage_cause(exc)
        if cause is not None:
            missing = [(name, f) for name, f in files if not self.storage.exists(f)]
            if not missing:
                operation = operation or f"read table {table!r} of {self.storage.uri}"
                return StorageError(f"{operation}: {cause}")
            name, path = missing[0]
            return missing_file_error(self.storage.uri, name, table, path, len(missing) - 1)
        damage = damaged_file(exc)
        if damage is None:
            return None
        reported, problem = damage
        key = spark_file_key(reported)
        name, path = next(((n, f) for n, f in files if file_key(f) == key), ("?", reported))
        return damaged_file_error(self.storage.uri, name, table, path, problem)

    @contextmanager
    def failures(
        self, table: str, files: Sequence[tuple[str, str]], operation: str | None = None
    ) -> Iterator[None]:
        """A block of Spark jobs over ``files`` (entry, path) of ``table``: a storage failure
        or a damaged file becomes the error that names it (``read_failure``)."""
        try:
            yield
        except RevisionsError:
            raise
        except Exception as exc:
            failure = self.read_failure(table, files, exc, operation)
            if failure is None:
                raise
            raise failure from exc

    def latest(self, plan: MergePlan, rows: Rows) -> DataFrame:
        return latest_frame(
            self.spark, self.storage, plan, rows, self.strategy, check_hashes=self.check_hashes
        )

    def only_entities_of(self, frame: DataFrame, plan: MergePlan) -> DataFrame:
        tasks = plan.only_ids_of or ()
        touched = Scanner(self.spark, self.storage, plan.schema, {}).ids_of(tasks, plan.id_columns)
        if sum(t.rows for t in tasks) <= SMALL_ROWS:
            touched = F.broadcast(touched)
        return frame.join(touched, on=list(plan.id_columns), how="left_semi")

    def empty(self, schema: Schema, rows: Rows) -> DataFrame:
        df = empty_frame(self.spark, spark_schema(schema))
        if rows.keep_deleted:
            df = df.withColumn(DELETED, F.lit(False))
        if rows.with_revision:
            df = df.withColumns(
                {
                    "_revision": F.lit(None).cast("string"),
                    "_revision_timestamp": F.lit(None).cast("timestamp"),
                    "_revision_sequence": F.lit(None).cast("long"),
                }
            )
        return df

    def rehash(self, frame: DataFrame, columns: Sequence[str]) -> DataFrame:
        hashed = row_hash(frame.schema, columns)
        if DELETED in frame.columns:
            hashed = F.when(~F.col(DELETED), hashed)
        return frame.withColumn(ROW_HASH, hashed)

    def broadcast(self, frame: DataFrame) -> DataFrame:
        return F.broadcast(frame)

    def span_rows(self, scan: SpanScan) -> DataFrame:
        types = {"timestamp": TimestampType(), "string": StringType()}
        rows = revision_rows(
            self.spark, self.storage, scan.schema, scan.tasks, scan.base, scan.base_orders
        )
        rows = rows.withColumns(
            {name: revision_value(v, types[kind]) for name, (v, kind) in scan.values.items()}
        )
        return rows.withColumnRenamed(ORDER, SPAN_ORDER)
