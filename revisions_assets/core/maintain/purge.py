"""Purge (erasure): remove entities from every revision of a table, as one log entry.

One Spark scan over the table's live files (data revisions and compactions) finds, by
``_metadata.file_path``, the files that hold the entities and how many of their rows
match. Only those files are rewritten without the matching rows (tombstones included),
each into one new file within its own id range (so files clustered by id stay so), into
new folders ``<purge name>-<sequence>/<table>/``; a ``purge`` entry committed
through the same put-if-absent append then swaps the old files' references for the new
ones (``logview`` applies it to every read). A crash before the append leaves folders no
entry references (vacuum reclaims them); after it, the purged state.

The swapped-out files stay on storage, unread by anything planned after the purge, until
a vacuum whose retention horizon includes the purge deletes them: at the latest
``vacuum(retain=timedelta(0))`` right after the purge. The entry keeps an audit record
(reason, number of entities asked for, rows removed per entry, the commit time), never
the purged values.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructField, StructType

from ..columns import DELETED, ROW_HASH
from ..errors import CommitConflictError, IdColumnsError, RetentionError
from ..hashing import checked_hash
from ..log.records import PURGE, FileStats, PurgedWrite, PurgeMark, Revision, TableWrite
from ..log.revision_log import RevisionLog
from ..log.view import LogView
from ..read.execute.files import FileGate
from ..read.execute.spark import SparkExecutor
from ..read.execute.spark_scan import file_key, parquet_files, recorded_schema, spark_file_key
from ..read.plan.scans import plan_merge, scan_task
from ..read.plan.schema import value_columns
from ..read.plan.selection import state_selection
from ..storage.base import Storage
from ..timeutil import now_utc
from ..write.conflicts import ReadSet
from ..write.transaction import append_entry, upkeep, write_observed, written_files

log = logging.getLogger(__name__)

_PATH = "_purge_file"
_MAJOR = "_purge_major"


@dataclass(frozen=True)
class _Hit:
    """Rows of one stored file that hold purged entities."""

    path: str
    rows: int
    tombstones: int


class Purge:
    """One purge of one table (see the module docstring)."""

    def __init__(self, storage: Storage, revision_log: RevisionLog, spark: SparkSession):
        self.storage = storage
        self.log = revision_log
        self.spark = spark
        self._executor = SparkExecutor(storage, lambda: spark, "auto")

    def run(self, table: str, ids: DataFrame, reason: str, *, dry_run: bool) -> Revision | None:
        """The purge entry (a dry run's is not committed); None, writing and committing
        nothing, when no live file holds any of the entities."""
        self.log.refresh()
        view = self.log.view()
        history = view.table_revisions(table)  # UnknownTableError
        id_columns = history[-1].tables[table].id_columns
        ids = self._ids(ids, table, id_columns, history[-1].tables[table].schema_json)
        entries = self._live_entries(view, table)
        files = [(e.name, f) for e in entries for f in e.tables[table].files]
        FileGate(self.storage).check(table, [scan_task(e, table, -1) for e in entries])
        # a missing or damaged file: the error naming it, not Spark's
        with self._executor.failures(table, files, f"purge of table {table!r}"):
            hits = self._scan(table, entries, ids, id_columns)
        if not hits and not dry_run:
            log.info("%s: purge of table %r: no live file holds the ids", self.storage.uri, table)
            return None  # an empty entry would claim an erasure that removed nothing
        entities = ids.count()
        name = f"purge-{uuid.uuid4().hex}"
        affected = [e for e in entries if e.sequence in hits]
        with self._executor.failures(table, files, f"purge of table {table!r}"):
            offered = self._offered_removed(view, table, ids, id_columns, hits)
        # it scanned every live file of the table and rewrites the affected entries' files:
        # a commit of the table since (rows it did not scan: a revision, a compaction, a
        # purge) or a vacuum of an entry it rewrites invalidates it (``conflicts.py``)
        read = ReadSet(
            f"purge of table {table!r}",
            "run the purge again",
            view.head,
            complete=frozenset({table}),
            rewrites=frozenset(e.sequence for e in affected),
            folders=frozenset(f"{name}-{e.sequence}" for e in affected),
            claimed_at=view.head,
        )

        def build(current: LogView, swaps: tuple[PurgedWrite, ...]) -> Revision:
            now = now_utc()
            mark = PurgeMark(
                reason=reason,
                entities=entities,
                swaps={table: swaps} if swaps else {},
                offered_removed={table: offered} if offered else {},
            )
            return Revision(
                name=name,
                timestamp=now,
                is_major=False,
                sequence=current.head + 1,
                committed_at=now,
                tables={},
                data_change=False,
                kind=PURGE,
                purge=mark,
            )

        if dry_run:
            return build(view, tuple(self._counted(e, table, hits[e.sequence]) for e in affected))
        try:  # from the first rewrite on, every folder it writes is its own to remove
            swaps = tuple(self._rewrite(name, e, table, hits[e.sequence], ids) for e in affected)
            record = append_entry(
                self.log, lambda current: build(current, swaps), f"purge {name!r}", read
            )
        except BaseException as exc:
            self._remove_rewritten(name, affected)
            if isinstance(exc, Exception) and not isinstance(exc, CommitConflictError):
                self._explain_failure(read, exc)
            raise
        assert record is not None and record.purge is not None
        mark = record.purge
        upkeep(self.log, record)
        log.info(
            "%s: purge %s (sequence %d) of table %r: %d rows removed from %d entries",
            self.storage.uri,
            name,
            record.sequence,
            table,
            mark.rows_removed,
            len(mark.swaps.get(table, ())),
        )
        return record

    def _explain_failure(self, read: ReadSet, exc: Exception) -> None:
        """A rewrite that failed because a concurrent vacuum removed the files it was
        reading gives up as the conflict it is (CommitConflictError), not as a missing file."""
        try:
            self.log.refresh()
            read.check(self.log.view(), self.storage.uri)
        except CommitConflictError as conflict:
            raise conflict from exc
        except Exception:  # the original failure is the one to report
            return

    def _ids(
        self, ids: DataFrame, table: str, id_columns: Sequence[str], schema_json: str
    ) -> DataFrame:
        """The distinct ids asked for, typed like the table's id columns."""
        columns = ids.columns
        if sorted(columns) != sorted(id_columns):
            raise IdColumnsError(
                f"purge of table {table!r}: the ids must have exactly the id columns "
                f"{list(id_columns)}, got {columns}"
            )
        schema = recorded_schema(schema_json)
        return ids.select(
            *[F.col(c).cast(schema[c].dataType).alias(c) for c in id_columns]
        ).distinct()

    @staticmethod
    def _live_entries(view: LogView, table: str) -> list[Revision]:
        """The entries whose files of ``table`` reads may still use: data revisions and
        compactions that no vacuum removed."""
        entries = [*view.table_revisions(table), *(c.record for c in view.compactions(table))]
        return [e for e in entries if not view.is_removed(e.sequence)]

    def _scan(
        self,
        table: str,
        entries: Sequence[Revision],
        ids: DataFrame,
        id_columns: Sequence[str],
    ) -> dict[int, list[_Hit]]:
        """One scan over every live file of ``table``: the files that hold the ids, with
        the matching rows and tombstones, by entry sequence."""
        where = {file_key(f): (e.sequence, f) for e in entries for f in e.tables[table].files}
        if not where:
            return {}
        rows = parquet_files(
            self.spark,
            [self.storage.spark_uri(path) for _, path in where.values()],
            StructType([*ids.schema.fields, StructField(DELETED, BooleanType(), True)]),
        )
        rows = rows.select(
            *id_columns,
            F.coalesce(F.col(DELETED), F.lit(False)).alias(DELETED),
            F.col("_metadata.file_path").alias(_PATH),
        )
        counts = (
            rows.join(ids, on=list(id_columns), how="left_semi")
            .groupBy(_PATH)
            .agg(F.count(F.lit(1)).alias("rows"), F.sum(F.col(DELETED).cast("long")).alias("tomb"))
            .collect()  # one small row per affected file
        )
        hits: dict[int, list[_Hit]] = {}
        for row in counts:
            sequence, path = where[spark_file_key(row[_PATH])]
            hits.setdefault(sequence, []).append(_Hit(path, int(row["rows"]), int(row["tomb"])))
        return hits

    def _offered_removed(
        self,
        view: LogView,
        table: str,
        ids: DataFrame,
        id_columns: Sequence[str],
        hits: Mapping[int, Sequence[_Hit]],
    ) -> dict[int, int]:
        """Per entry of ``table`` that recorded ``rows_offered``, how many of its offered
        rows the purge takes (``PurgeMark.offered_removed``): a minor's are the rows
        removed from its files; a carrying major's are the purged entities alive in its
        state (carried and own rows), counted in one Spark job over the majors whose state
        reads a file that holds them."""
        history = view.table_revisions(table)
        counts = {
            r.sequence: sum(h.rows for h in hits[r.sequence])
            for r in history
            if not r.is_major and r.tables[table].rows_offered is not None and r.sequence in hits
        }
        states = []
        for major in history:
            if not major.is_major or major.tables[table].rows_offered is None:
                continue
            selection = state_selection(
                history, table, as_of=major.timestamp, max_sequence=major.sequence
            )
            try:
                plan = plan_merge(view, selection, f"the state of major {major.name!r}")
            except RetentionError:
                continue  # its state is gone: nothing left to count
            if {t.sequence for t in plan.tasks} & set(hits):
                alive = self._executor.merge(plan).select(*id_columns)
                state = alive.join(ids, on=list(id_columns), how="left_semi")
                states.append(state.select(F.lit(major.sequence).alias(_MAJOR)))
        if states:
            union = reduce(DataFrame.unionByName, states)
            for row in union.groupBy(_MAJOR).count().collect():  # one row per major
                counts[int(row[_MAJOR])] = int(row["count"])
        return counts

    @staticmethod
    def _counted(entry: Revision, table: str, hits: Sequence[_Hit]) -> PurgedWrite:
        """A dry run's swap: the counts, the old files."""
        old = entry.tables[table]
        return _swap(entry, table, hits, old.files, old.bytes, old.file_stats)

    def _rewrite(
        self, name: str, entry: Revision, table: str, hits: Sequence[_Hit], ids: DataFrame
    ) -> PurgedWrite:
        """The files of ``entry`` that hold the ids, rewritten without them. The job that
        rewrites them checks every row it reads against its stored hash: a file whose values
        changed since they were committed fails it, naming the file, and nothing is
        committed."""
        old = entry.tables[table]
        affected = {h.path for h in hits}
        # each file rewritten by one task of its own: its new file keeps within its id range
        # (files clustered by id stay so), and holds no more rows than it did
        parts = []
        for path in sorted(affected):
            stored = _hash_checked(parquet_files(self.spark, [self.storage.spark_uri(path)]), old)
            kept = stored.join(ids, on=list(old.id_columns), how="left_anti")
            parts.append(kept.select(*stored.columns).coalesce(1))
        prefix = f"{name}-{entry.sequence}/{table}"
        into = f"purge of table {table!r} into {self.storage.uri}/{prefix}"
        with self._executor.failures(table, [(entry.name, p) for p in sorted(affected)], into):
            write_observed(
                reduce(DataFrame.unionByName, parts),
                self.storage.spark_uri(prefix),
                sort_by=old.id_columns,
            )
        written = written_files(self.storage, prefix, old.id_columns, old.schema_json)
        folders = {p.rsplit("/", 1)[0] for p in affected}
        old_sizes = {f.path: f.size for folder in folders for f in self.storage.list_files(folder)}
        logged = zip(old.files, self.log.file_stats(old), strict=True)
        staying = [(f, s) for f, s in logged if f not in affected]
        files = tuple(f for f, _ in staying) + written.files
        stats = tuple(s for _, s in staying) + written.stats
        size = old.bytes - sum(old_sizes.get(p, 0) for p in affected)
        return _swap(entry, table, hits, files, size + written.bytes, stats)

    def _remove_rewritten(self, name: str, affected: Sequence[Revision]) -> None:
        """The folders of a purge that will not be committed."""
        for entry in affected:
            self.storage.delete_tree(f"{name}-{entry.sequence}")


def _hash_checked(stored: DataFrame, write: TableWrite) -> DataFrame:
    """The rows of a relation of files ``write`` wrote, as stored, their ``_row_hash``
    checked against their values (``hashing.checked_hash``; files written before hashes
    hold none: nothing to check)."""
    if ROW_HASH not in stored.columns:
        return stored
    recorded = recorded_schema(write.schema_json)
    values = [c for c in value_columns(recorded, write.id_columns) if c in stored.columns]
    return stored.withColumn(ROW_HASH, checked_hash(recorded, values))


def _swap(
    entry: Revision,
    table: str,
    hits: Sequence[_Hit],
    files: tuple[str, ...],
    size: int,
    stats: tuple[FileStats, ...] | None,
) -> PurgedWrite:
    """``entry``'s write of ``table`` without the rows of ``hits``, now in ``files``."""
    old = entry.tables[table]
    removed = sum(h.rows for h in hits)
    tombstones = old.tombstones - sum(h.tombstones for h in hits)
    write = old.purged(files, old.rows - removed, tombstones, size, stats)
    return PurgedWrite(entry.sequence, write, removed)


__all__ = ["Purge"]
