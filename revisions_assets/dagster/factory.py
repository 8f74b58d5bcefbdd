"""What every revisioned asset shares: run config, the dg.asset arguments, the resources."""

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from pydantic import Field
from pyspark.sql import SparkSession

from .resources import RevisionsIOManager
from .resources.address import META_COLUMN_DESCRIPTIONS, Role, TableAddress
from .resources.keys import LOCATION_KEY, SPARK_KEY
from .resources.metadata import (
    COLUMN_SCHEMA,
    TABLE_NAME,
    declared_schema,
    table_name,
    table_schema,
)

KINDS = frozenset({"spark", "parquet"})


class RevisionRunConfig(dg.Config):
    """Run configuration of every revisioned asset."""

    force_major: bool = Field(
        default=False,
        description="Write a major revision (re-evaluate every entity) whatever the code version.",
    )
    force_compaction: bool = Field(
        default=False,
        description="After the commit, compact the table (its state in a few files, used by "
        "later reads) whatever the compact_after policy says.",
    )


def asset_kwargs(
    *,
    name: str,
    address: TableAddress,
    role: Role,
    code_version: str,
    partitions_def: dg.PartitionsDefinition | None,
    description: str | None,
    group_name: str | None,
    key_prefix: str | Sequence[str] | None,
    deps: Iterable[Any],
    tags: Mapping[str, str] | None,
    owners: Sequence[str] | None,
    metadata: Mapping[str, Any] | None,
    column_descriptions: Mapping[str, str] | None,
    io_manager_key: str,
    options: "AssetOptions",
) -> dict[str, Any]:
    """Arguments of dg.asset common to featurized, scoring and reference assets."""
    descriptions = dict(column_descriptions or {})
    described = (
        {META_COLUMN_DESCRIPTIONS: dg.MetadataValue.json(descriptions)} if descriptions else {}
    )
    # the catalog knows the table (and the columns, when declared) before the first run
    catalog: dict[str, Any] = {TABLE_NAME: table_name(address.dataset, address.table)}
    if options.columns:
        catalog[COLUMN_SCHEMA] = declared_schema(options.columns, address.id_columns, descriptions)
    return {
        "name": name,
        "key_prefix": key_prefix,
        "partitions_def": partitions_def,
        "code_version": code_version,
        "description": description,
        "group_name": group_name,
        "kinds": set(KINDS),
        "deps": list(deps),
        "tags": dict(tags or {}),
        "owners": list(owners or []),
        "metadata": {**address.to_metadata(role), **described, **catalog, **(metadata or {})},
        "io_manager_key": io_manager_key,
        "required_resource_keys": {LOCATION_KEY, SPARK_KEY},
        # a range (backfill or major) is one run, hence one revision, not one per partition
        "backfill_policy": dg.BackfillPolicy.single_run() if partitions_def else None,
        "automation_condition": options.automation_condition,
        "freshness_policy": options.freshness_policy,
        "retry_policy": options.retry_policy,
        "pool": options.pool,
    }


@dataclass(frozen=True)
class AssetOptions:
    """What every factory passes through to ``dg.asset`` beside the revisions layer's own
    arguments: declared columns, automation, freshness, retries, the concurrency pool."""

    #: {column: Spark type} (``bigint``, ``string``…): the catalog's columns before the first
    #: run; every materialization must return exactly these (DeclaredColumnsError)
    columns: Mapping[str, str] | None = None
    #: e.g. ``revisions_log_condition()`` (see revisions_assets.dagster.automation)
    automation_condition: dg.AutomationCondition | None = None
    freshness_policy: dg.FreshnessPolicy | None = None
    retry_policy: dg.RetryPolicy | None = None
    pool: str | None = None


def asset_decorator(**kwargs: Any) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """dg.asset without the beta warning of backfill_policy (single-run backfills are the point)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.asset(**kwargs)


def declared_columns(asset: dg.AssetsDefinition) -> list[str]:
    """The columns an asset declares (``columns=``), empty when it does not."""
    schema = asset.metadata_by_key[asset.key].get(COLUMN_SCHEMA)
    return [c.name for c in table_schema(schema).columns] if schema is not None else []


def io_manager(context: dg.AssetExecutionContext, io_manager_key: str) -> RevisionsIOManager:
    """The run's revision IO manager: asset bodies get their slice from it."""
    return getattr(context.resources, io_manager_key)


def spark_session(context: dg.AssetExecutionContext) -> SparkSession:
    return getattr(context.resources, SPARK_KEY).spark_session
