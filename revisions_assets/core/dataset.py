"""RevisionedDataset: commit revisions, read any state, read changes, maintain (SPEC §8)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from os import PathLike
from typing import get_args

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from .arguments import (
    check_bool,
    check_choice,
    check_count,
    check_duration,
    check_expected_positions,
    check_options,
    check_sequence_number,
    check_spark,
    check_string_map,
    check_tables,
    check_text,
    check_upstream,
    check_version,
)
from .backends import open_storage
from .bitemporal import KnownAt, as_of_join_plan
from .errors import (
    ArgumentTypeError,
    CommitConflictError,
    InvalidArgumentError,
    MissingFileError,
    NoMajorRevisionError,
    ReadOnlyDatasetError,
    RetentionError,
    RevisionsError,
    SchemaMismatchError,
    StorageError,
    UnknownRevisionError,
)
from .hashing import ROW_HASH, row_hash, value_columns
from .history import table_history_frame
from .legacy import LegacyRevision, plan_import
from .log import RevisionLog, table_frame
from .maintenance import (
    DEFAULT_GRACE,
    DEFAULT_TARGET_FILE_BYTES,
    Compactor,
    Vacuum,
    VacuumReport,
)
from .merge import (
    BROADCAST_MAX_ROWS,
    DELETED,
    REVISION_COLUMNS,
    MergeStrategy,
    blank_deletions,
    merge_plan,
    state_schemas,
    table_schema,
)
from .purge import Purge
from .records import Revision, UpstreamPosition
from .selection import (
    HEAD_PATTERN,
    Position,
    ReadPlan,
    Selection,
    carried_by,
    changes_by_sequence,
    changes_by_time,
    check_carried,
    consumer_position,
    head_state,
    live_spans,
    plan_read,
    resolve_position,
    retention_message,
    state_selection,
)
from .spark_errors import storage_cause
from .sqltext import quoted
from .storage import Storage
from .timeutil import TimeLike, now_utc, to_utc
from .transaction import (
    CommitRequest,
    CommitTransaction,
    StagedTable,
    check_against_log,
    complete_for_tombstones,
    table_id_columns,
)
from .validation import check_compatible, check_name, data_schema, normalize_id_columns
from .verify import Finding, deep_findings, verify_storage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableInfo:
    name: str
    id_columns: tuple[str, ...]
    schema: StructType


@dataclass(frozen=True)
class ChangeSet:
    """The result of a change read.

    ``df`` has the table's columns plus ``_deleted``; when ``is_reset`` it is the full state
    and consumers must replace, not merge. ``until_sequence`` is the head the read was
    pinned to: a consumer records it as its new position.

    ``changed`` (a reset only, else None): the soft major, the entities of ``df`` whose row
    hash differs from the state at the read's ``since``/``since_sequence`` (added or changed,
    ``_deleted`` false; a null hash counts as changed), plus the entities that state had
    and ``df`` lacks (``_deleted`` true, ids only). Without a ``since`` that state is empty
    and ``changed`` holds every row of ``df``.
    """

    df: DataFrame
    is_reset: bool
    revisions: tuple[Revision, ...]
    since_sequence: int | None = None
    until_sequence: int = 0
    changed: DataFrame | None = None


#: the default policy: compact a table once more than this many revisions sit on its base
DEFAULT_COMPACT_AFTER = 20


class RevisionedDataset:
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
    CorruptLogError on damage, writing nothing; ``revisions_assets.core.verify.verify(root)``
    lists what is wrong with a damaged dataset.
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
        self.merge_strategy = check_choice(
            merge_strategy, get_args(MergeStrategy), "merge_strategy"
        )
        self._default_ids, self._declared = normalize_id_columns(id_columns)
        self.storage = open_storage(root, **options)
        self.root = self.storage.uri
        self.read_only = check_bool(read_only, "read_only")
        self.compact_after = check_count(compact_after, "compact_after", minimum=0, optional=True)
        self.skip_unchanged = check_bool(skip_unchanged, "skip_unchanged")
        self._last_compactions: tuple[Revision, ...] = ()
        self._log = RevisionLog(self.storage)
        self._log.refresh()
        if not read_only:
            self._heal_description()

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

        Same revisions, names, timestamps, majors and versions (``core/legacy.py``); each
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
            from ..spark import build_spark_session

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

    @property
    def head_sequence(self) -> int:
        self.refresh()
        return self._log.head

    def log(self) -> pd.DataFrame:
        """One row per log entry, in sequence order: the SPEC §2 columns, the ``kind`` of each
        entry and whether a vacuum removed its files (``vacuumed``, ``vacuumed_by``)."""
        self.refresh()
        frame = table_frame(self._log.description())
        frame["vacuumed_by"] = frame["vacuumed_by"].astype("Int64")  # <NA>, not NaN, when not
        return frame

    def revisions(self, table: str | None = None) -> list[Revision]:
        """Every log entry (maintenance entries included), or the data revisions of a table."""
        check_text(table, "table", optional=True)
        records = self.refresh()
        if table is None:
            return list(records)
        return self._log.view().history(table)

    def revision(self, ref: Position) -> Revision:
        """An entry by name or sequence, or a data revision by ``HEAD`` or ``HEAD~n`` (n data
        revisions back in the whole log; maintenance entries are not counted)."""
        records = self.refresh()
        match = HEAD_PATTERN.match(ref) if isinstance(ref, str) else None
        if match:
            data = [r for r in records if r.is_data]
            back = int(match.group(1) or 0)
            if not 0 <= back < len(data):
                raise UnknownRevisionError(
                    f"{ref!r}: no such revision (the log has {len(data)} data revisions)"
                )
            return data[-1 - back]
        index = resolve_position(records, "", ref) - 1
        if not 0 <= index < len(records):
            raise UnknownRevisionError(f"{ref!r}: no such revision (the log has {len(records)})")
        return records[index]

    def tables(self) -> dict[str, TableInfo]:
        """Every table with its id columns and its current schema (latest major + additions)."""
        self.refresh()
        view = self._log.view()
        out = {}
        for name in view.tables():
            history = view.history(name)
            try:
                schema = state_schemas(view, name)[1]
            except NoMajorRevisionError:
                schema = table_schema(history, name)
            out[name] = TableInfo(name, history[-1].tables[name].id_columns, schema)
        return out

    def upstream_position(self, dataset: str, table: str, consumer_table: str | None = None) -> int:
        """The last upstream sequence this dataset recorded as consumed (0 if none)."""
        check_text(dataset, "dataset")
        check_text(table, "table")
        check_text(consumer_table, "consumer_table", optional=True)
        return consumer_position(self.refresh(), dataset, table, consumer_table)

    def verify(self, *, deep: bool = False) -> list[Finding]:
        """What is wrong with this dataset's storage, for an operator: empty when healthy.
        Only reads (see ``revisions_assets.core.verify``). ``deep`` also reads the data
        with Spark: ids non-null and unique per revision, row counts matching the log."""
        findings = verify_storage(self.storage)
        if check_bool(deep, "deep") and not any(f.severity == "error" for f in findings):
            self.refresh()
            findings += deep_findings(self.spark, self.storage, self._log.view())
        return findings

    # -- reads ----------------------------------------------------------------------------

    def read(
        self,
        table: str,
        as_of: TimeLike | None = None,
        at: Position = None,
        with_revision: bool = False,
    ) -> DataFrame:
        """The state of ``table`` as of a time and/or pinned at a position (SPEC §3)."""
        check_text(table, "table")
        check_bool(with_revision, "with_revision")
        as_of_utc = to_utc(as_of, "as_of") if as_of is not None else None
        records = self.refresh()
        view = self._log.view()
        pinned = resolve_position(records, table, at)
        selection = state_selection(view.history(table), table, as_of_utc, pinned)
        what = f"read of table {table!r}"
        what += f" as of {as_of_utc.isoformat()}" if as_of_utc is not None else ""
        what += f" at sequence {pinned}" if at is not None else ""
        return self._merge(selection, what, keep_deleted=False, with_revision=with_revision)

    def changes(
        self,
        table: str,
        since: TimeLike | None = None,
        until: TimeLike | None = None,
        *,
        since_sequence: int | None = None,
        until_sequence: int | None = None,
        at: Position = None,
        with_revision: bool = False,
        only_changed: bool = False,
        columns: Sequence[str] | None = None,
    ) -> ChangeSet:
        """Changes in (since, until], or since a sequence up to a pinned head (SPEC §3).

        ``only_changed``: report only the entities whose row hash differs from the state
        before the window (tombstones and null hashes always count): a rewrite of the same
        values is no change. A reset carries ``changed`` either way (see ``ChangeSet``).
        ``columns``: only changes of these value columns count, for ``only_changed`` and
        ``changed`` (their hash is computed at read time, old rows included).
        """
        check_text(table, "table")
        check_bool(with_revision, "with_revision")
        check_bool(only_changed, "only_changed")
        since_sequence = check_sequence_number(since_sequence, "since_sequence", optional=True)
        until_sequence = check_sequence_number(until_sequence, "until_sequence", optional=True)
        by_sequence = since_sequence is not None or until_sequence is not None
        if by_sequence and (since is not None or until is not None or at is not None):
            raise InvalidArgumentError(
                "changes(): give either since/until/at (times, a pinned position) or "
                f"since_sequence/until_sequence, not both (got since={since!r}, until={until!r}, "
                f"at={at!r}, since_sequence={since_sequence}, until_sequence={until_sequence})"
            )
        since_utc = to_utc(since, "since") if since is not None else None
        until_utc = to_utc(until, "until") if until is not None else None
        if since_utc is not None and until_utc is not None and since_utc > until_utc:
            raise InvalidArgumentError(
                f"changes(): since {since_utc.isoformat()} is after until "
                f"{until_utc.isoformat()}; the window is (since, until]: swap them"
            )
        if None not in (since_sequence, until_sequence) and since_sequence > until_sequence:
            raise InvalidArgumentError(
                f"changes(): since_sequence {since_sequence} is after until_sequence "
                f"{until_sequence}; swap them"
            )
        records = self.refresh()
        history = self._log.view().history(table)
        if by_sequence:
            head = until_sequence if until_sequence is not None else self._log.head
            head = resolve_position(records, table, head)
            selection = changes_by_sequence(history, table, since_sequence, head)
            what = f"changes of table {table!r} since sequence {since_sequence}"
            before = (None, since_sequence)
        else:
            at_sequence = resolve_position(records, table, at)
            selection = changes_by_time(history, table, since_utc, until_utc, at_sequence)
            what = f"changes of table {table!r} since "
            what += since_utc.isoformat() if since_utc else "the start"
            what += f" until {until_utc.isoformat()}" if until_utc is not None else ""
            before = (since_utc, at_sequence) if since_utc is not None else (None, None)
        ids = list(history[-1].tables[table].id_columns)
        if columns is not None:
            columns = self._hashed_columns(table, columns, ids)
        changed = None
        if not selection.window:
            df = self._empty_changes(table_schema(selection.merge, table), with_revision)
        elif selection.is_reset:
            df = self._merge(selection, what, keep_deleted=False, with_revision=with_revision)
            changed = self._changed_on_top(history, selection, before, what, columns, df.schema)
            if changed is None:
                hashed = self._merge(
                    selection, what, keep_deleted=False, with_revision=with_revision, with_hash=True
                )
                previous = self._hashes_before(history, table, *before, what, columns)
                changed = _soft_major(_rehashed(hashed, columns), previous, ids)
            df = df.withColumn(DELETED, F.lit(False))
        else:
            df = self._merge(
                selection, what, keep_deleted=True, with_revision=with_revision, with_hash=True
            )
            df = _rehashed(df, columns)
            compare = only_changed and not (
                by_sequence and _holds_only_real_changes(history, table, selection.window, columns)
            )
            previous = (
                self._hashes_before(history, table, *before, what, columns) if compare else None
            )
            if previous is not None:
                window_rows = sum(r.tables[table].rows for r in selection.window)
                df = _really_changed(df, previous, ids, window_rows)
            df = blank_deletions(df.drop(ROW_HASH), ids)
        return ChangeSet(
            df=_system_last(df),
            is_reset=selection.is_reset,
            revisions=selection.window,
            since_sequence=since_sequence,
            until_sequence=selection.head_sequence,
            changed=_system_last(changed) if changed is not None else None,
        )

    def _changed_on_top(
        self,
        history: Sequence[Revision],
        reset: Selection,
        before: tuple[datetime | None, int | None],
        what: str,
        columns: Sequence[str] | None,
        schema: StructType,
    ) -> DataFrame | None:
        """A reset's ``changed`` without comparing two whole states, when every revision
        of the state before is still merged (a carrying major kept it): then only entities
        the other revisions wrote can differ, so ``changed`` is the change read of those
        revisions, compared with the state before unless they are one carrying major that
        compared its rows with exactly that state. None when the states do not nest."""
        table = reset.table
        if before == (None, None):
            return None
        try:
            start = state_selection(history, table, *before)
        except NoMajorRevisionError:
            return None
        old = {r.sequence for r in start.merge}
        if not old <= {r.sequence for r in reset.merge}:
            return None
        window = tuple(r for r in reset.merge if r.sequence not in old)
        ids = list(history[-1].tables[table].id_columns)
        if not window:
            return self._empty_changes(schema, False)
        merge = tuple(r for r in reset.merge if r.key >= window[0].key)
        on_top = Selection(
            table, reset.major, merge, window, False, reset.head_sequence, reset.as_of
        )
        rows = self._merge(
            on_top,
            what,
            keep_deleted=True,
            with_revision=REVISION_COLUMNS[0] in schema.names,
            with_hash=True,
        )
        rows = _rehashed(rows, columns)
        # one carrying major that compared its rows with exactly the state before wrote only
        # real changes (tombstones given to carry=True may name absent entities: compare)
        (first,) = window if len(window) == 1 else (None,)
        compared = (
            columns is None
            and first is not None
            and first.tables[table].rows_offered is not None
            and not first.tables[table].tombstones
            and set(carried_by(first, table)) == old
        )
        if not compared:
            previous = self._hashes_before(history, table, *before, what, columns)
            window_rows = sum(r.tables[table].rows for r in window)
            if previous is not None:
                rows = _really_changed(rows, previous, ids, window_rows, absent_deletions=False)
        # one select: deletions carry only their ids, in the columns of the reset's df
        present, keep = set(rows.columns), set(ids)
        return rows.selectExpr(
            *[
                quoted(f.name)
                if f.name in keep or f.name in REVISION_COLUMNS
                else f"CASE WHEN {quoted(DELETED)} THEN NULL ELSE {quoted(f.name)} END "
                f"AS {quoted(f.name)}"
                if f.name in present
                else f"CAST(NULL AS {f.dataType.simpleString()}) AS {quoted(f.name)}"
                for f in schema.fields
            ],
            quoted(DELETED),
        )

    def _hashes_before(
        self,
        history: Sequence[Revision],
        table: str,
        as_of: datetime | None,
        max_sequence: int | None,
        what: str,
        columns: Sequence[str] | None = None,
    ) -> DataFrame | None:
        """The (ids, ``_row_hash``) of the state as of ``as_of`` pinned at ``max_sequence``:
        where a change read starts, or what a skip-unchanged minor replaces. None (every row
        counts as changed) when there is no start, no major by then, or a vacuum removed
        that state's files."""
        if as_of is None and max_sequence is None:
            return None
        try:
            selection = state_selection(history, table, as_of, max_sequence)
            ids = list(history[-1].tables[table].id_columns)
            state = self._merge(
                selection,
                f"{what} (the state before)",
                keep_deleted=False,
                with_revision=False,
                with_hash=True,
            )
        except (NoMajorRevisionError, RetentionError):
            return None
        return _rehashed(state, columns).select(*ids, ROW_HASH)

    def _hashed_columns(self, table: str, columns: Sequence[str], ids: Sequence[str]) -> list[str]:
        """``columns`` checked against the table's value columns."""
        if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
            raise InvalidArgumentError(
                f"changes(): columns must be a list of column names, got {columns!r}"
            )
        values = value_columns(self.tables()[table].schema, ids)
        unknown = [c for c in columns if c not in values]
        if unknown:
            raise InvalidArgumentError(
                f"changes(): columns {unknown} are not value columns of table {table!r}; "
                f"its value columns are {values}"
            )
        return list(columns)

    def history(
        self, table: str, *, since: TimeLike | None = None, until: TimeLike | None = None
    ) -> DataFrame:
        """The SCD2 history of ``table`` in logical time (``core/history.py``).

        The table's columns plus ``valid_from``, ``valid_to`` (null while current),
        ``is_current``, ``is_deleted`` and ``_revision``; one row per version of an entity.
        ``until``: the history as known at that logical time (like ``read(as_of=until)``);
        ``since``: only the versions still valid after it.
        """
        self.refresh()
        view = self._log.view()
        history = view.history(table)
        spans = live_spans(history, table, to_utc(until, "until") if until is not None else None)
        for span in spans:  # the versions need every revision ever part of a state
            vacuum = view.removed_by(span.revision.sequence)
            if vacuum is not None:
                what = f"{self.root}: history of table {table!r}"
                raise RetentionError(retention_message(what, span.revision, vacuum))
        return table_history_frame(
            self.spark,
            self.storage,
            table,
            history,
            spans,
            since=to_utc(since, "since") if since is not None else None,
        )

    def as_of_join(
        self,
        events_df: DataFrame,
        table: str,
        *,
        event_time: str,
        on: Sequence[str] | Mapping[str, str],
        known_at: KnownAt = None,
    ) -> DataFrame:
        """A point-in-time join (``core/bitemporal.py``): each event row with the row of
        ``table`` as of its ``event_time``, as known at ``known_at`` (None: everything
        committed; ``"event"``: what was committed by the event's time; or a time)."""
        self.refresh()
        return as_of_join_plan(
            self.spark,
            self.storage,
            self._log.view(),
            events_df,
            table,
            event_time=event_time,
            on=on,
            known_at=known_at,
        )

    def _merge(
        self,
        selection: Selection,
        what: str,
        *,
        keep_deleted: bool,
        with_revision: bool,
        with_hash: bool = False,
    ):
        plan = plan_read(self._log.view(), selection, f"{self.root}: {what}")
        try:
            return merge_plan(
                self.spark,
                self.storage,
                plan,
                keep_deleted=keep_deleted,
                with_revision=with_revision,
                with_hash=with_hash,
                strategy=self.merge_strategy,
            )
        except RevisionsError:
            raise
        except Exception as exc:
            failure = self._read_failure(plan, exc)
            if failure is None:
                raise
            raise failure from exc

    def _read_failure(self, plan: ReadPlan, exc: Exception) -> StorageError | None:
        """A storage failure of a read, naming the missing data files when files are gone."""
        cause = storage_cause(exc)
        if cause is None:
            return None
        table = plan.table
        files = [(r.name, f) for r in plan.direct for f in r.tables[table].files]
        if plan.base is not None:
            files += [(plan.base.record.name, f) for f in plan.base.write.files]
        missing = [(name, f) for name, f in files if not self.storage.exists(f)]
        if not missing:
            return StorageError(f"read table {table!r} of {self.root}: {cause}")
        name, path = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        return MissingFileError(
            f"{self.root}: data file {path} of revision {name!r}, table {table!r}, is missing"
            f"{more}: the dataset is damaged; run ds.verify() and see 'Recovering a damaged "
            "dataset' in the README"
        )

    def _empty_changes(self, schema: StructType, with_revision: bool) -> DataFrame:
        df = self.spark.createDataFrame([], schema).withColumn(DELETED, F.lit(False))
        if with_revision:
            df = df.withColumns(
                {
                    "_revision": F.lit(None).cast("string"),
                    "_revision_timestamp": F.lit(None).cast("timestamp"),
                    "_revision_sequence": F.lit(None).cast("long"),
                }
            )
        return df

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
        """Write ``tables`` as one revision and commit it to the log (SPEC §4).

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
        tables written: what it compacted is in ``last_compactions``.
        """
        self._require_writable("commit")
        tables = check_tables(tables)
        skip = (
            self.skip_unchanged
            if skip_unchanged is None
            else check_bool(skip_unchanged, "skip_unchanged")
        )
        request = self._prepare(
            tables,
            timestamp,
            is_major,
            version,
            name,
            producer,
            upstream,
            expected_positions,
            properties,
        )
        unknown = sorted(set(field_versions or {}) - set(tables))
        if unknown:
            raise InvalidArgumentError(
                f"field_versions names table(s) {unknown}, which this commit does not write "
                f"(tables: {sorted(tables)})"
            )
        for staged in request.staged:
            staged.field_versions = _field_versions(staged, field_versions)
        if check_bool(carry, "carry") and not request.is_major:
            raise InvalidArgumentError(
                "carry=True is for majors (is_major=True): a minor keeps the state anyway"
            )
        if request.is_major and (carry or skip):
            for staged in request.staged:
                self._carry(staged, request.timestamp, tables[staged.table], carry, skip)
        elif skip:
            for staged in request.staged:
                staged.replaced = self._replaced_hashes(staged.table, request.timestamp)
                staged.compared_with = self._log.head
        record = CommitTransaction(self.storage, self._log, self.spark, request).run(tables)
        self._last_compactions = self._apply_policy(record) if record is not None else ()
        return record

    def _prepare(
        self,
        tables,
        timestamp,
        is_major,
        version,
        name,
        producer,
        upstream,
        expected_positions,
        properties,
    ) -> CommitRequest:
        """The API boundary of a commit: every argument checked against the log's state."""
        for table in tables:
            check_name(table, "table")
        check_version(version, tables)
        custom = name is not None
        request = CommitRequest(
            name=check_name(name, "revision") if custom else uuid.uuid4().hex,
            custom_name=custom,
            timestamp=to_utc(timestamp, "timestamp"),
            is_major=check_bool(is_major, "is_major"),
            version=version if isinstance(version, str) or version is None else None,
            producer=check_string_map(producer, "producer"),
            upstream=check_upstream(upstream),
            expected_positions=check_expected_positions(expected_positions),
            properties=check_string_map(properties, "properties"),
        )
        records = self.refresh()
        view = self._log.view()
        for table, df in tables.items():
            ids = table_id_columns(records, table, self._declared, self._default_ids, self.root)
            schema = data_schema(table, df.schema, ids)
            table_version = version.get(table) if isinstance(version, Mapping) else version
            staged = StagedTable(table, ids, schema, table_version)
            if not request.is_major and DELETED in df.columns:
                complete_for_tombstones(view, staged)
            request.staged.append(staged)
        check_against_log(view, request, self.root)
        return request

    def _carry(
        self, staged: StagedTable, timestamp: datetime, df: DataFrame, required: bool, skip: bool
    ) -> None:
        """Make ``staged`` a carrying major of the state as of ``timestamp``, if it can be:
        ``required`` (``carry=True``) raises where a complete major would be written."""
        view = self._log.view()
        table = staged.table
        what = f"state of table {table!r} carried by a major"
        if table not in view.tables():
            if required:
                raise NoMajorRevisionError(
                    f"carry=True: table {table!r} has no state to carry; commit a complete "
                    "major first"
                )
            return
        history = view.history(table)
        try:
            selection = state_selection(history, table, timestamp)
            plan_read(view, selection, what)
            if required and DELETED in df.columns:
                complete_for_tombstones(view, staged)
            # the carried rows must read as rows of the new state: it keeps every column
            _major, current = state_schemas(view, table)
            check_compatible(table, major=current, current=current, new=staged.schema)
            carries = tuple(r.sequence for r in selection.merge)
            check_carried(view, table, timestamp, carries, self._log.head)
        except (NoMajorRevisionError, RetentionError, SchemaMismatchError):
            if required:
                raise
            return  # nothing to carry: the major is written complete
        replaced = None
        if skip or not required:
            replaced = self._hashes_before(history, table, timestamp, None, what)
            if replaced is None and not required:
                return  # a complete offer needs the state to compare with
        staged.carries = carries
        staged.compared_with = self._log.head
        staged.complete_offer = not required
        staged.replaced = replaced

    def _replaced_hashes(self, table: str, timestamp: datetime) -> DataFrame | None:
        """The (ids, ``_row_hash``) of the rows a minor stamped ``timestamp`` replaces: the
        state as of its timestamp (the rows its own would follow in key order)."""
        history = self._log.view().history(table)
        what = f"state of table {table!r} before a skip-unchanged minor"
        return self._hashes_before(history, table, timestamp, None, what)

    # -- maintenance (SPEC §8) ------------------------------------------------------------

    @property
    def last_compactions(self) -> tuple[Revision, ...]:
        """The compaction entries the ``compact_after`` policy committed after this handle's
        last commit (empty when it compacted nothing)."""
        return self._last_compactions

    def revisions_on_base(self, table: str) -> int:
        """How many revisions a default read of ``table`` merges on top of its base (the
        governing major, or the compaction it uses): what ``compact_after`` bounds."""
        self.refresh()
        view = self._log.view()
        selection = head_state(view, table)
        return plan_read(view, selection, f"{self.root}: read of table {table!r}").on_base

    def compaction_due(self, table: str) -> bool:
        """Whether ``table`` is past the ``compact_after`` policy (never when it is None)."""
        return self.compact_after is not None and self.revisions_on_base(table) > self.compact_after

    def compact(
        self, table: str | None = None, *, target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES
    ) -> Revision | None:
        """Write the state of ``table`` (None: every table) as a compaction revision.

        It holds the state a default read returns now, in files of about
        ``target_file_bytes``; reads that include every revision it replaces use it as
        their base and return the same rows. None, committing nothing, when no table has
        anything on top of its base. Concurrent commits are neither lost nor blocked: the
        entry is appended like any revision. Raises CommitConflictError, committing
        nothing, when a concurrent vacuum removed files it was reading.
        """
        self._require_writable("compact")
        check_text(table, "table", optional=True)
        check_count(target_file_bytes, "target_file_bytes", minimum=1)
        if table is not None:
            self._log.refresh()
            self._log.view().history(table)  # UnknownTableError for a table with no revisions
        compactor = Compactor(self.storage, self._log, self.spark, self.merge_strategy)
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
        """Remove the files no read at or after the retention horizon needs (SPEC §8).

        The horizon is the newest commit at or before ``now - retain`` (its sequence and
        the newest logical time up to it). Kept: everything a read pinned at or after it
        and as of a time at or after it can touch, the newest base of every table, every
        major with ``keep_majors``, and what the next change read of each consumer needs:
        ``consumers`` are datasets whose recorded positions in this dataset's tables count,
        ``keep_after_sequence`` a position to keep for every table. Also removes folders no
        log entry references (failed or killed writers) and temporary files, when untouched
        for ``grace``. First commits a ``vacuum`` entry marking the revisions, then deletes;
        log entries stay. ``dry_run``: deletes and commits nothing, same report.
        """
        if not check_bool(dry_run, "dry_run"):
            self._require_writable("vacuum")
        check_duration(retain, "retain")
        check_duration(grace, "grace")
        check_bool(keep_majors, "keep_majors")
        check_sequence_number(keep_after_sequence, "keep_after_sequence", optional=True)
        now = to_utc(now, "now") if now is not None else now_utc()
        self.refresh()
        positions: dict[str, list[int]] = {}
        for table in self._log.view().tables():
            found = [c.upstream_position(self.root, table) for c in consumers]
            if keep_after_sequence is not None:
                found.append(keep_after_sequence)
            positions[table] = found
        return Vacuum(self.storage, self._log).run(
            retain=retain,
            keep_majors=keep_majors,
            dry_run=dry_run,
            consumer_positions=positions,
            grace=grace,
            now=now,
        )

    def purge(
        self, table: str, ids_df: DataFrame, *, reason: str, dry_run: bool = False
    ) -> Revision:
        """Remove the entities of ``ids_df`` (exactly the id columns of ``table``) from every
        revision and compaction of ``table``: the files holding them are rewritten without
        their rows, and a ``purge`` entry swaps the files, atomically. Afterwards no read,
        change read or history returns them; consumers' positions stay valid (a purge is
        not a data change). The old files are deleted by the first vacuum whose retention
        horizon includes the purge: at the latest ``vacuum(retain=timedelta(0))``. The
        entry keeps ``reason`` and the counts, never the purged values. ``dry_run``:
        nothing written or committed; the entry returned has the counts and the old files.
        """
        if not check_bool(dry_run, "dry_run"):
            self._require_writable("purge")
        check_text(table, "table")
        check_text(reason, "reason")
        if not isinstance(ids_df, DataFrame):
            raise ArgumentTypeError(
                f"ids_df must be a Spark DataFrame, got {type(ids_df).__name__}"
            )
        return Purge(self.storage, self._log, self.spark).run(
            table, ids_df, reason, dry_run=dry_run
        )

    def _apply_policy(self, record: Revision) -> tuple[Revision, ...]:
        """Compact the tables ``record`` wrote that are past ``compact_after``. The commit
        already succeeded: a failed compaction is logged, never raised."""
        if self.compact_after is None:
            return ()
        try:
            due = [t for t in record.tables if self.compaction_due(t)]
            if not due:
                return ()
            compactor = Compactor(self.storage, self._log, self.spark, self.merge_strategy)
            compaction = compactor.run(due)
        except (CommitConflictError, RetentionError, OSError) as exc:
            log.warning("%s: compaction after revision %s failed: %s", self.root, record.name, exc)
            return ()
        return (compaction,) if compaction is not None else ()


