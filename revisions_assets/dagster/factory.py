"""What every revisioned asset shares: run config, the dg.asset arguments, the resources."""

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from pydantic import Field
from pyspark.sql import SparkSession

from resources import RevisionsIOManager
from resources.address import META_COLUMN_DESCRIPTIONS, Role, TableAddress
from resources.keys import LOCATION_KEY, SPARK_KEY
from resources.metadata import table_name

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


@dataclass(frozen=True)
class DagsterPolicies:
    """What a factory passes to ``dg.asset`` as it is: how Dagster automates, judges
    freshness, retries and pools the asset's runs (None: Dagster's default)."""

    automation_condition: dg.AutomationCondition | None = None
    freshness_policy: dg.FreshnessPolicy | None = None
    retry_policy: dg.RetryPolicy | None = None
    pool: str | None = None
    #: the table's columns, declared: the catalog shows them before the first run
    column_schema: dg.TableSchema | None = None


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
    dagster_policies: DagsterPolicies | None = None,
) -> dict[str, Any]:
    """Arguments of dg.asset common to featurized, scoring and reference assets."""
    dagster_policies = dagster_policies or DagsterPolicies()
    described = (
        {META_COLUMN_DESCRIPTIONS: dg.MetadataValue.json(dict(column_descriptions))}
        if column_descriptions
        else {}
    )
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
        "metadata": {
            **address.to_metadata(role),
            # the catalog's table name before the first run (a run's materialization says it
            # again, as does its column schema from the written table)
            "dagster/table_name": table_name(address.dataset, address.table),
            **(
                {"dagster/column_schema": dagster_policies.column_schema}
                if dagster_policies.column_schema is not None
                else {}
            ),
            **described,
            **(metadata or {}),
        },
        "io_manager_key": io_manager_key,
        "required_resource_keys": {LOCATION_KEY, SPARK_KEY},
        # a range (backfill or major) is one run, hence one revision, not one per partition
        "backfill_policy": dg.BackfillPolicy.single_run() if partitions_def else None,
        "automation_condition": dagster_policies.automation_condition,
        "freshness_policy": dagster_policies.freshness_policy,
        "retry_policy": dagster_policies.retry_policy,
        "pool": dagster_policies.pool,
    }


def asset_decorator(**kwargs: Any) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """dg.asset without the beta warning of backfill_policy (single-run backfills are the point)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.asset(**kwargs)


def io_manager(context: dg.AssetExecutionContext, io_manager_key: str) -> RevisionsIOManager:
    """The run's revision IO manager: asset bodies get their slice from it."""
    return getattr(context.resources, io_manager_key)


def spark_session(context: dg.AssetExecutionContext) -> SparkSession:
    return getattr(context.resources, SPARK_KEY).spark_session
