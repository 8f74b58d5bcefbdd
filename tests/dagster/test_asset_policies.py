"""The factories pass Dagster's automation, freshness, retry and pool settings to the asset
as they are (the run-time behaviour of each is Dagster's own)."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

from resources import revisions_resources
from revisions_assets.dagster import featurized_asset, reference_asset, scoring_asset

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01")
POLICIES = {
    "automation_condition": dg.AutomationCondition.on_cron("0 6 * * *"),
    "freshness_policy": dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=30)),
    "retry_policy": dg.RetryPolicy(max_retries=2, delay=5),
    "pool": "spark",
}


def source(spark, start, end):  # never called: the assets are only defined
    raise AssertionError("not materialized here")


COLUMNS = dg.TableSchema(
    columns=[dg.TableColumn("id", "bigint"), dg.TableColumn("trips_28d", "bigint")]
)


@featurized_asset(
    id_columns=["id"],
    partitions_def=DAILY,
    code_version="1",
    source=source,
    dataset="drivers",
    column_schema=COLUMNS,
    **POLICIES,
)
def features(rows, window):
    return rows


@reference_asset(id_columns=["id"], code_version="1", **POLICIES)
def labels(spark):
    return spark.range(1)


@scoring_asset(upstream=features, partitions_def=DAILY, code_version="1", **POLICIES)
def scores(features):
    return features


def test_every_factory_passes_the_policies_through():
    for asset in (features, labels, scores):
        spec = asset.get_asset_spec(asset.key)
        assert spec.automation_condition == POLICIES["automation_condition"]
        assert spec.freshness_policy == POLICIES["freshness_policy"]
        assert asset.op.retry_policy == POLICIES["retry_policy"]
        assert asset.op.pool == "spark"
    catalog = features.metadata_by_key[features.key]
    assert catalog["dagster/column_schema"] == COLUMNS  # before the first run
    assert catalog["dagster/table_name"] == "drivers.features"
    assert scores.metadata_by_key[scores.key]["dagster/table_name"] == "scores.scores"
    resources = revisions_resources("/tmp/never-written")  # nothing runs: no root is touched
    dg.Definitions.validate_loadable(
        dg.Definitions(assets=[features, labels, scores], resources=resources)
    )


def test_the_checks_of_what_a_run_writes_are_blocking():
    """The id and schema checks of the revision a run writes block (ERROR on failure);
    the other checks, and the whole-table ones of a partitioned asset, do not."""
    from revisions_assets.definitions import defs

    blocking = {
        (spec.asset_key.to_user_string(), spec.name): spec.blocking
        for checks in defs.asset_checks or ()
        for spec in checks.check_specs
    }
    assert blocking[("plane_delay_features", "partition_ids_unique_non_null")] is True
    assert blocking[("plane_delay_risk", "partition_schema")] is True
    assert blocking[("plane_delay_features", "ids_unique_non_null")] is False  # partitioned
    assert blocking[("planes", "ids_unique_non_null")] is True  # a reference: unpartitioned
    assert blocking[("plane_delay_features", "code_version")] is False  # a warning
