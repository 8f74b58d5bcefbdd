"""The metadata a materialization shows in the UI: the revision, and Dagster's own conventions.

Dagster's standard keys (``dagster/column_schema``, ``dagster/uri``,
``dagster/table_name``, ``dagster/row_count``, ``dagster/partition_row_count``)
are what the UI's Columns tab, row count plots and catalog read; the data version of a
materialization is ``<table>@<sequence>`` of the revision it committed (or of the
table's head when nothing was committed), so it changes exactly when the data does.
"""

from collections.abc import Collection, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

import dagster as dg

# the tags of a materialization's input provenance, as Dagster writes them on a run's own
from dagster._core.definitions.data_version import (
    DATA_VERSION_IS_USER_PROVIDED_TAG,
    DEFAULT_DATA_VERSION,
    NULL_EVENT_POINTER,
    get_input_data_version_tag,
    get_input_event_pointer_tag,
)
from pyspark.sql.types import StructType

from revisions_assets.core.columns import DELETED
from revisions_assets.core.log.records import Revision
from revisions_assets.core.runs.commit import DeclaredColumnsError as DeclaredColumnsError
from revisions_assets.core.runs.commit import check_columns
from revisions_assets.core.runs.run_slice import RunSlice

from .slice import describe, parse_partitions, revision_partitions

COLUMN_SCHEMA = "dagster/column_schema"
TABLE_NAME = "dagster/table_name"
COLUMN_LINEAGE = "dagster/column_lineage"
#: the tags of a materialization reported outside Dagster's own output handling (a runless
#: one, or another partition a run's revision covers): what staleness and the UI read
CODE_VERSION_TAG = "dagster/code_version"
DATA_VERSION_TAG = "dagster/data_version"
#: materialization metadata: the partitions the revision covers, and the run's own
PARTITIONS = "partitions"
RUN_PARTITIONS = "run_partitions"
PARTITION_ROW_COUNT = "dagster/partition_row_count"


def data_version(table: str, sequence: int) -> str:
    """The data version of a table whose newest revision is ``sequence``."""
    return f"{table}@{sequence}"


def _column(
    name: str, type_: str, nullable: bool, description: str | None, id_columns: Sequence[str]
) -> dg.TableColumn:
    is_id = name in id_columns
    return dg.TableColumn(
        name=name,
        type=type_,
        description=description,
        constraints=dg.TableColumnConstraints(
            nullable=nullable and not is_id,
            unique=is_id and len(id_columns) == 1,
            other=["id column"] if is_id else None,
        ),
    )


def column_schema(
    schema: StructType, id_columns: tuple[str, ...], descriptions: Mapping[str, str]
) -> dg.TableSchema:
    """A TableSchema from a Spark schema: id columns marked, descriptions from the asset (or
    from a Spark column comment)."""
    return dg.TableSchema(
        columns=[
            _column(
                f.name,
                f.dataType.simpleString(),
                f.nullable,
                descriptions.get(f.name) or f.metadata.get("comment"),
                id_columns,
            )
            for f in schema.fields
        ]
    )


def declared_schema(
    columns: Mapping[str, str], id_columns: Sequence[str], descriptions: Mapping[str, str]
) -> dg.TableSchema:
    """The TableSchema of columns an asset declares as ``{name: Spark type}`` (``bigint``,
    ``double``, ``string``, ``date`` …: Spark's simple type strings), so the catalog shows them
    before the first run; the materializations then check their output against it."""
    return dg.TableSchema(
        columns=[
            _column(name, type_, True, descriptions.get(name), id_columns)
            for name, type_ in columns.items()
        ]
    )


def table_schema(value: Any) -> dg.TableSchema:
    """A ``dagster/column_schema`` entry as a TableSchema (definition metadata holds it as
    given, a TableSchema, or normalized, a TableSchemaMetadataValue)."""
    return value.schema if isinstance(value, dg.TableSchemaMetadataValue) else value


def check_declared_columns(asset_key: str, declared: dg.TableSchema, schema: StructType) -> None:
    """The output of an asset that declares its columns has exactly those, of those types
    (``DeclaredColumnsError``)."""
    check_columns(asset_key, {c.name: c.type for c in declared.columns}, schema)


def table_name(dataset: str, table: str) -> str:
    """Dagster's ``dagster/table_name`` of a table: ``<dataset>.<table>``, where the dataset is
    the last part of its name or root (known at definition time)."""
    return f"{PurePosixPath(dataset.rstrip('/')).name}.{table}"


