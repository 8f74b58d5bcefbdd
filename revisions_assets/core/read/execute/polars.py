"""The Polars executor: a ``MergePlan`` as one lazy Polars query, in this process, no JVM.

The same plans as the Spark executor (``read/plan/``), run as ``LazyFrame``s, so Polars'
optimizer pushes projections and id filters into the Parquet scans and can stream the
result. Files are scanned under the read schema given up front (no footer is read to plan:
columns a file lacks read as null, Spark's INT96 instants as UTC microseconds, narrower
integers and floats are widened; files of another column type are scanned as written and
cast). A row carries its revision's sequence and order only where a read needs them (the
revision columns, or rows ranked across a compaction); rows of a compaction carry the
sequence of the revision that wrote them.

"Latest row per entity wins", streamed: each revision's rows (the base's first) are
anti-joined with the ids the revisions after it wrote, and the results stacked. No row is
held: every join is built on ids alone (Polars' own choice of the build side would first
sample the rows of both sides), so a read holds the ids of the revisions newer than the
one it streams plus a row group in flight per file, whatever the size of the table or of a
minor, and a filter pushed into the scans is right for any column (a row's fate depends on
the ids of later revisions only). When some newer row is older than rows of the base (a
revision read on top of a compaction that holds later rows), rows are ranked instead: each
entity newer revisions wrote keeps the row of the highest order among theirs and the
base's, found by a join built on those entities' ids.

A large merge on a base clustered by id runs one id range at a time (``_by_id_range``, the
ranges ``read/plan/ranges.py`` cuts from the log): the same merge per range, over the files
that meet it, every scan filtered to it, the ranges stacked in order and run one after the
other, so a read holds the newer ids of one range.

Every file is opened by its literal path (``glob=False``: Polars would otherwise expand
``*``, ``?`` and ``[…]`` in a path the log names into other files).

Types follow the schemas recorded in the log: Spark's ``timestamp`` (an instant) reads as
``Datetime("us", "UTC")``, ``timestamp_ntz`` as a naive ``Datetime("us")``, decimals keep
their precision and scale.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import polars as pl

from ...columns import DELETED, REVISION_COLUMNS, ROW_HASH, SOURCE_SEQUENCE
from ..plan.as_of_join import AsOfJoinPlan
from ..plan.pruning import IdRange
from ..plan.ranges import id_ranges, ranged_tasks
from ..plan.scans import MergePlan, ScanTask
from ..plan.schema import Schema, agrees
from .frames import SPAN_ORDER, Executor, Rows, SpanScan
from .polars_as_of_join import polars_as_of_join
from .remote import RemoteFiles

#: turns the log's relative file paths into what ``scan_parquet`` opens: local paths (fetched
#: into a cache first) or the files' URIs on object storage
LocalFiles = Callable[[Sequence[str]], list[str]]

PolarsSchema = dict[str, pl.DataType]

_SEQ, _ORDER, _BEST, _FILE = "__sequence", "__order", "__best_order", "__file"
#: up to this many tasks, a merge is a tree of anti-joins and a scan per task; more take
#: one scan of all their files (``Scanner.tagged``, ``_in_one_pass``)
FEW_TASKS = 32
#: up to this many rows (as logged) in the many revisions on a base, their files are scanned
#: once and the rows held while the latest order per entity is found: hourly one-row minors
#: are mostly the cost of opening each file, which a second scan of their ids would double
HELD_ROWS = 250_000
#: every join of a merge is built on its right side, ids only (see the module doc)
_ON_IDS = "force_right"
UTC_MICROS = pl.Datetime("us", "UTC")
#: the seed of the row hash a read computes over some columns (``rehash``)
_HASH_SEED = 42

_SIMPLE: dict[str, pl.DataType] = {
    "boolean": pl.Boolean(),
    "byte": pl.Int8(),
    "short": pl.Int16(),
    "integer": pl.Int32(),
    "long": pl.Int64(),
    "float": pl.Float32(),
    "double": pl.Float64(),
    "string": pl.String(),
    "binary": pl.Binary(),
    "date": pl.Date(),
    "timestamp": UTC_MICROS,
    "timestamp_ntz": pl.Datetime("us"),
    "void": pl.Null(),
}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_VARCHAR = re.compile(r"^(var)?char\(\d+\)$")
_CAST = pl.ScanCastOptions(
    integer_cast="upcast",
    float_cast="upcast",
    datetime_cast=["nanosecond-downcast", "convert-timezone"],
    missing_struct_fields="insert",
    extra_struct_fields="ignore",
)
_SYSTEM: PolarsSchema = {DELETED: pl.Boolean(), ROW_HASH: pl.Int64()}


def polars_type(spark_type: Any) -> pl.DataType:
    """The Polars type of a Spark type as the log records it (``StructType.json()``)."""
    if isinstance(spark_type, str):
        if spark_type in _SIMPLE:
            return _SIMPLE[spark_type]
        if match := _DECIMAL.match(spark_type):
            return pl.Decimal(int(match.group(1)), int(match.group(2)))
        if _VARCHAR.match(spark_type):
            return pl.String()
        raise NotImplementedError(f"no Polars type for the Spark type {spark_type!r}")
    kind = spark_type["type"]
    if kind == "array":
        return pl.List(polars_type(spark_type["elementType"]))
    if kind == "struct":
        return pl.Struct({f["name"]: polars_type(f["type"]) for f in spark_type["fields"]})
    if kind == "map":  # Parquet stores a map as a list of key/value pairs
        key, value = polars_type(spark_type["keyType"]), polars_type(spark_type["valueType"])
        return pl.List(pl.Struct({"key": key, "value": value}))
    raise NotImplementedError(f"no Polars type for the Spark type {kind!r}")


@lru_cache(maxsize=512)
def _polars_schema(schema: Schema) -> tuple[tuple[str, pl.DataType], ...]:
    return tuple((f.name, polars_type(f.type)) for f in schema)


def polars_schema(schema: Schema) -> PolarsSchema:
    """A read schema as a Polars schema, in order."""
    return dict(_polars_schema(schema))


def empty_frame(schema: PolarsSchema) -> pl.LazyFrame:
    return pl.LazyFrame(schema=schema)


def _conform(name: str, have: pl.DataType | None, want: pl.DataType) -> pl.Expr:
    """Column ``name`` (of type ``have`` in the files, None when absent) as type ``want``."""
    if have is None:
        return pl.lit(None, dtype=want).alias(name)
    if have == want:
        return pl.col(name)
    return pl.col(name).cast(want).alias(name)


class Scanner:
    """Scans the files of tasks into rows of the read schema + ``_deleted`` (false in files
    written before tombstones were flagged) + ``_row_hash`` (null before hashes) + the
    producing sequence and the rank of its revision. ``remote``: how files on an object
    store are scanned in place (None: ``local`` gives local paths); ``within``: a filter on the ids
    every scan applies (one range of a merge by id range: row groups outside it are
    skipped by their statistics)."""

    def __init__(
        self,
        local: LocalFiles,
        schema: Schema,
        order: dict[int, int],
        remote: RemoteFiles | None = None,
        within: pl.Expr | None = None,
    ):
        self.local = local
        self.remote = remote
        self.within = within
        self.schema = schema
        self.types = polars_schema(schema)
        #: sequence -> order of the revisions that rank (compaction rows look it up)
        self.order = order
        #: the shared id scan of each task's remote files (``ids_of``)
        self._ids: dict[tuple[str, ...], pl.LazyFrame] = {}
        self._paths: dict[str, str] = {}

    def _local(self, files: Sequence[str]) -> list[str]:
        """The local paths of ``files``, each asked of ``local`` once per scanner."""
        todo = [f for f in dict.fromkeys(files) if f not in self._paths]
        if todo:
            self._paths.update(zip(todo, self.local(todo), strict=True))
        return [self._paths[f] for f in files]

    def stacked(
        self, tasks: Sequence[ScanTask], extra: PolarsSchema | None = None, *, paths: bool = False
    ) -> pl.LazyFrame:
        """The rows of ``tasks`` in the read schema + the system columns + ``extra`` (+ the
        local path of each row's file as ``_FILE`` if ``paths``), in the order of the tasks:
        one scan per run of tasks whose columns have the same types (one scan in the common
        case, whatever the number of tasks), cast to the read types."""
        extra = {**(extra or {}), **({_FILE: pl.String()} if paths else {})}
        runs: list[tuple[Schema | None, list[str]]] = []
        for task in tasks:
            own = None if agrees(task.schema, self.schema) else task.schema
            if runs and runs[-1][0] == own:
                runs[-1][1].extend(task.files)
            else:
                runs.append((own, list(task.files)))
        parts = [self._files(files, extra, own, paths) for own, files in runs]
        parts = [p for p in parts if p is not None]
        if not parts:
            return empty_frame({**self.types, **_SYSTEM, **extra})
        rows = parts[0] if len(parts) == 1 else pl.concat(parts, how="vertical")
        return rows.with_columns(pl.col(DELETED).fill_null(False))

    def _files(
        self, files: Sequence[str], extra: PolarsSchema, own: Schema | None, paths: bool
    ) -> pl.LazyFrame | None:
        """One scan of ``files`` in the read schema; ``own``: the files' schema when its
        column types differ (scanned as written, then cast)."""
        if not files:
            return None
        types = self.types if own is None else polars_schema(own)
        rows = self._scan(
            self._local(files),
            {**types, **_SYSTEM, **{k: v for k, v in extra.items() if k != _FILE}},
            paths_column=paths,
        )
        if types is not self.types:
            rows = rows.select(
                *[_conform(n, types.get(n), t) for n, t in self.types.items()], *_SYSTEM, *extra
            )
        return self._within(rows)

    def tagged(
        self, tasks: Sequence[ScanTask], column: str, value: Callable[[ScanTask], int]
    ) -> pl.LazyFrame:
        """The rows of ``tasks`` (tombstones included), each with ``column`` = ``value`` of
        its task, once per task naming its file (a task may come twice: the pieces of a
        carried revision's span). Up to ``FEW_TASKS`` tasks: one scan per task and a
        literal; more: one scan of every file, the value found from the row's file, so the
        plan is as small at 100,000 revisions as at one."""
        if len(tasks) <= FEW_TASKS:
            parts = [
                self.stacked([t]).with_columns(pl.lit(value(t), dtype=pl.Int64).alias(column))
                for t in tasks
            ]
            return parts[0] if len(parts) == 1 else pl.concat(parts, how="vertical")
        values: dict[str, list[int]] = {}
        paths = self._local(_all_files(tasks))
        for path, task in zip(paths, [t for t in tasks for _ in t.files], strict=True):
            values.setdefault(path, []).append(value(task))
        distinct = list({t.files: t for t in tasks}.values())
        rows = self.stacked(distinct, paths=True)
        if all(len(v) == 1 for v in values.values()):
            single = {path: v[0] for path, v in values.items()}
            found = pl.col(_FILE).replace_strict(single, return_dtype=pl.Int64)
            return rows.with_columns(found.alias(column)).drop(_FILE)
        found = pl.col(_FILE).replace_strict(values, return_dtype=pl.List(pl.Int64))
        return rows.with_columns(found.alias(column)).drop(_FILE).explode(column)

    def revisions(self, tasks: Sequence[ScanTask]) -> pl.LazyFrame:
        """The rows of data revisions (tombstones included), each with its revision's
        sequence and order."""
        sequences = {t.order: t.sequence for t in tasks}
        rows = self.tagged(tasks, _ORDER, lambda t: t.order)
        sequence = pl.col(_ORDER).replace_strict(sequences, return_dtype=pl.Int64)
        return rows.with_columns(sequence.alias(_SEQ))

    def compaction(self, base: ScanTask) -> pl.LazyFrame:
        rows = self.stacked([base], {SOURCE_SEQUENCE: pl.Int64()}).rename({SOURCE_SEQUENCE: _SEQ})
        order = pl.col(_SEQ).replace_strict(self.order, default=-1, return_dtype=pl.Int64)
        return rows.with_columns(order.alias(_ORDER))

    def ids_of(self, tasks: Sequence[ScanTask], ids: Sequence[str]) -> pl.LazyFrame:
        """The ids ``tasks`` wrote (repeats are harmless to the joins built on them): a scan
        of the id columns per task, stacked, so that the same revision's ids feed every
        join that needs them from one shared scan (one scan of them all past
        ``FEW_TASKS``). Never the rows' scan narrowed (Polars would share one scan between
        both and hold the revision's rows until the rows' side of the merge reads them).
        The files agree with the read schema here, so the ids are scanned as the files
        record them, without a schema given.

        Files read in place on an object store (``remote``), where each scan of a file
        fetches its id chunks again, are scanned once per read: every join that needs a
        task's ids shares the scan (``cache()``)."""
        if not all(agrees(t.schema, self.schema) for t in tasks):
            return self.stacked(tasks).select(ids)
        types = {c: self.types[c] for c in ids}
        groups = [t.files for t in tasks] if len(tasks) <= FEW_TASKS else [_all_files(tasks)]
        parts = [self._ids_scan(tuple(files), types) for files in groups if files]
        if not parts:
            return empty_frame(types)
        return parts[0] if len(parts) == 1 else pl.concat(parts, how="vertical")

    def _ids_scan(self, files: tuple[str, ...], types: PolarsSchema) -> pl.LazyFrame:
        if self.remote is None:
            ids = pl.scan_parquet(self._local(files), glob=False, cast_options=_CAST)
            return self._within(ids.select(list(types)))
        key = (*files, *types)
        if key not in self._ids:
            self._ids[key] = self._within(self._scan(self._local(files), types)).cache()
        return self._ids[key]

    def _scan(
        self, paths: list[str], types: PolarsSchema, *, paths_column: bool = False
    ) -> pl.LazyFrame:
        """One scan of the files ``paths`` in ``types`` (a column a file lacks reads as
        null, narrower types widened), with each row's path as ``_FILE`` if asked."""
        if self.remote is not None:
            kinds = {f.name: f.type for f in self.schema if isinstance(f.type, str)}
            return self.remote.scan(
                paths, types, file_column=_FILE if paths_column else None, column_types=kinds
            )
        return pl.scan_parquet(
            paths,
            glob=False,  # a path is one file, literally
            schema=types,
            missing_columns="insert",
            extra_columns="ignore",
            cast_options=_CAST,
            include_file_paths=_FILE if paths_column else None,
        )

    def _within(self, rows: pl.LazyFrame) -> pl.LazyFrame:
        """``rows`` in the scanner's id range (all of them without one)."""
        return rows if self.within is None else rows.filter(self.within)

    def latest_orders(self, tasks: Sequence[ScanTask], ids: Sequence[str]) -> pl.LazyFrame:
        """Per entity ``tasks`` wrote, the highest order among theirs (``_ORDER``): from a
        scan of the id columns and the file of each row, never the rows' scan (see
        ``ids_of``)."""
        if all(agrees(t.schema, self.schema) for t in tasks):
            paths = self._local(_all_files(tasks))
            orders = dict(zip(paths, [t.order for t in tasks for _ in t.files], strict=True))
            found = pl.col(_FILE).replace_strict(orders, return_dtype=pl.Int64)
            types = {c: self.types[c] for c in ids}
            written = self._scan(paths, types, paths_column=True).select(*ids, found.alias(_ORDER))
        else:
            written = self.revisions(tasks).select(*ids, _ORDER)
        return written.group_by(ids).agg(pl.col(_ORDER).max())


def _all_files(tasks: Sequence[ScanTask]) -> list[str]:
    return [f for t in tasks for f in t.files]


def _rows_of(scan: Scanner, task: ScanTask, annotate: bool) -> pl.LazyFrame:
    """The rows of one task, with the sequence that wrote each if ``annotate``."""
    if task.is_compaction:
        rows = scan.compaction(task)
        return rows.drop(_ORDER) if annotate else rows.drop(_SEQ, _ORDER)
    rows = scan.stacked([task])
    if annotate:
        rows = rows.with_columns(pl.lit(task.sequence, dtype=pl.Int64).alias(_SEQ))
    return rows


def _streamed(
    scan: Scanner, tasks: Sequence[ScanTask], ids: list[str], annotate: bool
) -> pl.LazyFrame:
    """The rows of ``tasks`` (in merge order, each newer than all before it) that no later
    task replaces: the older tasks' survivors without the entities the later ones wrote,
    stacked on the later ones' survivors. The split halves the rows the log counts, so a
    large task (the base, a large minor) sits near the top: its rows are probed once, its
    ids are built into few joins, and no task's ids more than about log2(len(tasks))
    times; every join is built on ids (a chain of one join per task would build the ids
    of a late large minor into every join before it). Past ``FEW_TASKS`` tasks on the
    base, ``_in_one_pass`` instead."""
    if len(tasks) == 1:
        return _rows_of(scan, tasks[0], annotate)
    split = _halving(tasks)
    older, later = tasks[:split], tasks[split:]
    survivors = _streamed(scan, older, ids, annotate).join(
        scan.ids_of(later, ids), on=ids, how="anti", build_side=_ON_IDS
    )
    return pl.concat([survivors, _streamed(scan, later, ids, annotate)], how="vertical")


def _in_one_pass(scan: Scanner, plan: MergePlan, annotate: bool) -> pl.LazyFrame:
    """The latest rows when many revisions lie on the base, each newer than all before
    it: one scan of the newer revisions' ids finds the highest order per entity (a group-by
    on ids, as much as the tree holds), the newer rows keep the row of that order, the
    base keeps the entities none of them wrote. Three scans at any number of revisions,
    where the tree's scans of ids grow as n log n; two when the newer rows are few
    (``HELD_ROWS``): their one scan feeds both, and its rows are held meanwhile."""
    ids = list(plan.id_columns)
    newer = scan.revisions(plan.newer)
    if sum(t.rows for t in plan.newer) <= HELD_ROWS:
        latest = newer.select(*ids, _ORDER).group_by(ids).agg(pl.col(_ORDER).max())
    else:
        latest = scan.latest_orders(plan.newer, ids)
    newer = newer.join(latest, on=[*ids, _ORDER], how="semi", build_side=_ON_IDS)
    newer = newer.drop(_ORDER) if annotate else newer.drop(_SEQ, _ORDER)
    base = _rows_of(scan, plan.base, annotate).join(
        latest.select(ids), on=ids, how="anti", build_side=_ON_IDS
    )
    return pl.concat([base, newer], how="vertical")


def _by_id_range(
    scan: Scanner, plan: MergePlan, ranges: Sequence[IdRange], annotate: bool
) -> pl.LazyFrame:
    """The latest rows merged one range of the first id column at a time
    (``read/plan/ranges.py``): per range, the tasks' files that overlap it, every scan
    filtered to it, merged as ``_streamed`` merges the whole table; the ranges' rows stacked
    in order, so the streaming engine holds the newer ids of one range at a time."""
    ids = list(plan.id_columns)
    first = pl.col(ids[0])
    parts = []
    for low, high in ranges:
        tasks = ranged_tasks(plan, low, high)
        if not tasks:
            continue
        if low is None:
            within = first < high
        elif high is None:
            within = first >= low
        else:
            within = (first >= low) & (first < high)
        ranged = Scanner(scan.local, scan.schema, scan.order, scan.remote, within)
        parts.append(_streamed(ranged, tasks, ids, annotate))
    return pl.concat(parts, how="vertical", parallel=False)


def _halving(tasks: Sequence[ScanTask]) -> int:
    """The index that splits ``tasks`` into two non-empty runs of about equal rows."""
    total, before = sum(t.rows for t in tasks), 0
    best, split = None, 1
    for n in range(1, len(tasks)):
        before += tasks[n - 1].rows
        gap = abs(total - 2 * before)
        if best is None or gap < best:
            best, split = gap, n
    return split


def _ranked(scan: Scanner, plan: MergePlan) -> pl.LazyFrame:
    """The latest rows when some newer row is older than rows of the base: the entities
    newer revisions wrote keep their row of the highest order among the newer revisions'
    and the base's (a join built on those entities alone); the others keep the base's."""
    ids = list(plan.id_columns)
    base, newer = scan.compaction(plan.base), scan.revisions(plan.newer)
    written = scan.ids_of(plan.newer, ids)
    contenders = pl.concat(
        [
            newer.select(*ids, _ORDER),
            base.select(*ids, _ORDER).join(written, on=ids, how="semi", build_side=_ON_IDS),
        ]
    )
    best = contenders.group_by(ids).agg(pl.col(_ORDER).max().alias(_BEST))
    rows = pl.concat([base, newer]).join(best, on=ids, how="left", build_side=_ON_IDS)
    return rows.filter(pl.col(_BEST).is_null() | (pl.col(_ORDER) == pl.col(_BEST)))


def latest_frame(
    local: LocalFiles,
    plan: MergePlan,
    rows_wanted: Rows,
    remote: RemoteFiles | None = None,
    *,
    by_id_range: bool = True,
) -> pl.LazyFrame:
    """The latest row per entity over a merge plan (the Spark executor's rules), tombstones
    included, with the revision columns or ``_revision_sequence`` if ``rows_wanted`` asks;
    a large merge one id range at a time if ``by_id_range`` (a streamed read)."""
    order = {r.sequence: n for n, r in enumerate(plan.merge)}
    scan = Scanner(local, plan.schema, order, remote)
    annotate = rows_wanted.with_revision or rows_wanted.with_sequence
    if plan.base_is_prefix and len(plan.newer) > FEW_TASKS:
        merged = _in_one_pass(scan, plan, annotate)
    elif plan.base_is_prefix and by_id_range and (ranges := id_ranges(plan)) is not None:
        merged = _by_id_range(scan, plan, ranges, annotate)
    elif plan.base_is_prefix:
        merged = _streamed(scan, plan.tasks, list(plan.id_columns), annotate)
    else:  # a revision read on top of a compaction is older than rows it holds
        merged = _ranked(scan, plan)
    if rows_wanted.with_revision:
        return merged.with_columns(revision_columns(plan, pl.col(_SEQ)))
    if rows_wanted.with_sequence:
        return merged.with_columns(pl.col(_SEQ).alias(SOURCE_SEQUENCE))
    return merged


def revision_columns(plan: MergePlan, sequence: pl.Expr) -> list[pl.Expr]:
    """``_revision``, ``_revision_timestamp``, ``_revision_sequence`` of the revision with
    ``sequence`` among the plan's merge (null for others)."""
    names = {r.sequence: r.name for r in plan.merge}
    stamps = {r.sequence: r.timestamp for r in plan.merge}
    return [
        sequence.replace_strict(names, default=None, return_dtype=pl.String).alias(
            REVISION_COLUMNS[0]
        ),
        sequence.replace_strict(stamps, default=None, return_dtype=UTC_MICROS).alias(
            REVISION_COLUMNS[1]
        ),
        sequence.alias(REVISION_COLUMNS[2]),
    ]


class PolarsExecutor(Executor[pl.LazyFrame]):
    """Runs plans as Polars ``LazyFrame``s over data files: local ones (``local`` fetches
    remote ones into a cache first), or remote ones read in place by byte ranges
    (``remote``)."""

    def __init__(
        self, local: LocalFiles, remote: RemoteFiles | None = None, *, by_id_range: bool = True
    ):
        self.local = local
        self.remote = remote
        #: whether a large merge streams one id range at a time (``_by_id_range``)
        self.by_id_range = by_id_range

    def eager(self) -> PolarsExecutor:
        return PolarsExecutor(self.local, self.remote, by_id_range=False)

    def latest(self, plan: MergePlan, rows: Rows) -> pl.LazyFrame:
        return latest_frame(self.local, plan, rows, self.remote, by_id_range=self.by_id_range)

    def only_entities_of(self, frame: pl.LazyFrame, plan: MergePlan) -> pl.LazyFrame:
        ids = list(plan.id_columns)
        written = Scanner(self.local, plan.schema, {}, self.remote).ids_of(
            plan.only_ids_of or (), ids
        )
        return frame.join(written, on=ids, how="semi", build_side=_ON_IDS)

    def empty(self, schema: Schema, rows: Rows) -> pl.LazyFrame:
        types = polars_schema(schema)
        if rows.keep_deleted:
            types[DELETED] = pl.Boolean()
        if rows.with_revision:
            types.update(zip(REVISION_COLUMNS, (pl.String(), UTC_MICROS, pl.Int64()), strict=True))
        return empty_frame(types)

    def rehash(self, frame: pl.LazyFrame, columns: Sequence[str]) -> pl.LazyFrame:
        """``frame`` with ``_row_hash`` over ``columns`` only, computed now (null on
        tombstones); compared only with hashes computed the same way in the same read."""
        hashed = (
            pl.struct(sorted(columns)).hash(_HASH_SEED).reinterpret(signed=True)
            if columns
            else pl.lit(_HASH_SEED, dtype=pl.Int64)
        )
        if DELETED in frame.collect_schema():
            hashed = pl.when(~pl.col(DELETED)).then(hashed)
        return frame.with_columns(hashed.alias(ROW_HASH))

    def as_of_join(
        self, plan: AsOfJoinPlan, events: Any, *, event_time: str, on: object
    ) -> pl.LazyFrame:
        return polars_as_of_join(self, plan, events, event_time=event_time, on=on)

    def span_rows(self, scan: SpanScan) -> pl.LazyFrame:
        scanner = Scanner(self.local, scan.schema, {}, self.remote)
        parts = [scanner.tagged(scan.tasks, SPAN_ORDER, lambda t: t.order)] if scan.tasks else []
        if scan.base is not None:
            orders = {q: list(o) for q, o in scan.base_orders}
            at = pl.col(_SEQ).replace_strict(orders, default=None, return_dtype=pl.List(pl.Int64))
            base = scanner.stacked([scan.base], {SOURCE_SEQUENCE: pl.Int64()})
            base = base.rename({SOURCE_SEQUENCE: _SEQ}).with_columns(at.alias(SPAN_ORDER))
            base = base.explode(SPAN_ORDER).drop(_SEQ).filter(pl.col(SPAN_ORDER).is_not_null())
            parts.append(base)
        rows = pl.concat(parts, how="vertical")
        types = {"timestamp": UTC_MICROS, "string": pl.String()}
        return rows.with_columns(
            pl.col(SPAN_ORDER)
            .replace_strict(dict(enumerate(values)), return_dtype=types[kind])
            .alias(name)
            for name, (values, kind) in scan.values.items()
        )
