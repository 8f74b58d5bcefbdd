"""Commits made outside Dagster, shown in Dagster: the outside-commits sensor evaluated on a
real instance after an engine commit made without Dagster, and after a purge."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest
from harness.frames import frame
from pyspark.sql import functions as F
from revisions_pipeline import P1, P2

from revisions_assets.dagster import outside_commits_sensor
from revisions_assets.dagster.outside_commits import COMMITTED_BY

pytestmark = pytest.mark.dagster


def evaluate(pipe, sensor: dg.SensorDefinition, cursor: str | None) -> dg.SensorResult:
    defs = dg.Definitions(
        assets=pipe.assets, asset_checks=pipe.checks(), sensors=[sensor], resources=pipe.resources
    )
    with dg.build_sensor_context(
        instance=pipe.instance, resources=pipe.resources, cursor=cursor, definitions=defs
    ) as context:
        result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def test_an_outside_commit_and_a_purge_reach_the_catalog_once(pipe):
    pipe.run(pipe.features, P1)
    sensor = outside_commits_sensor(pipe.assets)
    first = evaluate(pipe, sensor, None)
    assert first.asset_events == []  # the newest revision is this instance's run's

    # a minor committed with the engine, outside Dagster, for the second day
    data = pipe.dataset("main")
    rows = data.read("features").where("entity = 'a'").withColumn("total", F.lit(42).cast("long"))
    rev = data.commit(
        {"features": rows.select("entity", "grp", "total", "events")},
        timestamp=dt.datetime(2024, 1, 2, 12, tzinfo=dt.UTC),
        is_major=False,
        version="1",
        properties={"reason": "a correction by hand"},
    )
    found = evaluate(pipe, sensor, first.cursor)
    (mat,) = found.asset_events
    assert isinstance(mat, dg.AssetMaterialization) and mat.partition == P2
    meta = {k: v.value for k, v in mat.metadata.items()}
    assert (meta["revision"], meta["sequence"], meta["kind"]) == (rev.name, 2, "minor")
    assert meta[COMMITTED_BY] == "a commit outside Dagster"
    assert meta["why"] == "a correction by hand"
    assert mat.tags["dagster/data_version"] == meta["data_version"]
    # its blocking checks are requested on the partition it covers, once (run key)
    assert found.run_requests and all(r.partition_key == P2 for r in found.run_requests)
    assert all(r.asset_check_keys and not r.asset_selection for r in found.run_requests)

    # reported to the instance (as the sensor daemon does): the catalog's data version moves
    pipe.instance.report_runless_asset_event(mat)
    latest = pipe.instance.get_latest_materialization_event(pipe.features.key)
    assert latest is not None and latest.asset_materialization.partition == P2
    assert evaluate(pipe, sensor, found.cursor).asset_events == []  # cursor: not twice

    # a purge: an observation saying what it removed, no materialization
    ids = frame(pipe.spark_resource.spark_session, [("a",)], "entity string")
    data.maintenance.purge("features", ids, reason="erasure request")
    (obs,) = evaluate(pipe, sensor, found.cursor).asset_events
    assert isinstance(obs, dg.AssetObservation)
    seen = {k: v.value for k, v in obs.metadata.items()}
    assert (seen["change"], seen["reason"], seen["entities"]) == ("purge", "erasure request", 1)
    assert seen["rows_removed"] == 2 and seen["revisions_rewritten"] == 2