def _field_versions(
    staged: StagedTable, given: Mapping[str, Mapping[str, str]] | None
) -> dict[str, str] | None:
    """The field versions of one table of a commit, checked against its value columns."""
    if given is None or staged.table not in given:
        return None
    what = f"field_versions[{staged.table!r}]"
    versions = check_string_map(given[staged.table], what)
    values = value_columns(staged.schema, staged.id_columns)
    unknown = sorted(set(versions) - set(values))
    if unknown:
        raise InvalidArgumentError(
            f"{what} names {unknown}, not value columns of the data; they are {values}"
        )
    return versions


def _rehashed(df: DataFrame, columns: Sequence[str] | None) -> DataFrame:
    """``df`` with ``_row_hash`` over ``columns`` only, computed now (None: as stored)."""
    if columns is None:
        return df
    hashed = row_hash(df.schema, columns)
    if DELETED in df.columns:
        hashed = F.when(~F.col(DELETED), hashed)
    return df.withColumn(ROW_HASH, hashed)


def _system_last(df: DataFrame) -> DataFrame:
    system = [c for c in (DELETED, *REVISION_COLUMNS) if c in df.columns]
    return df.select(*[c for c in df.columns if c not in system], *system)


def _previous(previous: DataFrame, ids: Sequence[str]) -> DataFrame:
    return previous.select(*ids, F.col(ROW_HASH).alias("__before"))


