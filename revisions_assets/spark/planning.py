"""A read of ``format("revisions")`` planned on the driver: one snapshot of the log, one plan
(the engine's, ``core/read/plan/``), split into the parts Spark's tasks read.

Spark asks a Python data source for its schema and its partitions in Python processes of
the driver; both come from one ``PlannedRead``, made once from one snapshot of the log,
so the rows every task returns are those of one state of the dataset, however many
commits land meanwhile. The parts carry their plan: a task reads no log.

How a read splits (``split``): a state read of one revision's files (a major or a
compaction with nothing on top) by its files, each entity being in one file; any other
read (a merge of revisions, changes, a history) by ranges of its first id column, each
entity being in one range. The ranges cut the rows of its largest revision in about equal
parts, found from the row groups' statistics in the files' footers (files are sorted by
the ids, so each range reads about its share of every file's row groups). The number of
parts follows the bytes the log records (about ``PART_BYTES`` each) unless the option
``partitions`` gives it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..core.columns import DELETED, REVISION_COLUMNS
from ..core.errors import InvalidArgumentError, MissingFileError, RetentionError
from ..core.log.layout import not_a_dataset
from ..core.log.records import Revision
from ..core.log.revision_log import RevisionLog
from ..core.log.view import LogView
from ..core.read.execute.files import FileGate
from ..core.read.execute.history import HISTORY_FIELDS
from ..core.read.plan.requests import ChangePlan, HistoryPlan, ReadRequest, StatePlan, plan_read
from ..core.read.plan.scans import ScanTask
from ..core.read.plan.schema import Field, Schema, to_struct_json
from ..core.read.scan import DatasetSnapshot, plan_tasks
from ..core.storage.backends import open_storage
from ..core.storage.base import Storage
from ..core.storage.footer import footer
from .filters import range_may_hold
from .options import SourceOptions
from .worker import RESET, IdRange, ReadPart

if TYPE_CHECKING:
    from pyspark.sql.datasource import Filter
    from pyspark.sql.types import StructType

Plan = StatePlan | ChangePlan | HistoryPlan

#: about this many bytes of the files a read scans (as the log records them) make a part
PART_BYTES = 128 * 2**20
#: the Spark types of a first id column whose ranges split a read (Parquet's statistics
#: order them as Polars compares them)
_RANGED_TYPES = {'"byte"', '"short"', '"integer"', '"long"', '"string"', '"date"'}

#: the system columns a read through Spark returns, with their types
DELETED_FIELD = Field(DELETED, '"boolean"')
RESET_FIELD = Field(RESET, '"boolean"')
REVISION_FIELDS: Schema = tuple(
    Field(name, kind)
    for name, kind in zip(REVISION_COLUMNS, ('"string"', '"timestamp"', '"long"'), strict=True)
)


@dataclass(frozen=True)
class PlannedRead:
    """A read as one snapshot of the log plans it: the plan, the columns it returns."""

    options: SourceOptions
    root: str
    request: ReadRequest
    plan: Plan
    head: int
    fields: Schema

    @property
    def id_columns(self) -> tuple[str, ...]:
        plan = self.plan
        return plan.rows.id_columns if isinstance(plan, StatePlan) else plan.id_columns

    @property
    def spark_schema(self) -> StructType:
        return struct_type(self.fields)


def struct_type(fields: Schema) -> StructType:
    """Columns as Spark's ``StructType`` (every column nullable, as every read returns)."""
    from pyspark.sql.types import StructType

    return StructType.fromJson(json.loads(to_struct_json(fields)))


def open_view(options: SourceOptions) -> tuple[Storage, LogView]:
    """The dataset's storage and one snapshot of its log (DatasetNotFoundError without one)."""
    storage = open_storage(options.root, **options.storage_options)
    log = RevisionLog(storage)
    log.refresh()
    if log.head == 0:
        raise not_a_dataset(storage)
    return storage, log.view()


def plan_source_read(options: SourceOptions) -> PlannedRead:
    """The read ``options`` ask for, planned on a fresh snapshot of the log."""
    storage, view = open_view(options)
    if options.table is None:
        tables = ", ".join(map(repr, view.tables())) or "none"
        raise InvalidArgumentError(
            f'format("revisions") of {storage.uri}: give the table to read, '
            f".option(\"table\", name) (OPTIONS (table 'name') in SQL); its tables: {tables}"
        )
    request = options.read_request()
    plan = plan_read(DatasetSnapshot(storage.uri, view), request)
    return PlannedRead(options, storage.uri, request, plan, view.head, output_fields(plan, request))


def output_fields(plan: Plan, request: ReadRequest) -> Schema:
    """The columns a read returns, in order: the table's, then the system columns (as
    ``RevisionedDataset`` returns them; a change read adds ``_reset``)."""
    revision = REVISION_FIELDS if request.with_revision else ()
    if isinstance(plan, ChangePlan):
        return (*plan.schema, DELETED_FIELD, *revision, RESET_FIELD)
    if isinstance(plan, HistoryPlan):
        return (*plan.schema, *HISTORY_FIELDS)
    return (*plan.rows.schema, *revision)


