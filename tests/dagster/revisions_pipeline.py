"""A small revisioned pipeline for the Dagster tests, built with the public factories.

Events (day, entity, grp, value, deleted) are a pandas frame the tests edit; the
featurizer sums values per entity over its compute window (an event flagged
``deleted`` turns the entity into a tombstone); the ``groups`` reference maps a
group to a weight; the score is total * weight.
"""

from __future__ import annotations

import datetime as dt
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pandera.pyspark as pa
from pipeline_functions import EVENT_SCHEMA, events_to_json, featurize, score, window_events
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from revisions_assets import RevisionedDataset
from revisions_assets.dagster import (
    Reference,
    SparkSessionResource,
    featurized_asset,
    reference_asset,
    revision_checks,
    revisions_log_condition,
    revisions_resources,
    runs_with,
    scoring_asset,
)
from revisions_assets.dagster.resources.slice import RANGE_END_TAG, RANGE_START_TAG

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")
P1, P2, P3, P4 = "2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"


def range_tags(first: str, last: str) -> dict[str, str]:
    """The run tags of a single-run backfill of [first, last]."""
    return {RANGE_START_TAG: first, RANGE_END_TAG: last}


def is_partitioned(check: dg.AssetChecksDefinition) -> bool:
    return any(spec.partitions_def is not None for spec in check.check_specs)


GROUP_SCHEMA = T.StructType(
    [
        T.StructField("grp", T.StringType(), False),
        T.StructField("weight", T.DoubleType(), False),
    ]
)


class FeaturesSchema(pa.DataFrameModel):
    """What the features table must look like (checked by the schema asset check)."""

    entity: T.StringType() = pa.Field(nullable=False)
    total: T.LongType() = pa.Field(ge=0)


def _events() -> pd.DataFrame:
    rows = [
        (P1, "a", "g1", 1, False),
        (P1, "b", "g1", 2, False),
        (P1, "c", "g2", 3, False),
        (P2, "a", "g1", 10, False),
        (P2, "d", "g2", 4, False),
        (P3, "e", "g2", 5, False),
        (P3, "b", "g1", 0, True),
        (P4, "a", "g1", 100, False),
    ]
    df = pd.DataFrame(rows, columns=[f.name for f in EVENT_SCHEMA.fields])
    df["day"] = pd.to_datetime(df["day"]).dt.date
    return df


@dataclass(frozen=True)
class Versions:
    features: str = "1"
    scores: str = "1"
    groups: str = "1"


#: the remote job of the Pipes variant (a script, run in its own process)
PIPES_JOB = str(Path(__file__).with_name("pipes_job.py"))


