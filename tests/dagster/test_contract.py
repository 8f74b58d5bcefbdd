"""What the README promises of the Dagster layer and no other test pins down: definition
metadata, kinds and the single-run backfill policy; the materialization metadata keys;
reference revisions stamped with the commit time; scoring revisions never going back in
time; sensors and schedule STOPPED by default; the daily schedule actually run."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pytest
from revisions_pipeline import DAILY, P1, P2, P3

from revisions_assets.dagster import (
    code_version_sensor,
    daily_featurized_schedule,
    upstream_changes_sensor,
)

pytestmark = pytest.mark.dagster

#: README "Materialization metadata and data versions", on every materialization
REVISION_KEYS = {
    "revision",
    "kind",
    "why",
    "sequence",
    "version",
    "timestamp",
    "rows",
    "tombstones",
    "files",
    "bytes",
    "dataset_root",
    "table",
    "dagster/column_schema",
    "dagster/uri",
    "dagster/table_name",
    "dagster/row_count",
}


def value(meta: dict, key: str) -> object:
    entry = meta[key]
    return getattr(entry, "value", entry)


def dataset_of(pipe, asset: dg.AssetsDefinition):
    return pipe.dataset(str(value(asset.metadata_by_key[asset.key], "revisions/dataset")))


def test_definition_metadata_kinds_and_backfill_policy(pipe):
    roles = {pipe.features: "featurized", pipe.groups_asset: "reference", pipe.scores: "scoring"}
    for asset, role in roles.items():
        meta = asset.metadata_by_key[asset.key]
        for key in ("revisions/dataset", "revisions/table", "revisions/id_columns"):
            assert value(meta, key), f"{asset.key}: {key}"
        assert value(meta, "revisions/role") == role
        assert ("revisions/upstream" in meta) == (role == "scoring")
        assert asset.specs_by_key[asset.key].kinds == {"spark", "parquet"}
        if asset.partitions_def is None:
            assert asset.backfill_policy is None
        else:  # a range is one run, hence one revision
            assert asset.backfill_policy == dg.BackfillPolicy.single_run()


def test_sensors_and_the_schedule_are_stopped_by_default(pipe):
    assert code_version_sensor(pipe.assets).default_status == dg.DefaultSensorStatus.STOPPED
    upstream = upstream_changes_sensor([pipe.scores])
    assert upstream.default_status == dg.DefaultSensorStatus.STOPPED
    schedule = daily_featurized_schedule([pipe.features], DAILY)
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED


def test_metadata_keys_and_revision_timestamps(pipe):
    started = datetime.now(UTC)
    groups = pipe.meta(pipe.run(pipe.groups_asset), pipe.groups_asset)
    finished = datetime.now(UTC)
    assert REVISION_KEYS | {"compute_window"} <= set(groups)
    reference = dataset_of(pipe, pipe.groups_asset).revision("HEAD")
    assert started <= reference.timestamp <= finished  # a reference: stamped at commit time

    # partitioned assets also publish `partitions` (the unpartitioned reference does not,
    # though the README lists it for every materialization)
    features = pipe.meta(pipe.run(pipe.features, partitions=(P1, P2)), pipe.features)
    assert REVISION_KEYS | {"compute_window", "partitions"} <= set(features)
    scored = pipe.meta(pipe.run(pipe.scores, partitions=(P1, P2)), pipe.scores)
    scoring_keys = {"upstream_positions", "upstream_data_versions", "partitions"}
    assert REVISION_KEYS | scoring_keys <= set(scored)
    scores = dataset_of(pipe, pipe.scores)
    newest = scores.revision("HEAD").timestamp
    assert newest == datetime(2024, 1, 3, tzinfo=UTC)  # the end of P2's window

    # P1 recomputed: its scoring window ends on 2024-01-02, but scores never go back in time
    pipe.run(pipe.features, P1)
    pipe.run(pipe.scores, P1)
    rescored = scores.revision("HEAD")
    assert rescored.sequence == 2 and rescored.timestamp == newest


def test_the_daily_schedule_runs_the_newest_partition(pipe):
    schedule = daily_featurized_schedule([pipe.features], DAILY)
    defs = dg.Definitions(assets=[pipe.features], schedules=[schedule], resources=pipe.resources)
    tick = datetime(2024, 1, 4, 1, tzinfo=UTC)  # 01:00 on the 4th: the 3rd is complete
    with dg.build_schedule_context(
        instance=pipe.instance,
        scheduled_execution_time=tick,
        repository_def=defs.get_repository_def(),
    ) as ctx:
        (request,) = schedule.evaluate_tick(ctx).run_requests
    assert request.partition_key == P3
    pipe.run(pipe.features, P1)  # the first revision of a table is a major
    run = pipe.run(pipe.features, request.partition_key, tags=dict(request.tags))
    meta = pipe.meta(run, pipe.features)
    assert (meta["kind"], pipe.partitions(run, pipe.features)) == ("minor", [P3])