def check_schema(fields: Schema, schema: StructType, what: str) -> None:
    """Refuse a schema given to the read (``spark.read.schema(...)``) that is not a choice of
    its columns with their types: the read returns those columns only."""
    mine = struct_type(fields)
    types = {f.name: f.dataType for f in mine.fields}
    wrong = [
        f"{f.name} {f.dataType.simpleString()}"
        for f in schema.fields
        if types.get(f.name) != f.dataType
    ]
    if wrong:
        raise InvalidArgumentError(
            f"{what}: the schema given names columns it does not return as given: {wrong}; "
            f"its columns are {mine.simpleString()} (a schema given to the read chooses "
            "among them, or leave it out)"
        )


def split(read: PlannedRead, conditions: Sequence[Filter]) -> list[ReadPart]:
    """The parts of ``read``, each narrowed by the filters the source took; the planned
    files pass the file gate first. A change read's parts say whether it is a reset."""
    plan, options = read.plan, read.options
    reset = plan.is_reset if isinstance(plan, ChangePlan) else None
    storage = open_storage(read.root, **options.storage_options)
    try:
        FileGate(storage).check(read.request.table, plan.scanned)
    except MissingFileError as exc:
        vacuum = vacuumed_since(storage, read.head, plan)
        if vacuum is None:
            raise
        raise RetentionError(
            f"{plan.what}: planned on the log at sequence {read.head}, it needs files that "
            f"vacuum {vacuum.name!r} (sequence {vacuum.sequence}) removed since: load the "
            "DataFrame again, or make the view again (CREATE OR REPLACE TEMPORARY VIEW), to "
            "read the dataset as it is now"
        ) from exc

    def part(narrowed: Plan, id_range: IdRange | None = None) -> ReadPart:
        return ReadPart(
            root=read.root,
            table=read.request.table,
            plan=narrowed,
            request=read.request,
            id_columns=read.id_columns,
            conditions=tuple(conditions),
            id_range=id_range,
            reset=reset,
            storage_options=options.storage_options,
        )

    tasks = plan_tasks(plan)
    wanted = options.partitions or max(1, math.ceil(sum(t.bytes for t in tasks) / PART_BYTES))
    if wanted == 1 or not tasks:
        return [part(plan)]
    if isinstance(plan, StatePlan) and not plan.rows.newer and plan.rows.only_ids_of is None:
        base = plan.rows.base  # one revision's rows: each entity is in one of its files
        return [
            part(replace(plan, rows=replace(plan.rows, base=replace(base, files=group))))
            for group in _groups(base.files, wanted)
        ]
    column = read.id_columns[0]
    largest = max(tasks, key=lambda t: t.rows)
    ranges = id_ranges(storage, largest, column, wanted)
    kept = [r for r in ranges if range_may_hold(conditions, column, r.low, r.high)]
    return [part(plan, r) for r in kept] or [part(plan)]


def vacuumed_since(storage: Storage, head: int, plan: Plan) -> Revision | None:
    """The vacuum committed after sequence ``head`` that removed files ``plan`` reads, if
    any: a DataFrame or a view reads the log as it was when it was made."""
    log = RevisionLog(storage)
    log.refresh()
    planned = {t.sequence for t in plan_tasks(plan)}
    return next(
        (
            r
            for r in log.view().logged[head:]
            if r.vacuum is not None and planned & set(r.vacuum.removed)
        ),
        None,
    )


def _groups(files: Sequence[str], count: int) -> list[tuple[str, ...]]:
    """``files`` in ``count`` runs of about equal length (fewer when there are fewer files)."""
    count = min(count, len(files))
    size = len(files) / count
    return [tuple(files[round(i * size) : round((i + 1) * size)]) for i in range(count)]


def id_ranges(storage: Storage, task: ScanTask, column: str, count: int) -> list[IdRange]:
    """Up to ``count`` ranges of ``column`` that cut ``task``'s rows in about equal parts,
    from its files' row-group statistics; one unbounded range when the column's type or
    the footers do not tell (the read is then one part)."""
    whole = [IdRange(column)]
    schema = {f.name: f.type_json for f in task.schema}
    if schema.get(column) not in _RANGED_TYPES:
        return whole
    groups: list[tuple[Any, int]] = []
    for path in task.files:
        meta = footer(storage, path)
        if isinstance(meta, str):
            return whole  # the file gate has passed it: a footer this reader cannot parse
        index = meta.schema.to_arrow_schema().get_field_index(column)
        if index < 0:
            return whole
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            stats = group.column(index).statistics
            if stats is None or not stats.has_min_max:
                return whole
            groups.append((stats.min, group.num_rows))
    groups.sort(key=lambda g: g[0])
    total = sum(rows for _, rows in groups)
    bounds: list[Any] = []
    seen = 0
    for low, rows in groups:
        if seen >= total * (len(bounds) + 1) / count and (not bounds or low > bounds[-1]):
            bounds.append(low)
        seen += rows
    edges = [None, *bounds, None]
    return [IdRange(column, edges[i], edges[i + 1]) for i in range(len(edges) - 1)]
