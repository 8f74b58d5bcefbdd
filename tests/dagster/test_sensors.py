"""Sensors evaluated with Dagster's test helpers: the right runs, once; nothing when nothing
changed."""

from __future__ import annotations

import dagster as dg
import pytest
from revisions_pipeline import P1, P2, P3, Versions

from revisions_assets.dagster import code_version_sensor, upstream_changes_sensor

pytestmark = pytest.mark.dagster


def evaluate(pipe, sensor: dg.SensorDefinition, cursor: str | None = None) -> dg.SensorResult:
    with dg.build_sensor_context(
        instance=pipe.instance, resources=pipe.resources, cursor=cursor
    ) as context:
        result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def test_sensors_request_the_right_runs_once(pipe):
    pipe.run(pipe.groups_asset)
    pipe.run(pipe.features, P1)
    pipe.run(pipe.features, P2)
    pipe.run(pipe.scores, partitions=(P1, P2))

    code = code_version_sensor(pipe.assets)
    upstream = upstream_changes_sensor([pipe.scores])
    assert evaluate(pipe, code).run_requests == []
    assert evaluate(pipe, upstream).run_requests == []

    # new upstream revision: one minor run of the scores, for the partition of that revision
    pipe.run(pipe.features, P3)
    first = evaluate(pipe, upstream)
    (request,) = first.run_requests
    assert request.asset_selection == [pipe.scores.key] and request.partition_key == P3
    assert evaluate(pipe, upstream, first.cursor).run_requests == []  # cursor: not twice
    assert evaluate(pipe, upstream).run_requests[0].run_key == request.run_key  # run key too
    # README: score:<asset>:<upstream heads>, the heads pinned in the run's tag
    heads = request.tags["revisions/upstream_heads"]
    assert request.run_key == f"score:{pipe.scores.key.to_user_string()}:{heads}"
    assert f"{pipe.features.key.to_user_string()}@3" in heads.split(",")
    scored = pipe.meta(pipe.run(pipe.scores, P3, tags=dict(request.tags)), pipe.scores)
    assert (scored["rows"], scored["tombstones"]) == (2, 1)  # e scored, b's score deleted
    assert evaluate(pipe, upstream).run_requests == []  # consumed: nothing to do

    # a code version change: one major run over the materialized range, as one run
    pipe.build(Versions(features="2"))
    code = code_version_sensor(pipe.assets)
    changed = evaluate(pipe, code)
    (major,) = changed.run_requests
    # README: major:<asset>:<version>@<head>
    assert major.run_key == f"major:{pipe.features.key.to_user_string()}:2@3"
    assert major.asset_selection == [pipe.features.key]
    assert major.tags["dagster/asset_partition_range_start"] == P1
    assert major.tags["dagster/asset_partition_range_end"] == P3
    assert evaluate(pipe, code, changed.cursor).run_requests == []
    done = pipe.meta(pipe.run(pipe.features, tags=dict(major.tags)), pipe.features)
    assert done["kind"] == "major" and done["rows_offered"] == 5  # a..e, b as a tombstone
    assert done["rows"] == 2  # a carrying major: only the rows that changed are written
    assert len(pipe.dataset("main").revisions()) == 4  # one revision for the whole range
    assert evaluate(pipe, code).run_requests == []

    # the scores see the upstream reset: a major over every day the upstream major covers
    (after_major,) = evaluate(pipe, upstream_changes_sensor([pipe.scores])).run_requests
    assert after_major.partition_key is None
    assert after_major.tags["dagster/asset_partition_range_start"] == P1
    assert after_major.tags["dagster/asset_partition_range_end"] == P3
    rescored = pipe.run(pipe.scores, tags=dict(after_major.tags))
    assert pipe.partitions(rescored, pipe.scores) == [P1, P2, P3]
    assert pipe.meta(rescored, pipe.scores)["kind"] == "major"
