"""Featurized assets end to end through dagster.materialize: major/minor, code versions,
forced majors, single-run backfills (docs/guides/versions.md)."""

from __future__ import annotations

import dagster as dg
import pytest
from revisions_pipeline import P1, P2, P3, Versions

from revisions_assets.dagster import TAG_FORCE_MAJOR

pytestmark = pytest.mark.dagster

RANGE = "dagster/asset_partition_range_{}"


def test_first_run_major_then_minor_then_code_change_major(pipe):
    run = pipe.run(pipe.features, P1)
    first = pipe.meta(run, pipe.features)
    assert first["kind"] == "major" and first["why"] == "first revision of the table"
    assert (first["sequence"], first["rows"], first["version"]) == (1, 3, "1")
    assert first["timestamp"] == "2024-01-02T00:00:00+00:00"  # the end of the partition
    # Dagster's own conventions: table, URI, counts, the Columns tab, the data version
    assert first["dagster/table_name"] == "main.features"
    assert first["dagster/uri"] == pipe.dataset("main").root
    assert (first["dagster/row_count"], first["dagster/partition_row_count"]) == (3, 3)
    columns = {c.name: c for c in first["dagster/column_schema"].columns}
    assert {n: c.type for n, c in columns.items()} == {
        "entity": "string",
        "grp": "string",
        "total": "bigint",
        "events": "bigint",
    }
    entity = columns["entity"].constraints
    assert (entity.nullable, entity.unique, entity.other) == (False, True, ["id column"])
    assert columns["entity"].description == "The entity the events are about"
    (mat,) = run.asset_materializations_for_node(pipe.features.node_def.name)
    assert first["data_version"] == mat.tags["dagster/data_version"] == "features@1"

    second = pipe.meta(pipe.run(pipe.features, P2), pipe.features)
    assert second["kind"] == "minor" and second["sequence"] == 2
    assert second["rows"] == 2  # only the entities of 2024-01-02 (a, d)
    assert second["compute_window"].startswith("2024-01-02")
    assert (second["dagster/row_count"], second["dagster/partition_row_count"]) == (4, 2)
    assert set(pipe.state("main", "features")) == {"a", "b", "c", "d"}

    pipe.build(Versions(features="2"))
    # launched for one day, a major re-evaluates them all (its checks run with it)
    major = pipe.run(pipe.features, P3, with_checks=True)
    third = pipe.meta(major, pipe.features)
    assert third["kind"] == "major"
    assert third["why"] == "code version changed: '1' -> '2'"
    assert third["compute_window"].startswith("2024-01-01")  # from the first partition
    assert (third["partitions"], third["run_partitions"]) == (f"{P1}...{P3}", P3)
    # ... and the catalog says so: every day it covers is materialized by it, at version 2
    assert sorted(pipe.partitions(major, pipe.features)) == [P1, P2, P3]
    for day in (P1, P2, P3):
        tags = pipe.latest(pipe.features, day).tags
        assert (tags["dagster/code_version"], tags["dagster/data_version"]) == ("2", "features@3")
    # ... each with the blocking checks of that revision (consumers wait for those)
    checked = {
        (e.check_name, e.partition): e.passed
        for e in major.get_asset_check_evaluations()
        if e.check_name == "partition_ids_unique_non_null"
    }
    assert checked == {("partition_ids_unique_non_null", day): True for day in (P1, P2, P3)}
    # a carrying major (skip_unchanged): a..e offered with b as a tombstone; what did not
    # change is kept from the state it carries, not rewritten
    assert (third["rows_offered"], third["rows"], third["tombstones"]) == (5, 3, 1)
    assert third["version"] == "2" and third["carried_revisions"]
    assert third["dagster/row_count"] == 4 and third["data_version"] == "features@3"
    state = pipe.state("main", "features")
    assert set(state) == {"a", "c", "d", "e"}  # every entity re-evaluated; b deleted on day 3
    assert state["a"]["total"] == 11 and state["a"]["events"] == 2  # over the whole window
    revs = pipe.dataset("main").revisions("features")
    assert [(r.is_major, r.version_of("features")) for r in revs] == [
        (True, "1"),
        (False, "1"),
        (True, "2"),
    ]
    assert revs[2].producer["partition_key"] == P3


