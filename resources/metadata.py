"""The metadata a materialization shows in the UI: the revision, and Dagster's own conventions.

Dagster's standard keys (``dagster/column_schema``, ``dagster/uri``,
``dagster/table_name``, ``dagster/row_count``, ``dagster/partition_row_count``)
are what the UI's Columns tab, row count plots and catalog read; the data version of a
materialization is ``<table>@<sequence>`` of the revision it committed (or of the
table's head when nothing was committed), so it changes exactly when the data does.
"""

from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

import dagster as dg
from pyspark.sql.types import StructType

from revisions_assets.core.log.records import Revision

from .slice import DatasetSlice


def data_version(table: str, sequence: int) -> str:
    """The data version of a table whose newest revision is ``sequence``."""
    return f"{table}@{sequence}"


def column_schema(
    schema: StructType, id_columns: tuple[str, ...], descriptions: Mapping[str, str]
) -> dg.TableSchema:
    """A TableSchema from a Spark schema: id columns marked, descriptions from the asset (or
    from a Spark column comment)."""
    columns = []
    for field in schema.fields:
        is_id = field.name in id_columns
        description = descriptions.get(field.name) or field.metadata.get("comment")
        columns.append(
            dg.TableColumn(
                name=field.name,
                type=field.dataType.simpleString(),
                description=description,
                constraints=dg.TableColumnConstraints(
                    nullable=field.nullable and not is_id,
                    unique=is_id and len(id_columns) == 1,
                    other=["id column"] if is_id else None,
                ),
            )
        )
    return dg.TableSchema(columns=columns)


def table_name(dataset: str, table: str) -> str:
    """Dagster's ``dagster/table_name`` of a table: ``<dataset folder>.<table>``."""
    return f"{PurePosixPath(dataset).name}.{table}"


def table_metadata(
    s: DatasetSlice,
    schema: StructType | None,
    entities: int | None,
    descriptions: Mapping[str, str],
) -> dict[str, Any]:
    """Dagster's table and URI metadata of the slice's table."""
    meta: dict[str, Any] = {
        "dagster/uri": s.root,
        "dagster/table_name": table_name(s.root, s.table),
    }
    if schema is not None:
        meta["dagster/column_schema"] = column_schema(schema, s.id_columns, descriptions)
    if entities is not None:
        meta["dagster/row_count"] = entities
    return meta


def column_lineage(
    s: DatasetSlice, schema: StructType, upstream_columns: Mapping[str, list[str]]
) -> dg.TableColumnLineage | None:
    """Where a scoring table's columns come from (``dagster/column_lineage``): a column of the
    main input's name from it, else one a reference holds from that reference, every other
    column (a computed one) from the main input's ``uses_columns`` (all its value columns
    when not declared). ``upstream_columns``: {upstream asset key: its table's columns}."""
    main = next((u.ref for u in s.upstream if u.ref.kind == "main"), None)
    if main is None or main.asset_key not in upstream_columns:
        return None
    main_key = dg.AssetKey.from_user_string(main.asset_key)
    main_values = [c for c in upstream_columns[main.asset_key] if c not in main.id_columns]
    used = list(s.uses_columns) if s.uses_columns is not None else main_values
    references = [u.ref for u in s.upstream if u.ref.kind == "reference"]
    deps: dict[str, list[dg.TableColumnDep]] = {}
    for column in schema.fieldNames():
        if column in upstream_columns[main.asset_key]:
            sources = [(main_key, column)]
        else:
            held = [
                (dg.AssetKey.from_user_string(r.asset_key), column)
                for r in references
                if column in upstream_columns.get(r.asset_key, ())
            ]
            sources = held or [(main_key, c) for c in used]
        deps[column] = [dg.TableColumnDep(asset_key=k, column_name=c) for k, c in sources]
    return dg.TableColumnLineage(deps_by_column=deps)


def upstream_metadata(s: DatasetSlice) -> dict[str, Any]:
    """A consumer's positions per input: consumed from -> to, and the data version consumed."""
    return {
        "upstream_positions": dg.MetadataValue.json(
            [
                {
                    "asset": u.ref.asset_key,
                    "dataset": u.root,
                    "table": u.ref.table,
                    "from": u.since,
                    "to": u.head,
                    "data_version": u.data_version,
                }
                for u in s.upstream
            ]
        ),
        "upstream_data_versions": dg.MetadataValue.json(
            {u.ref.asset_key: u.data_version for u in s.upstream}
        ),
    }


def slice_metadata(s: DatasetSlice) -> dict[str, Any]:
    """What every materialization shows about its slice, committed or not."""
    meta: dict[str, Any] = {
        "why": s.reason,
        "dataset_root": dg.MetadataValue.path(s.root),
        "table": s.table,
    }
    if s.partitions is not None:
        meta["partitions"] = s.partition
    if s.upstream:  # a consumer's work is given by its positions, not by a window
        meta.update(upstream_metadata(s))
    else:
        meta["compute_window"] = (
            f"{s.compute_start.isoformat()} .. {s.compute_end.isoformat()}"
            if s.compute_start and s.compute_end
            else "full snapshot"
        )
    return meta


def revision_metadata(s: DatasetSlice, rev: Revision) -> dict[str, Any]:
    """The committed revision: name, kind, sequence, version, counts, data version."""
    t = rev.tables[s.table]
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
        "data_version": data_version(s.table, rev.sequence),
    }
    if t.field_versions:
        meta["field_versions"] = dg.MetadataValue.json(dict(t.field_versions))
    if t.rows_offered is not None:  # skip_unchanged: rows offered, ``rows`` changed
        meta["rows_offered"] = t.rows_offered
    if t.carries:  # a carrying major: ``rows`` are its changes, the rest of the state is kept
        meta["carried_revisions"] = len(t.carries)
    if s.partitions is not None:  # the live rows this run wrote for its partitions
        meta["dagster/partition_row_count"] = t.rows - t.tombstones
    return meta


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
