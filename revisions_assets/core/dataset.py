"""RevisionedDataset: commit revisions, read any state, read changes, maintain."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from functools import cached_property
from os import PathLike
from typing import Any, get_args

import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructType

from .arguments import (
    check_bool,
    check_choice,
    check_count,
    check_duration,
    check_options,
    check_sequence_number,
    check_spark,
    check_tables,
    check_text,
)
from .errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    ReadOnlyDatasetError,
    RevisionsError,
)
from .log.records import Revision, UpstreamPosition
from .log.revision_log import RevisionLog, table_frame
from .log.view import LogView
from .maintain.compaction import DEFAULT_TARGET_FILE_BYTES, Compactor
from .maintain.legacy import LegacyRevision, plan_import
from .maintain.purge import Purge
from .maintain.vacuum import DEFAULT_GRACE, Vacuum, VacuumReport, consumer_positions
from .maintain.verify import Finding, deep_findings, deep_skipped, verify_storage
from .read.execute.files import FileGate
from .read.execute.spark import MergeStrategy, SparkExecutor
from .read.execute.spark_ids import spark_id_bounds
from .read.execute.spark_scan import spark_schema
from .read.facade import DatasetReads
from .read.plan.pruning import IdBounds
from .read.plan.schema import Schema
from .read.scan import Scan
from .storage.backends import open_storage
from .storage.base import Storage
from .timeutil import TimeLike, now_utc, to_utc
from .uris import describe
from .write.commit import CommitPlanner
from .write.transaction import CommitRequest, CommitTransaction
from .write.validation import normalize_id_columns

log = logging.getLogger(__name__)


#: the default policy: compact a table once more than this many revisions sit on its base
DEFAULT_COMPACT_AFTER = 20


class RevisionedDataset(DatasetReads[DataFrame, StructType]):
    """A revisioned dataset at ``root``: opens it, or creates it on the first commit.

    ``id_columns``: one list for every table, or a dict ``{table: [ids]}`` that also
    declares the tables this handle may write. Reads never modify the handle; each read
    and commit first catches up with revisions committed by others. ``read_only=True``
    never writes to the root (a stale ``description.parquet`` is left as it is) and
    refuses commits and maintenance with ``ReadOnlyDatasetError``.
    ``compact_after``: after a commit that leaves more than this many revisions on top of
    a table's base (its major or compaction), compact it (``None``: never on its own).
    ``skip_unchanged``: the default of ``commit(skip_unchanged=...)``.

    Opening checks the log (no gap, nothing lost, every entry well formed) and raises
    CorruptLogError on damage, writing nothing;
    ``revisions_assets.core.maintain.verify.verify(root)`` lists what is wrong with a damaged
    dataset.
    """

    def __init__(
        self,
        root: str | PathLike[str] | Storage,
        spark: SparkSession | None = None,
        id_columns: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
        *,
        merge_strategy: MergeStrategy = "auto",
        storage_options: Mapping[str, object] | None = None,
        read_only: bool = False,
        compact_after: int | None = DEFAULT_COMPACT_AFTER,
        skip_unchanged: bool = False,
    ):
        options = check_options(storage_options, "storage_options")
        self._spark = check_spark(spark)
        strategy = check_choice(merge_strategy, get_args(MergeStrategy), "merge_strategy")
        default_ids, declared = normalize_id_columns(id_columns)
        self.storage = open_storage(root, **options)
        self.root = self.storage.uri
        self.read_only = check_bool(read_only, "read_only")
        self.compact_after = check_count(compact_after, "compact_after", minimum=0, optional=True)
        self.skip_unchanged = check_bool(skip_unchanged, "skip_unchanged")
        self._last_compactions: tuple[Revision, ...] = ()
        self._log = RevisionLog(self.storage)
        self._executor = SparkExecutor(self.storage, lambda: self.spark, strategy)
        self._gate = FileGate(self.storage)
        self._planner = CommitPlanner(self._log, self._executor, self._gate, declared, default_ids)
        self._log.refresh()
        if not read_only:
            self._heal_description()

    @property
    def merge_strategy(self) -> MergeStrategy:
        """How Spark merges minors onto their base (``read/execute/spark.py``)."""
        return self._executor.strategy

    def __repr__(self) -> str:
        return f"RevisionedDataset({self.root!r}, head={self._log.head})"

    @classmethod
    def import_legacy(
        cls,
        src: str | PathLike[str],
        root: str | PathLike[str],
        *,
        spark: SparkSession,
        id_columns: Sequence[str] | Mapping[str, Sequence[str]] | None = None,
        tz: str = "UTC",
        storage_options: Mapping[str, object] | None = None,
        progress: Callable[[LegacyRevision, Revision | None], None] | None = None,
    ) -> RevisionedDataset:
        """A new dataset at ``root`` with the history of a dataset of the original layout.

        Same revisions, names, timestamps, majors and versions (``core/maintain/legacy.py``); each
        featurizer becomes a table, its pandas index the id columns unless ``id_columns``
        says otherwise. Naive timestamps are taken in ``tz`` (with a warning). The source
        is only read; a target that already has revisions is refused.
        """
        plan = plan_import(src, id_columns=id_columns, tz=tz, storage_options=storage_options)
        target = cls(root, spark=spark, id_columns=plan.id_columns, storage_options=storage_options)
        plan.run(target, spark, progress)
        return target

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            from .spark_session import build_spark_session

            self._spark = SparkSession.getActiveSession() or build_spark_session()
        return self._spark

    def _require_writable(self, operation: str) -> None:
        """Refuse ``operation`` on a read-only handle, before anything is written."""
        if self.read_only:
            raise ReadOnlyDatasetError(
                f"{self.root}: {operation}() on a handle opened with read_only=True; open "
                "RevisionedDataset(root, ...) without read_only to write"
            )

    def _heal_description(self) -> None:
        """A writer that died right after its commit left description.parquet stale: fix it."""
        try:
            if not self._log.description_is_current():
                self._log.publish_description()
        except (RevisionsError, OSError) as exc:  # read-only access: reads do not need it
            log.warning(
                "%s: description.parquet is stale and cannot be rewritten: %s", self.root, exc
            )

    # -- the log --------------------------------------------------------------------------

    def refresh(self) -> tuple[Revision, ...]:
        return self._log.refresh()

    def _log_view(self, refresh: bool) -> LogView:
        if refresh:
            self._log.refresh()
        return self._log.view()

    @property
    def head_sequence(self) -> int:
        self.refresh()
        return self._log.head

    def _log_frame(self) -> pd.DataFrame:
        self.refresh()
        frame = table_frame(self._log.description())
        frame["vacuumed_by"] = frame["vacuumed_by"].astype("Int64")  # <NA>, not NaN, when not
        return frame

    @cached_property
    def maintenance(self) -> DatasetMaintenance:
        """Compaction, vacuum, purge and verify (docs/concepts/lifecycle.md)."""
        return DatasetMaintenance(self)

    # -- reads (``read/facade.py``: read, changes, history, as_of_join, tables, revisions) -

    def _schema(self, schema: Schema) -> StructType:
        return spark_schema(schema)

    def _check_filter(self, condition: Any, call: str) -> None:
        if not isinstance(condition, str | Column):
            raise ArgumentTypeError(
                f"{call}(): filter must be a Spark Column or SQL text, got {describe(condition)}"
            )

    def _id_bounds(self, condition: str | Column, id_types: Mapping[str, str]) -> IdBounds:
        return spark_id_bounds(self.spark, condition, id_types)

    def _filtered(self, frame: DataFrame, condition: str | Column) -> DataFrame:
        return frame.where(condition)

    def _results(self, frames: Sequence[DataFrame], what: str) -> list[DataFrame]:
        return list(frames)  # lazy: Spark runs them when asked

    # -- the conversions of a scan (``read/scan.py``) --------------------------------------

    _other_handle = "DatasetReader"

    def _to_spark(self, scan: Scan[DataFrame]) -> DataFrame:
        return scan._frames()[0]

    def _to_arrow(self, scan: Scan[DataFrame]) -> pa.Table:
        """Collected to the driver, instants in UTC (Spark gives them in the session's zone)."""
        with self._failures(scan):
            table = scan._frames()[0].toArrow()
        utc = [
            f.with_type(pa.timestamp(f.type.unit, "UTC"))
            if pa.types.is_timestamp(f.type) and f.type.tz is not None
            else f
            for f in table.schema
        ]
        return table.cast(pa.schema(utc))

    def _count(self, scan: Scan[DataFrame]) -> int:
        with self._failures(scan):
            return scan._frames()[0].count()

    def _failures(self, scan: Scan[DataFrame]) -> AbstractContextManager[None]:
        """Around the Spark jobs of a read: a storage failure or a damaged data file becomes
        the error that names it."""
        what = f"read {scan._plan.what}"
        return self._executor.failures(scan.request.table, scan._plan.files, what)

    # -- commit ---------------------------------------------------------------------------

    def commit(
        self,
        tables: Mapping[str, DataFrame],
        timestamp: TimeLike,
        is_major: bool,
        version: str | Mapping[str, str] | None = None,
        name: str | None = None,
        *,
        producer: Mapping[str, str] | None = None,
        upstream: Sequence[UpstreamPosition] = (),
        expected_positions: Mapping[tuple[str, str], int] | None = None,
        properties: Mapping[str, str] | None = None,
        skip_unchanged: bool | None = None,
        field_versions: Mapping[str, Mapping[str, str]] | None = None,
        carry: bool = False,
    ) -> Revision | None:
        """Write ``tables`` as one revision and commit it to the log (docs/guides/engine.md).

        ``skip_unchanged`` (None: the handle's default): a minor writes only the rows whose
        ``_row_hash`` differs from the row they replace (the entity's row in the state as
        of ``timestamp``); the log records ``rows_offered`` beside ``rows``. When no table
        has a changed row, nothing is committed (the rule for empty input below).
        ``field_versions``: ``{table: {value column: version}}``, recorded per table (a
        column not named is at the table's version).

        A major with ``skip_unchanged`` is written as a *carrying* major when it can be: its
        rows are taken as the complete new state, compared with the state as of
        ``timestamp`` (one hash join), and only the changed and new rows are written, plus
        a tombstone for every entity they lack; the record lists the revisions whose state
        it carries. Reads see the complete new state all the same; change readers get a
        reset whose ``changed`` costs what the changed rows cost. When the table has no
        state to carry (no major yet, a schema change a minor could not make, carried
        files a vacuum removed) the major is written complete.
        ``carry``: a major that keeps the current state (as of ``timestamp``) of every
        entity its rows do not name, with ``_deleted`` rows removing entities: what a
        consumer that re-scored only ``ChangeSet.changed`` commits. Errors when there is
        no state to carry.

        Returns the committed revision, or None when every table is empty (nothing is
        committed) — unless ``upstream`` moves a consumer position: then an empty revision
        records the position, so a consumer whose new input yields no output is not left
        lagging. Raises a RevisionsError subclass on bad input; a failed commit leaves
        the dataset exactly as it was. Then applies the ``compact_after`` policy to the
        tables written: what it compacted is in ``maintenance.last_compactions``.
        """
        self._require_writable("commit")
        tables = check_tables(tables)
        skip = (
            self.skip_unchanged
            if skip_unchanged is None
            else check_bool(skip_unchanged, "skip_unchanged")
        )
        request = self._planner.plan(
            tables,
            timestamp,
            is_major,
            version,
            name,
            producer=producer,
            upstream=upstream,
            expected_positions=expected_positions,
            properties=properties,
            field_versions=field_versions,
            carry=carry,
            skip=skip,
        )
        return self._run_commit(request, tables)

    def _import_commit(
        self,
        tables: Mapping[str, DataFrame],
        timestamp: datetime,
        is_major: bool,
        version: str | None,
        name: str,
        after: int,
    ) -> Revision | None:
        """A revision of an imported original dataset (``maintain/legacy.py``): as ``commit``,
        and its original name is kept even when all digits (``at="0"`` finds it by name).
        ``after``: the sequence of the import's previous entry; CommitConflictError when
        another writer committed since."""
        self._require_writable("commit")
        request = self._planner.plan(
            check_tables(tables),
            timestamp,
            is_major,
            version,
            name,
            digit_name=True,
            imported_after=after,
        )
        return self._run_commit(request, tables)

    def _run_commit(
        self, request: CommitRequest, tables: Mapping[str, DataFrame]
    ) -> Revision | None:
        record = CommitTransaction(self.storage, self._log, self.spark, request).run(tables)
        self._last_compactions = self._apply_policy(record) if record is not None else ()
        return record

    # -- maintenance: ``maintenance`` (``DatasetMaintenance`` below) -----------------------

    def _apply_policy(self, record: Revision) -> tuple[Revision, ...]:
        """Compact the tables ``record`` wrote that are past ``compact_after``. The commit
        already succeeded: a failed compaction is logged, never raised."""
        if self.compact_after is None:
            return ()
        try:
            due = [t for t in record.tables if self.maintenance.compaction_due(t)]
            if not due:
                return ()
            compaction = self.maintenance._compactor().run(due)
        except (RevisionsError, OSError) as exc:  # storage refused, a race, retention …
            log.warning("%s: compaction after revision %s failed: %s", self.root, record.name, exc)
            return ()
        return (compaction,) if compaction is not None else ()


class DatasetMaintenance:
    """The maintenance of one dataset (``ds.maintenance``, docs/concepts/lifecycle.md):
    compact, vacuum, purge and verify, and where the ``compact_after`` policy stands."""

    def __init__(self, dataset: RevisionedDataset):
        self._ds = dataset

    def _compactor(self) -> Compactor:
        ds = self._ds
        return Compactor(ds.storage, ds._log, ds._executor, ds._gate)

    @property
    def last_compactions(self) -> tuple[Revision, ...]:
        """The compaction entries the ``compact_after`` policy committed after this handle's
        last commit (empty when it compacted nothing)."""
        return self._ds._last_compactions

    def compaction_due(self, table: str) -> bool:
        """Whether ``table`` is past the ``compact_after`` policy (never when it is None):
        more than ``compact_after`` revisions on its base (``inspect.revisions_on_base``)."""
        ds = self._ds
        limit = ds.compact_after
        return limit is not None and ds.inspect.revisions_on_base(table) > limit

    def compact(
        self,
        table: str | None = None,
        *,
        target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES,
        rebuild: str | int | None = None,
    ) -> Revision | None:
        """Write the state of ``table`` (None: every table) as a compaction revision.

        It holds the state a default read returns now, in files of about
        ``target_file_bytes``; reads that include every revision it replaces use it as
        their base and return the same rows, in the engine's file layout (sorted by the
        ids, row groups of 16,384 rows). None, committing nothing, when no table has
        anything on top of its base and every base is in that layout (a base an earlier
        release wrote is rewritten). Concurrent commits are neither lost nor blocked: the
        entry is appended like any revision. Raises CommitConflictError, committing
        nothing, when a concurrent vacuum removed files it was reading, or a purge of one
        of its tables committed while it was written (it holds the erased rows): run it
        again.
        ``rebuild``: the name (or sequence) of a damaged compaction to write again from
        the revisions it holds (``Compactor.rebuild``), instead of compacting ``table``.
        """
        ds = self._ds
        ds._require_writable("compact")
        check_text(table, "table", optional=True)
        check_count(target_file_bytes, "target_file_bytes", minimum=1)
        compactor = self._compactor()
        if rebuild is not None:
            if table is not None:
                raise InvalidArgumentError("compact(): give a table or rebuild=, not both")
            return compactor.rebuild(rebuild, target_file_bytes)
        if table is not None:
            ds.revisions(table)  # UnknownTableError: a table with no revisions
        return compactor.run([table] if table is not None else None, target_file_bytes)

    def vacuum(
        self,
        *,
        retain: timedelta = timedelta(days=7),
        keep_majors: bool = True,
        dry_run: bool = False,
        consumers: Sequence[RevisionedDataset] = (),
        keep_after_sequence: int | None = None,
        grace: timedelta = DEFAULT_GRACE,
        now: datetime | None = None,
    ) -> VacuumReport:
        """Remove the files no read at or after the retention horizon needs
        (docs/concepts/lifecycle.md).

        The horizon is the newest commit at or before ``now - retain`` (its sequence and
        the newest logical time up to it). Kept: everything a read pinned at or after it
        and as of a time at or after it can touch, the newest base of every table, every
        major with ``keep_majors``, and what the next change read of each consumer needs:
        ``consumers`` are datasets whose recorded positions in this dataset's tables count,
        ``keep_after_sequence`` a position to keep for every table. Also removes folders no
        log entry references (failed or killed writers) and temporary files, when untouched
        for ``grace`` — but no such folder while ``verify`` reports an error, and never one
        that holds files a live entry misses (a renamed revision folder). First commits a
        ``vacuum`` entry marking the revisions and recording whatever it deletes, then
        deletes; log entries stay. ``dry_run``: deletes and commits nothing, same report.
        """
        ds = self._ds
        if not check_bool(dry_run, "dry_run"):
            ds._require_writable("vacuum")
        check_duration(retain, "retain")
        check_duration(grace, "grace")
        check_bool(keep_majors, "keep_majors")
        check_sequence_number(keep_after_sequence, "keep_after_sequence", optional=True)
        now = to_utc(now, "now") if now is not None else now_utc()
        positions = consumer_positions(
            ds.snapshot().view.tables(),
            ds.root,
            [c.refresh() for c in consumers],
            keep_after_sequence,
        )
        return Vacuum(ds.storage, ds._log).run(
            retain=retain,
            keep_majors=keep_majors,
            dry_run=dry_run,
            consumer_positions=positions,
            grace=grace,
            now=now,
        )

    def purge(
        self, table: str, ids_df: DataFrame, *, reason: str, dry_run: bool = False
    ) -> Revision | None:
        """Remove the entities of ``ids_df`` (exactly the id columns of ``table``) from every
        revision and compaction of ``table``: the files holding them are rewritten without
        their rows, and a ``purge`` entry swaps the files, atomically. Afterwards no read,
        change read or history returns them; consumers' positions stay valid (a purge is
        not a data change). The old files are deleted by the first vacuum whose retention
        horizon includes the purge: at the latest ``vacuum(retain=timedelta(0))``. The
        entry keeps ``reason`` and the counts, never the purged values. None, writing and
        committing nothing, when no live file holds any of the entities (already purged, or
        never there). ``dry_run``: nothing written or committed; the entry returned has the
        counts and the old files. Raises CommitConflictError, committing nothing, when a
        revision, compaction or purge of ``table`` (or a vacuum of an entry it rewrites)
        committed while it ran: run it again.
        """
        ds = self._ds
        if not check_bool(dry_run, "dry_run"):
            ds._require_writable("purge")
        check_text(table, "table")
        check_text(reason, "reason")
        if not isinstance(ids_df, DataFrame):
            raise ArgumentTypeError(
                f"ids_df must be a Spark DataFrame, got {type(ids_df).__name__}"
            )
        return Purge(ds.storage, ds._log, ds.spark).run(table, ids_df, reason, dry_run=dry_run)

    def verify(self, *, deep: bool = False) -> list[Finding]:
        """What is wrong with this dataset's storage, for an operator: empty when healthy.
        Only reads (see ``revisions_assets.core.maintain.verify``). ``deep`` also reads the
        data with Spark: ids non-null and unique per revision, row counts matching the log,
        every stored row hash matching its row's values; when the other checks found an
        error, a ``deep_checks_skipped`` finding says so instead."""
        ds = self._ds
        findings = verify_storage(ds.storage)
        if check_bool(deep, "deep"):
            skipped = deep_skipped(findings)
            if skipped is not None:
                return [*findings, skipped]
            findings += deep_findings(ds.spark, ds.storage, ds.snapshot().view)
        return findings


__all__ = ["DatasetMaintenance", "RevisionedDataset", "VacuumReport"]
