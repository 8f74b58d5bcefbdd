"""What every revisioned asset shares: run config, the options passed to ``dg.asset``, the
resources."""

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import dagster as dg
from pydantic import Field
from pyspark.sql import SparkSession

from revisions_assets.core.errors import ArgumentTypeError, InvalidArgumentError

from .resources import RevisionsIOManager
from .resources.address import META_COLUMN_DESCRIPTIONS, Role, TableAddress
from .resources.keys import IO_MANAGER_KEY, SPARK_KEY
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


@dataclass(frozen=True)
class AssetOptions:
    """The options of a revisioned asset that are not about its revisions: what the
    factories pass on to ``dg.asset`` (its key, catalog entries, automation, freshness,
    retries, concurrency) and which IO manager it runs with.

    Give them to ``featurized_asset``, ``reference_asset`` and ``scoring_asset`` as one value
    (``options=AssetOptions(...)``, shared by several assets, as delta-rs takes
    ``WriterProperties``), or as keyword arguments of the same names, the short form; an
    option given both ways is refused.
    """

    key_prefix: str | Sequence[str] | None = None
    description: str | None = None  # default: the function's docstring
    group_name: str | None = None
    #: assets it reads besides its revisioned inputs (its sources); not for scoring assets
    deps: Iterable[Any] = ()
    tags: Mapping[str, str] | None = None
    owners: Sequence[str] | None = None
    metadata: Mapping[str, Any] | None = None
    #: {column: description}, shown in the Columns tab of every materialization
    column_descriptions: Mapping[str, str] | None = None
    #: the IO manager's key: it brings the asset's location and Spark session, and its checks'
    io_manager_key: str = IO_MANAGER_KEY
    #: {column: Spark type} (``bigint``, ``string``…): the catalog's columns before the first
    #: run; every materialization must return exactly these (DeclaredColumnsError)
    columns: Mapping[str, str] | None = None
    #: e.g. ``revisions_automation()`` (see revisions_assets.dagster.automation)
    automation_condition: dg.AutomationCondition | None = None
    freshness_policy: dg.FreshnessPolicy | None = None
    retry_policy: dg.RetryPolicy | None = None
    pool: str | None = None

    @classmethod
    def merged(
        cls, options: "AssetOptions | None", short_form: Mapping[str, Any], factory: str
    ) -> "AssetOptions":
        """``options`` with the keyword arguments of the short form applied; an unknown name,
        or an option given both ways, is refused."""
        if options is not None and not isinstance(options, AssetOptions):
            raise ArgumentTypeError(
                f"{factory}: options must be an AssetOptions, got {type(options).__name__}"
            )
        defaults = {f.name: f.default for f in fields(cls)}
        unknown = sorted(set(short_form) - set(defaults))
        if unknown:
            raise ArgumentTypeError(
                f"{factory}() got unexpected keyword arguments {unknown}; the options it "
                f"takes besides its own are those of AssetOptions: {sorted(defaults)}"
            )
        base = options or cls()
        twice = sorted(k for k in short_form if getattr(base, k) != defaults[k])
        if twice:
            raise InvalidArgumentError(
                f"{factory}: {twice} given both in options=AssetOptions(...) and as keyword "
                "arguments: give each option once"
            )
        return replace(base, **short_form)


def asset_kwargs(
    *,
    name: str,
    address: TableAddress,
    role: Role,
    code_version: str,
    partitions_def: dg.PartitionsDefinition | None,
    default_description: str | None,
    metadata: Mapping[str, Any],
    options: AssetOptions,
) -> dict[str, Any]:
    """Arguments of dg.asset common to featurized, scoring and reference assets."""
    descriptions = dict(options.column_descriptions or {})
    described = (
        {META_COLUMN_DESCRIPTIONS: dg.MetadataValue.json(descriptions)} if descriptions else {}
    )
    # the catalog knows the table (and the columns, when declared) before the first run
    catalog: dict[str, Any] = {TABLE_NAME: table_name(address.dataset, address.table)}
    if options.columns:
        catalog[COLUMN_SCHEMA] = declared_schema(options.columns, address.id_columns, descriptions)
    return {
        "name": name,
        "key_prefix": options.key_prefix,
        "partitions_def": partitions_def,
        "code_version": code_version,
        "description": options.description or default_description,
        "group_name": options.group_name,
        "kinds": set(KINDS),
        "deps": list(options.deps),
        "tags": dict(options.tags or {}),
        "owners": list(options.owners or []),
        "metadata": {
            **address.to_metadata(role),
            **described,
            **catalog,
            **metadata,
            **(options.metadata or {}),
        },
        # the IO manager brings the location and the Spark session: no other key is needed
        "io_manager_key": options.io_manager_key,
        # a range (backfill or major) is one run, hence one revision, not one per partition
        "backfill_policy": dg.BackfillPolicy.single_run() if partitions_def else None,
        "automation_condition": options.automation_condition,
        "freshness_policy": options.freshness_policy,
        "retry_policy": options.retry_policy,
        "pool": options.pool,
    }


def asset_decorator(**kwargs: Any) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """dg.asset without the beta warning of backfill_policy (single-run backfills are the point)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.asset(**kwargs)


def declared_columns(asset: dg.AssetsDefinition) -> list[str]:
    """The columns an asset declares (``columns=``), empty when it does not."""
    schema = asset.metadata_by_key[asset.key].get(COLUMN_SCHEMA)
    return [c.name for c in table_schema(schema).columns] if schema is not None else []


def io_manager_key_of(asset: dg.AssetsDefinition) -> str:
    """The key of the IO manager a revisioned asset runs with (``AssetOptions.io_manager_key``)."""
    return asset.get_io_manager_key_for_asset_key(asset.key)


def io_manager(context: Any, io_manager_key: str) -> RevisionsIOManager:
    """The run's revision IO manager: asset bodies get their slice, and assets and checks
    their location and Spark session, from it."""
    return getattr(context.resources, io_manager_key)


def spark_session(context: dg.AssetExecutionContext) -> SparkSession:
    """The Spark session of an asset that requires ``revisions_spark`` itself."""
    return getattr(context.resources, SPARK_KEY).spark_session