def column_lineage(
    columns: Sequence[str],
    id_columns: Sequence[str],
    main: tuple[dg.AssetKey, Sequence[str], Sequence[str], Collection[str]],
    references: Sequence[tuple[dg.AssetKey, Mapping[str, str], Collection[str]]],
) -> dg.TableColumnLineage:
    """Which upstream columns each output column of a scoring asset may derive from.

    ``main``: (key, id columns, the value columns the scorer reads: ``uses_columns`` or all,
    all its columns); ``references``: (key, ``on`` as {main column: reference column}, the
    reference's columns). An id column comes from the main input's id column of that name
    (else from all of them); a column the main input has, from it; else one a reference
    has, from that reference; any other (a computed one) from the main's read and join
    columns and the references' join columns: what the scorer may read, a bound, not a
    trace."""
    key, main_ids, used, main_columns = main
    joined = [m for _, on, _ in references for m in on if m not in used]
    computed = [dg.TableColumnDep(asset_key=key, column_name=c) for c in [*used, *joined]]
    computed += [
        dg.TableColumnDep(asset_key=ref_key, column_name=c)
        for ref_key, on, _ in references
        for c in dict.fromkeys(on.values())
    ]
    deps: dict[str, list[dg.TableColumnDep]] = {}
    for column in columns:
        if column == DELETED:
            continue
        if column in id_columns:
            ids = [column] if column in main_ids else list(main_ids)
            deps[column] = [dg.TableColumnDep(asset_key=key, column_name=c) for c in ids]
        elif column in main_columns:
            deps[column] = [dg.TableColumnDep(asset_key=key, column_name=column)]
        else:
            held = [
                dg.TableColumnDep(asset_key=ref_key, column_name=column)
                for ref_key, _, ref_columns in references
                if column in ref_columns
            ]
            deps[column] = held or computed
    return dg.TableColumnLineage(deps_by_column=deps)


def table_metadata(
    s: RunSlice,
    schema: StructType | None,
    entities: int | None,
    descriptions: Mapping[str, str],
) -> dict[str, Any]:
    """Dagster's table and URI metadata of the slice's table."""
    return table_entries(s.root, s.table, s.id_columns, schema, entities, descriptions)


def table_entries(
    root: str,
    table: str,
    id_columns: tuple[str, ...],
    schema: StructType | None,
    entities: int | None,
    descriptions: Mapping[str, str],
) -> dict[str, Any]:
    """Dagster's table and URI metadata of a table: its URI and name, its columns (when it
    has a schema), its live entities (when counted)."""
    meta: dict[str, Any] = {
        "dagster/uri": root,
        TABLE_NAME: table_name(root, table),
    }
    if schema is not None:
        meta[COLUMN_SCHEMA] = column_schema(schema, id_columns, descriptions)
    if entities is not None:
        meta["dagster/row_count"] = entities
    return meta


def upstream_metadata(s: RunSlice) -> dict[str, Any]:
    """A consumer's positions per input: consumed from -> to, and the data version consumed."""
    return {
        "upstream_positions": dg.MetadataValue.json(
            [
                {
                    "asset": u.asset_key,
                    "dataset": u.root,
                    "table": u.table,
                    "from": u.since,
                    "to": u.head,
                    "data_version": u.data_version,
                }
                for u in s.upstream
            ]
        ),
        "upstream_data_versions": dg.MetadataValue.json(
            {u.asset_key: u.data_version for u in s.upstream}
        ),
    }


def slice_metadata(s: RunSlice) -> dict[str, Any]:
    """What every materialization shows about its slice, committed or not."""
    meta: dict[str, Any] = {
        "why": s.reason,
        "dataset_root": dg.MetadataValue.path(s.root),
        "table": s.table,
    }
    if s.partition:
        meta[PARTITIONS] = s.partition
    if s.upstream:  # a consumer's work is given by its positions, not by a window
        meta.update(upstream_metadata(s))
    else:
        meta["compute_window"] = (
            f"{s.compute_start.isoformat()} .. {s.compute_end.isoformat()}"
            if s.compute_start and s.compute_end
            else "full snapshot"
        )
    return meta


def revision_metadata(s: RunSlice, rev: Revision) -> dict[str, Any]:
    """The committed revision: name, kind, sequence, version, counts, data version."""
    return revision_entries(s.table, rev, partitioned=bool(s.partition))