def test_major_forced_by_run_tag_or_config(pipe):
    pipe.run(pipe.features, P1)
    by_tag = pipe.meta(pipe.run(pipe.features, P2, tags={TAG_FORCE_MAJOR: "true"}), pipe.features)
    assert by_tag["kind"] == "major" and by_tag["why"] == "major forced by run tag or config"
    # a, b, c, d offered (the window starts at the first partition); a carrying major
    assert (by_tag["rows_offered"], by_tag["rows"]) == (4, 2)
    assert set(pipe.state("main", "features")) == {"a", "b", "c", "d"}

    config = {"ops": {"features": {"config": {"force_major": True}}}}
    by_config = pipe.meta(pipe.run(pipe.features, P2, run_config=config), pipe.features)
    assert by_config["kind"] == "major" and by_config["sequence"] == 3
    assert pipe.meta(pipe.run(pipe.features, P2), pipe.features)["kind"] == "minor"


def test_backfill_of_a_range_is_one_revision(pipe):
    tags = {RANGE.format("start"): P1, RANGE.format("end"): P3}
    first = pipe.meta(pipe.run(pipe.features, tags=tags), pipe.features)
    assert first["kind"] == "major" and first["sequence"] == 1
    assert first["timestamp"] == "2024-01-04T00:00:00+00:00"
    assert set(pipe.state("main", "features")) == {"a", "c", "d", "e"}

    tags = {RANGE.format("start"): P2, RANGE.format("end"): P3}
    minor = pipe.meta(pipe.run(pipe.features, tags=tags), pipe.features)
    assert minor["kind"] == "minor" and minor["sequence"] == 2
    # a, d, e recomputed and the tombstone of b offered; d and e are unchanged (skipped)
    assert (minor["rows_offered"], minor["rows"], minor["tombstones"]) == (4, 2, 1)
    (rev,) = [r for r in pipe.dataset("main").revisions() if r.sequence == 2]
    assert rev.producer["partition_key"] == f"{P2}...{P3}"
    assert pipe.dataset("main").head_sequence == 2

    # a late minor of an old partition covers that partition alone, and reports it alone
    late = pipe.run(pipe.features, P1)
    assert pipe.meta(late, pipe.features)["kind"] == "minor"
    assert pipe.partitions(late, pipe.features) == [P1]


def test_downstream_assets_load_the_state_as_of_their_partition(pipe):
    pipe.run(pipe.features, P1)
    pipe.run(pipe.features, P2)
    seen = {}

    @dg.asset(
        partitions_def=pipe.features.partitions_def, ins={"features": dg.AssetIn(pipe.features.key)}
    )
    def consumer(context, features):  # (string annotations would confuse dagster here)
        seen[context.partition_key] = {r["entity"]: r["total"] for r in features.collect()}
        return dg.MaterializeResult()

    for day in (P1, P2):
        dg.materialize(
            [*pipe.assets, consumer],
            selection=[consumer.key],
            partition_key=day,
            instance=pipe.instance,
            resources=pipe.resources,
        )
    assert seen[P1] == {"a": 1, "b": 2, "c": 3}  # as of the end of 2024-01-01
    assert seen[P2] == {"a": 10, "b": 2, "c": 3, "d": 4}


def test_io_manager_refuses_values_it_cannot_store(pipe):
    @dg.asset(io_manager_key="revisions_io_manager")
    def not_a_revision():
        return 42

    result = dg.materialize(
        [not_a_revision], instance=pipe.instance, resources=pipe.resources, raise_on_error=False
    )
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.to_string()
    assert "UnexpectedOutputError" in message and "returned int" in message