class Pipeline:
    """Assets, resources and a real Dagster instance around one temporary base directory.

    ``remote``: a Pipes client; the featurized and scoring assets then run their Spark in the
    remote job ``pipes_job.py`` (``pipes=True``), handed the events and ``remote_extras``."""

    def __init__(
        self,
        base: str,
        spark: SparkSessionResource,
        instance: dg.DagsterInstance,
        remote: dg.PipesSubprocessClient | None = None,
    ):
        self.base = base
        self.remote = remote
        #: more Pipes extras for the remote job (its kill point, in the crash tests)
        self.remote_extras: dict[str, Any] = {}
        self.spark_resource = spark
        self.instance = instance
        self.events = _events()
        self.groups = pd.DataFrame({"grp": ["g1", "g2"], "weight": [1.0, 2.0]})
        self.fail_scoring = False
        self.resources = dict(revisions_resources(base, spark))
        if remote is not None:
            self.resources["pipes_client"] = remote
        #: every asset's automation condition (it acts only where a sensor evaluates it)
        self.automation: dg.AutomationCondition = revisions_log_condition()
        self.build(Versions())

    # -- definitions ------------------------------------------------------------------

    def build(self, versions: Versions) -> None:
        pipe = self

        def source(spark: Any, start: dt.datetime, end: dt.datetime) -> DataFrame:
            return window_events(spark, pipe.events, start, end)

        def groups(spark: Any) -> DataFrame:
            return spark.createDataFrame(pipe.groups, schema=GROUP_SCHEMA)

        def scores(features: DataFrame, groups: DataFrame) -> DataFrame:
            if pipe.fail_scoring:
                raise RuntimeError("injected failure in the scoring function")
            return score(features, groups)

        def launch(
            context: dg.AssetExecutionContext, job: Any, pipes_client: dg.PipesSubprocessClient
        ) -> dg.PipesClientCompletedInvocation:
            extras = {**job.extras, "events": events_to_json(pipe.events), **pipe.remote_extras}
            return pipes_client.run(
                context=context, extras=extras, command=[sys.executable, PIPES_JOB]
            )

        remote = self.remote is not None
        self.versions = versions
        self.features = featurized_asset(
            name="features",
            id_columns=["entity"],
            partitions_def=DAILY,
            code_version=versions.features,
            source=None if remote else source,
            dataset="main",
            table="features",
            group_name="test",
            column_descriptions={"entity": "The entity the events are about"},
            automation_condition=self.automation,
            pipes=remote,
        )(launch if remote else featurize)
        self.groups_asset = reference_asset(
            name="groups",
            id_columns=["grp"],
            code_version=versions.groups,
            dataset="ref",
            table="groups",
            group_name="test",
            automation_condition=self.automation,
        )(groups)
        self.scores = scoring_asset(
            name="scores",
            upstream=self.features,
            references={"groups": Reference(self.groups_asset, on={"grp": "grp"})},
            partitions_def=DAILY,
            code_version=versions.scores,
            dataset="out",
            table="scores",
            group_name="test",
            automation_condition=self.automation,
            pipes=remote,
        )(launch if remote else scores)

    @property
    def assets(self) -> list[dg.AssetsDefinition]:
        return [self.features, self.groups_asset, self.scores]

    def checks(self, **lag: Any) -> list[dg.AssetChecksDefinition]:
        return [
            *revision_checks(self.features, schema=FeaturesSchema),
            *revision_checks(self.groups_asset),
            *revision_checks(self.scores, **lag),
        ]

    # -- running ----------------------------------------------------------------------

    def run(
        self,
        asset: dg.AssetsDefinition,
        partition: str | None = None,
        *,
        partitions: tuple[str, str] | None = None,
        tags: dict[str, str] | None = None,
        run_config: Any = None,
        raise_on_error: bool = True,
        with_checks: bool = False,
    ) -> dg.ExecuteInProcessResult:
        """One run of ``asset`` for a partition, a range (one run, one revision) or none;
        ``with_checks``: with the checks that run with its runs (``runs_with``)."""
        if partitions is not None:
            tags = {**(tags or {}), **range_tags(*partitions)}
        checks = [
            c
            for c in (self.checks() if with_checks else [])
            if runs_with(c, asset) and any(k.asset_key == asset.key for k in c.check_keys)
        ]
        return dg.materialize(
            [*self.assets, *checks],
            selection=dg.AssetSelection.assets(asset),
            partition_key=partition,
            tags=tags,
            run_config=run_config,
            instance=self.instance,
            resources=self.resources,
            raise_on_error=raise_on_error,
        )

    def run_checks(self, checks: list[dg.AssetChecksDefinition]) -> dict[str, Any]:
        """Run whole-table checks alone; returns {"asset:check": AssetCheckEvaluation}."""
        checks = [c for c in checks if not is_partitioned(c)]
        result = dg.materialize(
            [*self.assets, *checks],
            selection=dg.AssetSelection.checks(*checks),
            instance=self.instance,
            resources=self.resources,
        )
        return self.evaluations(result)

    @staticmethod
    def evaluations(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
        """The run's check evaluations as {"asset:check": AssetCheckEvaluation}."""
        return {
            f"{e.asset_key.to_user_string()}:{e.check_name}": e
            for e in result.get_asset_check_evaluations()
        }

    @staticmethod
    def partitions(result: dg.ExecuteInProcessResult, asset: dg.AssetsDefinition) -> list[str]:
        """The partitions the run materialized (none when a consumer had nothing to consume)."""
        return [m.partition for m in result.asset_materializations_for_node(asset.node_def.name)]

    @staticmethod
    def meta(result: dg.ExecuteInProcessResult, asset: dg.AssetsDefinition) -> dict[str, Any]:
        """The revision metadata of the run's materialization: a range run reports one per
        partition, all of the same revision, and so does a major for the partitions it
        covers beyond the run's (those without the run's partition row count)."""
        mats = result.asset_materializations_for_node(asset.node_def.name)
        metas = [{k: v.value for k, v in m.metadata.items()} for m in mats]

        def revision(meta: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in meta.items() if k != "dagster/partition_row_count"}

        assert metas and all(revision(m) == revision(metas[0]) for m in metas), metas
        return max(metas, key=len)

    def latest(self, asset: dg.AssetsDefinition, partition: str) -> dg.AssetMaterialization:
        """The partition's latest materialization, as the catalog has it."""
        (record,) = self.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=asset.key, asset_partitions=[partition]), limit=1
        ).records
        assert record.asset_materialization is not None
        return record.asset_materialization

    def dataset(self, name: str) -> RevisionedDataset:
        return RevisionedDataset(f"{self.base}/{name}", spark=self.spark_resource.spark_session)

    def state(self, name: str, table: str) -> dict[str, dict[str, Any]]:
        """A small table's state as {entity id: row} (tests only: a handful of rows)."""
        rows = self.dataset(name).read(table).collect()
        key = "grp" if table == "groups" else "entity"
        return {r[key]: r.asDict() for r in rows}
