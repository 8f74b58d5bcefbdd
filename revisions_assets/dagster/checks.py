"""Asset checks of revisioned assets (SPEC §7).

- ``schema``: a pandera (pandera.pyspark) schema on the table's current state;
- ``ids_unique_non_null``: in the data files of every revision a default read sees;
- ``log_integrity``: every data file the log references exists;
- ``code_version``: the head revision was written by the asset's current code (WARN if stale);
- ``consumer_lag`` (scoring assets): revisions/time behind each upstream within a bound.
"""

from collections.abc import Sequence
from functools import reduce
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from resources.keys import LOCATION_KEY, SPARK_KEY
from resources.slice import address_of, read_log, table_history, upstream_refs
from resources.values import open_dataset
from revisions_assets.core.backends import open_storage
from revisions_assets.core.merge import parse_schema
from revisions_assets.core.records import Revision

from .lag import consumer_lags

_RESOURCES = {LOCATION_KEY, SPARK_KEY}


def visible_revisions(history: Sequence[Revision]) -> list[Revision]:
    """The revisions a default (latest) read of one table merges: the latest major and after."""
    majors = [r for r in history if r.is_major]
    if not majors:
        return []
    first = max(majors, key=lambda r: r.key)
    return sorted((r for r in history if r.key >= first.key), key=lambda r: r.key)


def _files_frame(
    spark: Any, root: str, table: str, revisions: Sequence[Revision], columns: Sequence[str]
) -> DataFrame:
    """The given columns of the data files of ``revisions``, tagged with the revision name."""
    storage = open_storage(root)
    frames = []
    for rev in revisions:
        written = rev.tables[table]
        schema = StructType(
            [f for f in parse_schema(written.schema_json).fields if f.name in columns]
        )  # given: no footer-reading job per read
        files = [storage.spark_uri(f) for f in written.files]
        if files:
            frames.append(
                spark.read.schema(schema).parquet(*files).withColumn("_revision", F.lit(rev.name))
            )
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def revision_checks(
    asset: dg.AssetsDefinition,
    *,
    schema: Any | None = None,
    max_lag_revisions: int = 1,
    max_lag_seconds: float | None = None,
) -> list[dg.AssetChecksDefinition]:
    """The checks of one revisioned asset. ``schema``: a pandera.pyspark DataFrameModel/Schema."""
    address = address_of(asset)
    key = asset.key
    code_version = asset.code_versions_by_key.get(key)
    refs = upstream_refs(asset.metadata_by_key[key])

    def root(context: dg.AssetCheckExecutionContext) -> str:
        return getattr(context.resources, LOCATION_KEY).root_for(address.dataset)

    def spark(context: dg.AssetCheckExecutionContext) -> Any:
        return getattr(context.resources, SPARK_KEY).spark_session

    checks = []

    @dg.asset_check(
        asset=key,
        name="ids_unique_non_null",
        required_resource_keys=_RESOURCES,
        description=f"Ids {list(address.id_columns)} are non-null and unique within "
        "each revision a default read merges.",
    )
    def ids_unique_non_null(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        history = visible_revisions(table_history(read_log(root(context)), address.table))
        if not history:
            return dg.AssetCheckResult(passed=False, metadata={"error": "no major revision yet"})
        ids = list(address.id_columns)
        rows = _files_frame(spark(context), root(context), address.table, history, ids)
        null_filter = reduce(lambda a, b: a | b, [F.col(c).isNull() for c in ids])
        nulls = rows.filter(null_filter).count()
        duplicates = rows.groupBy("_revision", *ids).count().filter(F.col("count") > 1).count()
        return dg.AssetCheckResult(
            passed=nulls == 0 and duplicates == 0,
            metadata={
                "null_ids": nulls,
                "duplicate_ids": duplicates,
                "revisions_checked": len(history),
            },
        )

    checks.append(ids_unique_non_null)

    @dg.asset_check(
        asset=key,
        name="log_integrity",
        required_resource_keys=_RESOURCES,
        description="Every data file referenced by the dataset's log exists.",
    )
    def log_integrity(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        storage = open_storage(root(context))
        records = read_log(root(context))
        referenced = {f for r in records for t in r.tables.values() for f in t.files}
        present = {info.path for info in storage.list_files("")}
        missing = sorted(referenced - present)
        return dg.AssetCheckResult(
            passed=not missing,
            metadata={
                "revisions": len(records),
                "files_referenced": len(referenced),
                "files_missing": len(missing),
                "missing_sample": dg.MetadataValue.json(missing[:10]),
            },
        )

    checks.append(log_integrity)

    @dg.asset_check(
        asset=key,
        name="code_version",
        required_resource_keys=_RESOURCES,
        description="The table's head revision was written by the asset's current "
        "code version (WARN when stale: a major is due).",
    )
    def code_version_check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        history = table_history(read_log(root(context)), address.table)
        head = history[-1].version_of(address.table) if history else None
        return dg.AssetCheckResult(
            passed=bool(history) and head == code_version,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "asset_code_version": code_version or "",
                "head_version": head or "",
                "head_sequence": history[-1].sequence if history else 0,
            },
        )

    checks.append(code_version_check)

    if schema is not None:

        @dg.asset_check(
            asset=key,
            name="schema",
            required_resource_keys=_RESOURCES,
            description=f"The table's state validates against {schema!r} (pandera).",
        )
        def schema_check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
            ds = open_dataset(spark(context), root(context), address.table, address.id_columns)
            validated = schema.validate(ds.read(address.table))
            errors = dict(validated.pandera.errors)
            return dg.AssetCheckResult(
                passed=not errors, metadata={"errors": dg.MetadataValue.json(errors)}
            )

        checks.append(schema_check)

    if refs:

        @dg.asset_check(
            asset=key,
            name="consumer_lag",
            required_resource_keys=_RESOURCES,
            description=f"Behind each upstream by at most {max_lag_revisions} "
            "revision(s)"
            + (f" and {max_lag_seconds} s" if max_lag_seconds is not None else "")
            + ".",
        )
        def consumer_lag(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
            location = getattr(context.resources, LOCATION_KEY)
            lags = consumer_lags(root(context), address.table, refs, location.root_for)
            ok = all(
                lag.revisions_behind <= max_lag_revisions
                and (max_lag_seconds is None or lag.seconds_behind <= max_lag_seconds)
                for lag in lags
            )
            return dg.AssetCheckResult(
                passed=ok,
                metadata={
                    f"{lag.upstream.asset_key}": dg.MetadataValue.json(
                        {
                            "position": lag.position,
                            "head": lag.head,
                            "revisions_behind": lag.revisions_behind,
                            "seconds_behind": round(lag.seconds_behind, 1),
                        }
                    )
                    for lag in lags
                }
                | {"max_revisions_behind": max((lag.revisions_behind for lag in lags), default=0)},
            )

        checks.append(consumer_lag)

    return checks
