"""Featurized assets end to end through dagster.materialize: major/minor, code versions,
forced majors, single-run backfills (SPEC §5)."""

from __future__ import annotations

import pytest
from revisions_pipeline import P1, P2, P3, Versions

from revisions_assets.dagster import TAG_FORCE_MAJOR

pytestmark = pytest.mark.dagster

RANGE = "dagster/asset_partition_range_{}"


def test_first_run_major_then_minor_then_code_change_major(pipe):
    first = pipe.meta(pipe.run(pipe.features, P1), pipe.features)
    assert first["kind"] == "major" and first["why"] == "first revision of the table"
    assert (first["sequence"], first["rows"], first["version"]) == (1, 3, "1")
    assert first["timestamp"] == "2024-01-02T00:00:00+00:00"  # the end of the partition

    second = pipe.meta(pipe.run(pipe.features, P2), pipe.features)
    assert second["kind"] == "minor" and second["sequence"] == 2
    assert second["rows"] == 2  # only the entities of 2024-01-02 (a, d)
    assert second["compute_window"].startswith("2024-01-02")
    assert set(pipe.state("main", "features")) == {"a", "b", "c", "d"}

    pipe.build(Versions(features="2"))
    third = pipe.meta(pipe.run(pipe.features, P3), pipe.features)
    assert third["kind"] == "major"
    assert third["why"] == "code version changed: '1' -> '2'"
    assert third["compute_window"].startswith("2024-01-01")  # from the first partition
    assert (third["rows"], third["tombstones"], third["version"]) == (5, 1, "2")
    state = pipe.state("main", "features")
    assert set(state) == {"a", "c", "d", "e"}  # every entity re-evaluated; b deleted on day 3
    assert state["a"]["total"] == 11 and state["a"]["events"] == 2  # over the whole window
    revs = pipe.dataset("main").revisions("features")
    assert [(r.is_major, r.version_of("features")) for r in revs] == [
        (True, "1"), (False, "1"), (True, "2")]
    assert revs[2].producer["partition_key"] == P3


def test_major_forced_by_run_tag_or_config(pipe):
    pipe.run(pipe.features, P1)
    by_tag = pipe.meta(pipe.run(pipe.features, P2, tags={TAG_FORCE_MAJOR: "true"}),
                       pipe.features)
    assert by_tag["kind"] == "major" and by_tag["why"] == "major forced by run tag or config"
    assert by_tag["rows"] == 4  # a, b, c, d: the window starts at the first partition

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
    assert (minor["rows"], minor["tombstones"]) == (4, 1)  # a, d, e and the tombstone of b
    (rev,) = [r for r in pipe.dataset("main").revisions() if r.sequence == 2]
    assert rev.producer["partition_key"] == f"{P2}...{P3}"
    assert pipe.dataset("main").head_sequence == 2
