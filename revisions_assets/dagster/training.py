"""Training-set assets: labels joined point-in-time to featurized tables
(docs/guides/training-sets.md).

Each label row is an event; it gets the row of every featurized table as of its event
time, as known at ``known_at`` (default ``"event"``: only what was committed by the
event's own time, so corrected backfills never leak into the training set). The set is
written as Parquet under the location (``<base_uri>/<dataset>``), replaced by each run:
it is a derived snapshot, not a revisioned dataset.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame

from revisions_assets.core.columns import REVISION
from revisions_assets.core.read.plan.spans import EVENT, KnownAt, check_known_at
from revisions_assets.core.storage.backends import open_storage

from .factory import KINDS, spark_session
from .resources.address import address_of
from .resources.keys import LOCATION_KEY, SPARK_KEY


def training_set_asset(
    *,
    name: str,
    labels: dg.AssetsDefinition,
    features: Sequence[dg.AssetsDefinition],
    event_time: str,
    on: Sequence[str] | Mapping[str, str],
    known_at: KnownAt = EVENT,
    dataset: str | None = None,
    key_prefix: str | Sequence[str] | None = None,
    description: str | None = None,
    group_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    owners: Sequence[str] | None = None,
) -> dg.AssetsDefinition:
    """Declare a training-set asset from a revisioned ``labels`` asset (featurized or
    reference: its current state, one row per event) and ``features`` (revisioned assets).

    ``on``: the label columns matching each feature table's id columns (names, or
    ``{label column: id column}``). The table columns are added side by side (a column
    name two of them share is refused: ``DuplicateColumnError``); each table's
    ``_revision`` becomes ``_revision_<table>``.
    """
    check_known_at(known_at)
    label_address = address_of(labels)
    addresses = [address_of(f) for f in features]
    target = dataset or name

    @dg.asset(
        name=name,
        key_prefix=key_prefix,
        deps=[labels, *features],
        description=description or training_set_asset.__doc__.split("\n\n")[0],
        group_name=group_name,
        kinds=set(KINDS),
        tags=dict(tags or {}),
        owners=list(owners or []),
        metadata={"known_at": str(known_at), "event_time": event_time},
        required_resource_keys={LOCATION_KEY, SPARK_KEY},
    )
    def training_set(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        location = getattr(context.resources, LOCATION_KEY)
        spark = spark_session(context)
        rows: DataFrame = location.read_state(spark, label_address.dataset, label_address.table)
        heads: dict[str, Any] = {}
        for address in addresses:
            handle = location.dataset(address.dataset, spark)
            heads[f"head_{address.dataset}_{address.table}"] = handle.head_sequence
            rows = handle.as_of_join(
                rows, address.table, event_time=event_time, on=on, known_at=known_at
            ).withColumnRenamed(REVISION, f"{REVISION}_{address.table}")
        storage = open_storage(location.root_for(target))
        rows.write.mode("overwrite").parquet(storage.spark_uri())
        return dg.MaterializeResult(
            metadata={"path": dg.MetadataValue.path(storage.uri), "columns": rows.columns, **heads}
        )

    return training_set
