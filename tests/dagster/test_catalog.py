"""What the catalog knows before the first run (no materialization here): declared columns,
table names, a scoring asset's column lineage; which checks block; what the factories pass
through to Dagster."""

from __future__ import annotations

import dagster as dg
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from revisions_assets.dagster import (
    Reference,
    featurized_asset,
    reference_asset,
    revision_checks,
    revisions_automation,
    scoring_asset,
)
from revisions_assets.dagster.resources.metadata import (
    DeclaredColumnsError,
    check_declared_columns,
    table_schema,
)

pytestmark = pytest.mark.dagster

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01")


def _assets():
    features = featurized_asset(
        name="features",
        id_columns=["entity"],
        partitions_def=DAILY,
        code_version="1",
        source=lambda spark, start, end: None,
        dataset="main",
        table="features",
        columns={"entity": "string", "grp": "string", "total": "bigint", "events": "bigint"},
        automation_condition=revisions_automation(),
        retry_policy=dg.RetryPolicy(max_retries=2),
        pool="spark",
    )(lambda rows, window: rows)
    groups = reference_asset(
        name="groups",
        id_columns=["grp"],
        code_version="1",
        dataset="ref",
        table="groups",
        columns={"grp": "string", "weight": "double"},
    )(lambda spark: None)
    scores = scoring_asset(
        name="scores",
        upstream=features,
        references={"groups": Reference(groups, on={"grp": "grp"})},
        partitions_def=DAILY,
        code_version="1",
        dataset="out",
        table="scores",
        uses_columns=["grp", "total"],
        columns={"entity": "string", "score": "double", "weight": "double"},
    )(lambda features, groups: features)
    return features, groups, scores


def test_declared_columns_table_names_and_lineage_at_definition_time():
    features, groups, scores = _assets()
    meta = features.metadata_by_key[features.key]
    assert meta["dagster/table_name"] == "main.features"
    columns = {c.name: c for c in table_schema(meta["dagster/column_schema"]).columns}
    assert list(columns) == ["entity", "grp", "total", "events"]
    assert columns["entity"].constraints.unique and not columns["entity"].constraints.nullable
    assert groups.metadata_by_key[groups.key]["dagster/table_name"] == "ref.groups"

    lineage = scores.metadata_by_key[scores.key]["dagster/column_lineage"]
    lineage = getattr(lineage, "column_lineage", lineage).deps_by_column
    deps = {
        c: {(d.asset_key.to_user_string(), d.column_name) for d in ds} for c, ds in lineage.items()
    }
    assert deps["entity"] == {("features", "entity")}
    # a computed column may derive from the used columns and the join columns
    assert deps["score"] == {("features", "grp"), ("features", "total"), ("groups", "grp")}
    assert deps["weight"] == {("groups", "weight")}  # a reference's column, from it


def test_the_factories_pass_dagster_options_through():
    features, _, _ = _assets()
    condition = features.automation_conditions_by_key[features.key]
    assert condition.get_snapshot().node_snapshot.label == "revisions_automation"
    assert features.op.retry_policy == dg.RetryPolicy(max_retries=2)
    assert features.op.pool == "spark"
    assert features.backfill_policy == dg.BackfillPolicy.single_run()


def test_a_run_returning_other_columns_is_refused():
    features, _, _ = _assets()
    declared = table_schema(features.metadata_by_key[features.key]["dagster/column_schema"])
    ok = StructType(
        [
            StructField("entity", StringType()),
            StructField("grp", StringType()),
            StructField("total", LongType()),
            StructField("events", LongType()),
            StructField("_deleted", StringType()),  # the tombstone flag is not a column
        ]
    )
    check_declared_columns("features", declared, ok)
    wrong = StructType([*ok.fields[:2], StructField("total", StringType()), ok.fields[3]])
    with pytest.raises(DeclaredColumnsError, match="total bigint -> string"):
        check_declared_columns("features", declared, wrong)


def test_id_and_schema_checks_of_a_runs_revision_block():
    features, groups, _ = _assets()
    specs = {
        (s.asset_key.path[-1], s.name): s
        for c in [*revision_checks(features), *revision_checks(groups)]
        for s in c.check_specs
    }
    assert specs[("features", "partition_ids_unique_non_null")].blocking
    assert not specs[("features", "ids_unique_non_null")].blocking  # runs on its own
    assert specs[("groups", "ids_unique_non_null")].blocking  # unpartitioned: with its runs
    assert not specs[("groups", "log_integrity")].blocking