def _differs() -> Column:
    """A row's hash differs from the one before (a null hash, or none before: differs)."""
    return ~F.col(ROW_HASH).eqNullSafe(F.col("__before")) | F.col(ROW_HASH).isNull()


def _holds_only_real_changes(
    history: Sequence[Revision],
    table: str,
    window: Sequence[Revision],
    columns: Sequence[str] | None,
) -> bool:
    """Whether a change window already holds only real changes, so ``only_changed`` needs
    no hash join: one minor committed with ``skip_unchanged`` in logical order (no earlier
    revision has a later timestamp) whose commit compared every row with the state just
    before it (no revision of the table landed between the head it compared with, its
    ``compared_with``, and its own sequence: a concurrent commit may have), the state a
    change read since then starts from. Hashing only some ``columns`` always compares."""
    if columns is not None or len(window) != 1:
        return False
    (minor,) = window
    compared_with = minor.tables[table].compared_with
    if minor.is_major or compared_with is None:
        return False
    earlier = [r for r in history if r.sequence < minor.sequence]
    return all(r.sequence <= compared_with and r.timestamp <= minor.timestamp for r in earlier)


def _really_changed(
    rows: DataFrame,
    previous: DataFrame,
    ids: Sequence[str],
    window_rows: int,
    absent_deletions: bool = True,
) -> DataFrame:
    """The change rows (with ``_row_hash``) that change something: tombstones (only of
    entities the state before had, unless ``absent_deletions``), and rows whose hash
    differs from the entity's before the window. One join on the ids; when the window is
    small (the log's row counts), the state before is narrowed to the window's ids by a
    broadcast semi-join and broadcast itself: the state is scanned, never shuffled."""
    before = _previous(previous, ids).withColumn("__was", F.lit(True))
    if window_rows <= BROADCAST_MAX_ROWS:
        touched = F.broadcast(rows.select(*ids))
        before = F.broadcast(before.join(touched, on=list(ids), how="left_semi"))
    joined = rows.join(before, on=list(ids), how="left")
    deleted = F.col(DELETED) if absent_deletions else F.col(DELETED) & F.col("__was").isNotNull()
    return joined.where(deleted | (~F.col(DELETED) & _differs())).drop("__before", "__was")


def _soft_major(state: DataFrame, previous: DataFrame | None, ids: Sequence[str]) -> DataFrame:
    """A reset's ``changed``: the rows of ``state`` (with ``_row_hash``) whose hash differs
    from ``previous``, and the ids ``previous`` has and ``state`` lacks as tombstones. One
    full outer join on the ids."""
    columns = [c for c in state.columns if c != ROW_HASH]
    if previous is None:
        return state.select(*columns, F.lit(False).alias(DELETED))
    joined = state.withColumn("__now", F.lit(True)).join(
        _previous(previous, ids), on=list(ids), how="full_outer"
    )
    removed = F.col("__now").isNull()
    kept = joined.where(removed | _differs())
    return kept.select(
        *[F.col(c) if c in ids else F.when(~removed, F.col(c)).alias(c) for c in columns],
        removed.alias(DELETED),
    )


__all__ = ["ChangeSet", "RevisionedDataset", "TableInfo", "VacuumReport"]