def revision_entries(table: str, rev: Revision, *, partitioned: bool) -> dict[str, Any]:
    """A revision of ``table`` as materialization metadata (a run's, or one committed
    outside Dagster); ``partitioned``: with the live rows it wrote for its partitions."""
    t = rev.tables[table]
    meta: dict[str, Any] = {
        "revision": rev.name,
        "kind": "major" if rev.is_major else "minor",
        "sequence": rev.sequence,
        "version": t.version or "",
        "timestamp": rev.timestamp.isoformat(),
        "rows": t.rows,
        "tombstones": t.tombstones,
        "files": len(t.files),
        "bytes": t.bytes,
        "data_version": data_version(table, rev.sequence),
    }
    if t.field_versions:
        meta["field_versions"] = dg.MetadataValue.json(dict(t.field_versions))
    if t.rows_offered is not None:  # skip_unchanged: rows offered, ``rows`` changed
        meta["rows_offered"] = t.rows_offered
    if t.carries:  # a carrying major: ``rows`` are its changes, the rest of the state is kept
        meta["carried_revisions"] = len(t.carries)
    if partitioned:  # the live rows the revision wrote for its partitions
        meta[PARTITION_ROW_COUNT] = t.rows - t.tombstones
    return meta


def coverage_entries(
    s: RunSlice, rev: Revision, pdef: dg.TimeWindowPartitionsDefinition
) -> dict[str, Any]:
    """The partitions ``rev`` covers, when they are more than the run's (a major re-evaluates
    every partition up to its timestamp, whichever partition its run was launched for)."""
    covered = describe(revision_partitions(rev, pdef))
    return {} if covered == s.partition else {PARTITIONS: covered, RUN_PARTITIONS: s.partition}


def covered_materializations(
    context: dg.AssetExecutionContext,
    s: RunSlice,
    rev: Revision,
    pdef: dg.TimeWindowPartitionsDefinition,
    metadata: Mapping[str, Any],
) -> list[dg.AssetMaterialization]:
    """A materialization of each partition ``rev`` covers beyond the run's own, with the
    revision's ``metadata`` (but the run's partition row count), code version and data
    version, and the input provenance Dagster records on the run's own materialization:
    Dagster then judges them as it judges the partitions of a range run, which carry the
    same tags."""
    run = parse_partitions(s.partition)
    own = set(pdef.get_partition_keys_in_range(run)) if run is not None else set()
    covered = pdef.get_partition_keys_in_range(revision_partitions(rev, pdef))
    shown = {k: v for k, v in metadata.items() if k != PARTITION_ROW_COUNT}
    tags = {
        CODE_VERSION_TAG: rev.version_of(s.table) or "",
        DATA_VERSION_TAG: data_version(s.table, rev.sequence),
        DATA_VERSION_IS_USER_PROVIDED_TAG: "true",
        **input_provenance(context),
    }
    return [
        dg.AssetMaterialization(context.asset_key, partition=k, metadata=shown, tags=tags)
        for k in covered
        if k not in own
    ]


def input_provenance(context: dg.AssetExecutionContext) -> dict[str, str]:
    """The data version and event of each upstream asset as the run saw them, as tags: what
    Dagster records on the run's own materialization (its staleness reads them)."""
    step = context.get_step_execution_context()
    tags = {}
    for key in step.job_def.asset_layer.get(context.asset_key).parent_keys:
        seen = step.maybe_fetch_and_get_input_asset_version_info(key)
        version = (seen.data_version if seen else None) or DEFAULT_DATA_VERSION
        tags[get_input_data_version_tag(key)] = version.value
        event = seen.storage_id if seen else None
        tags[get_input_event_pointer_tag(key)] = str(event) if event else NULL_EVENT_POINTER
    return tags


def compaction_metadata(table: str, compaction: Revision | None) -> dict[str, Any]:
    """Whether the run compacted the table (``compact_after`` policy or a forced compaction),
    and what the compaction holds."""
    if compaction is None:
        return {"compacted": False}
    written = compaction.tables[table]
    return {
        "compacted": True,
        "compaction_revision": compaction.name,
        "compaction_sequence": compaction.sequence,
        "compaction_rows": written.rows,  # tombstones included: they keep deletions
        "compaction_tombstones": written.tombstones,
        "compaction_files": len(written.files),
    }
