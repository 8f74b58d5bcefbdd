"""The change feed: ``spark.readStream.format("revisions").option("changes", "true")``.

A stream of one table's changes in the order of the log. An offset is a position in the
log's commit order, ``{"table": t, "sequence": S}``: everything up to sequence S has been
delivered. A micro-batch from S to E is the change read ``changes(since_sequence=S,
until_sequence=E)`` of the library (docs/concepts/read-semantics.md), planned on the
driver and read in the executors like a batch read (``planning.py``, ``worker.py``):

* the first micro-batch of a new query (``startingPosition=bootstrap``, the default) starts
  at 0: the state at the head, every row an insert with ``_reset`` true;
* then each batch holds the entities the revisions in (S, E] touched, with their state at E
  (``_deleted`` for deletions) and the revision that wrote each row;
* a major in (S, E] makes the batch a reset: the state at E, every row with ``_reset``
  true (the consumer replaces its copy), or, with ``onMajor=fail``, stops the query with a
  ``ChangeFeedError``;
* offsets move only to revisions of the table: compactions, vacuums, purges and other
  tables' revisions make no batch.

Spark records each batch's (S, E] in its checkpoint before the batch runs and replays it
after a failure: the same change read again (a pure function of the log, which is
append-only), so an idempotent sink receives every change exactly once. A position whose
files a vacuum removed is a ``RetentionError`` naming the oldest position still readable.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from ..core.errors import ChangeFeedError, InvalidArgumentError, RetentionError
from ..core.log.records import Revision
from ..core.log.revision_log import RevisionLog
from ..core.log.view import LogView
from ..core.read.plan.refs import resolve_position
from ..core.read.plan.requests import ChangePlan, plan_read
from ..core.read.plan.schema import Schema
from ..core.read.scan import DatasetSnapshot
from ..core.storage.backends import open_storage
from .options import BOOTSTRAP, LATEST, STREAM_SPELLING, SourceOptions
from .planning import PlannedRead, output_fields, split, struct_type
from .worker import ReadPart, read_part

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

#: the options a change feed sets itself, batch by batch
_SET_BY_THE_FEED = ("at", "known_at", "since", "until", "since_sequence", "until_sequence")


class ChangeFeedReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The stream reader of a change feed (see the module doc). Spark keeps one per query in
    a Python process of the driver: it reads the log for every trigger (new entries only)."""

    def __init__(self, options: SourceOptions, schema: StructType):
        request = options.read_request()
        if request.kind != "changes":
            raise InvalidArgumentError(
                f"spark.readStream of table {request.table!r} ({options.root}) is the table's "
                'change feed: add .option("changes", "true") (a stream has the columns of a '
                "change read: _deleted, _reset and the revision of each row)"
            )
        given = [o for o in _SET_BY_THE_FEED if getattr(request, o) is not None]
        if given:
            raise InvalidArgumentError(
                f"spark.readStream of table {request.table!r}: the options {given} do not "
                "apply to a change feed, whose batches go from one position to the next: "
                "startingPosition says where it starts"
            )
        self.options = options
        self.request = request
        self.schema = schema
        self.table = request.table
        #: the last position a Trigger.AvailableNow query reads up to
        self.target: int | None = None
        self._log: RevisionLog | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Spark ships the reader to every task (read() only): not the log
        return {**self.__dict__, "_log": None}

    # -- the log ------------------------------------------------------------------------

    def _view(self) -> LogView:
        """The log caught up with storage (only new entries are read)."""
        if self._log is None:
            storage = open_storage(self.options.root, **self.options.storage_options)
            self._log = RevisionLog(storage)
        self._log.refresh()
        return self._log.view()

    def _revisions(self, view: LogView) -> list[Revision]:
        """The data revisions of the table, in commit order."""
        return view.table_revisions(self.table)

    def _offset(self, sequence: int) -> dict[str, Any]:
        return {"table": self.table, "sequence": sequence}

    def _position(self, offset: dict[str, Any]) -> int:
        """The sequence of an offset of this feed (one of another table's feed is refused:
        a checkpoint reused for another query)."""
        if offset.get("table") != self.table or not isinstance(offset.get("sequence"), int):
            raise ChangeFeedError(
                f"change feed of table {self.table!r} ({self.options.root}): the query's "
                f"checkpoint holds the position {offset!r}, not one of this table's feed; "
                "give this query a checkpoint of its own"
            )
        return offset["sequence"]

    # -- offsets --------------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        start = self.options.stream.starting_position
        if start == BOOTSTRAP:
            return self._offset(0)
        view = self._view()
        if start == LATEST:
            return self._offset(view.head)
        return self._offset(resolve_position(view.records, self.table, start))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.stream.max_revisions
        # Spark passes only its own kinds of limit back and forth: the revisions ride in one
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._view().head

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        position = self._position(start)
        revisions = [
            r
            for r in self._revisions(self._view())
            if r.sequence > position and (self.target is None or r.sequence <= self.target)
        ]
        if not revisions:
            return start
        if position > 0 and self.options.stream.on_major == "fail":
            # deliver what comes before a major, then stop at it (a batch of its own)
            first = next((n for n, r in enumerate(revisions) if r.is_major), None)
            revisions = revisions[: max(first, 1)] if first is not None else revisions
        # the bootstrap is one batch, the state at the newest revision; after it, at most
        # maxRevisionsPerTrigger revisions a batch unless Spark asks for everything
        capped = position > 0 and not isinstance(limit, ReadAllAvailable)
        count = self.options.stream.max_revisions if capped else None
        end = revisions[min(count, len(revisions)) - 1] if count else revisions[-1]
        return self._offset(end.sequence)

    # -- batches --------------------------------------------------------------------------

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        since, until = self._position(start), self._position(end)
        if since >= until:
            return []
        view = self._view()
        request = replace(self.request, since_sequence=since, until_sequence=until)
        what = f"change feed of table {self.table!r} ({self.options.root})"
        try:
            plan = plan_read(DatasetSnapshot(self.options.root, view), request)
        except RetentionError as exc:
            raise RetentionError(f"{exc}; {_oldest_readable(view, what, since)}") from exc
        assert isinstance(plan, ChangePlan)
        if plan.is_reset and since > 0 and self.options.stream.on_major == "fail":
            raise ChangeFeedError(
                f"{what}: the revisions after position {since} up to {until} include the "
                f"major {plan.selection.major.name!r} (sequence "
                f"{plan.selection.major.sequence}), a reset: the query was started with "
                "onMajor=fail. Replay the new state: restart it with onMajor=reset (the "
                "next batch is the state, every row with _reset true); or start a new query "
                f"(a new checkpoint) from startingPosition={until}"
            )
        fields = output_fields(plan, request)
        self._check_columns(
            plan, fields, f"{what}: the revisions after position {since} up to {until}"
        )
        planned = PlannedRead(self.options, self.options.root, request, plan, view.head, fields)
        return list(split(planned, ()))

    def _check_columns(self, plan: ChangePlan, fields: Schema, what: str) -> None:
        """Refuse a batch whose columns are not the query's: columns added or retyped since
        it started, or dropped by a major (a batch of revisions older than a column added
        later reads it as null)."""
        mine = {f.name: f.dataType for f in self.schema.fields}
        theirs = {f.name: f.dataType for f in struct_type(fields).fields}
        added = [n for n in theirs if n not in mine]
        retyped = [n for n in theirs if n in mine and theirs[n] != mine[n]]
        dropped = [n for n in mine if n not in theirs] if plan.is_reset else []
        if added or retyped or dropped:
            changes = {"added": added, "retyped": retyped, "dropped": dropped}
            told = "; ".join(f"{k} {v}" for k, v in changes.items() if v)
            raise ChangeFeedError(
                f"{what} have other columns than the query started with ({told}): restart "
                "the query to read them (its checkpoint stays valid)"
            )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ReadPart)
        return read_part(partition, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the log keeps every revision; the position is Spark's to keep."""


def _oldest_readable(view: LogView, what: str, position: int) -> str:
    """How a feed past retention goes on: the oldest position a vacuum left readable."""
    horizons = [r.vacuum.horizon_sequence for r in view.logged if r.vacuum is not None]
    oldest = max(horizons, default=0)
    return (
        f"{what} at position {position} is past retention: the oldest position still "
        f"readable is {oldest}; start a new query (a new checkpoint) with "
        f"{STREAM_SPELLING['startingposition']}=bootstrap (the state, then its changes) or "
        f"{STREAM_SPELLING['startingposition']}={oldest}"
    )
