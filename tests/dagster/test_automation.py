"""The revisions log as a Declarative Automation condition: at every step of a flow (first
scores, deletions, a late backfill, a reference change, code bumps) its automation sensor
requests the same runs as the two sensors it replaces, once; a run it requests is pinned by
its partitions; a failed blocking check holds the scores back."""

from __future__ import annotations

import dagster as dg
import pandas as pd
import pytest
from revisions_pipeline import P1, P2, P3, P4, RANGE_END_TAG, RANGE_START_TAG, Versions

from revisions_assets.dagster import (
    automation_tick,
    code_version_sensor,
    revisions_automation,
    revisions_automation_sensor,
    upstream_changes_sensor,
)

pytestmark = pytest.mark.dagster


def described(request: dg.RunRequest) -> tuple[str, str | None, str | None]:
    """(asset, first partition, last partition) of a one-run request."""
    (key,) = request.asset_selection or []
    first = request.partition_key or request.tags.get(RANGE_START_TAG)
    last = request.partition_key or request.tags.get(RANGE_END_TAG)
    return key.to_user_string(), first, last


class Ticks:
    """Ticks of the automation sensor and, beside it, of the two sensors, each with its
    cursor, over the pipeline's current definitions."""

    def __init__(self, pipe):
        self.pipe = pipe
        self.cursors: dict[str, str | None] = {}

    def automation(self) -> list[dg.RunRequest]:
        """The runs of one tick of the automation sensor (backfills as their single runs)."""
        pipe = self.pipe
        sensor = revisions_automation_sensor(pipe.assets)
        defs = dg.Definitions(
            assets=pipe.assets,
            asset_checks=pipe.checks(),  # the blocking ones matter to revisions_automation()
            sensors=[sensor],
            resources=pipe.resources,
        )
        runs, self.cursors[sensor.name] = automation_tick(
            sensor, defs, pipe.instance, pipe.assets, self.cursors.get(sensor.name)
        )
        return runs

    def sensors(self) -> list[dg.RunRequest]:
        pipe = self.pipe
        found = []
        for sensor in (code_version_sensor(pipe.assets), upstream_changes_sensor([pipe.scores])):
            with dg.build_sensor_context(
                instance=pipe.instance,
                cursor=self.cursors.get(sensor.name),
                resources=pipe.resources,
            ) as ctx:
                result = sensor(ctx)
            self.cursors[sensor.name] = result.cursor
            found += result.run_requests
        return found

    def step(self) -> list[dg.RunRequest]:
        """One tick of each: the same runs, then (before they ran) no second request."""
        runs = self.automation()
        assert sorted(map(described, runs)) == sorted(map(described, self.sensors()))
        assert self.automation() == []  # (the sensors' cursors: test_sensors.py)
        return runs

    def run(self, runs: list[dg.RunRequest]) -> list[dict]:
        """Launch the automation's runs; afterwards the log asks for nothing more."""
        assets = {a.key: a for a in self.pipe.assets}
        done = []
        for request in runs:
            (key,) = request.asset_selection or []
            result = self.pipe.run(assets[key], request.partition_key, tags=dict(request.tags))
            done.append(self.pipe.meta(result, assets[key]))
        return done


def test_the_condition_requests_what_the_sensors_request_once(pipe):
    ticks = Ticks(pipe)
    assert ticks.step() == []  # nothing materialized: the log asks for nothing
    pipe.run(pipe.groups_asset)
    pipe.run(pipe.features, P1)
    pipe.run(pipe.features, P2)

    first = ticks.step()  # the first scores: every day the features cover, one run
    assert list(map(described, first)) == [("scores", P1, P2)]
    assert first[0].tags["revisions/upstream_heads"] == "partitions"
    (scored,) = ticks.run(first)
    assert scored["kind"] == "major" and scored["partitions"] == f"{P1}...{P2}"
    lineage = scored["dagster/column_lineage"].deps_by_column  # from uses_columns, references
    assert {d.column_name for d in lineage["score"]} == {"grp", "total", "events"}
    assert ticks.step() == []

    pipe.run(pipe.features, P3)  # e appears, b is deleted
    (deletion,) = ticks.run(ticks.step())
    assert (deletion["partitions"], deletion["rows"], deletion["tombstones"]) == (P3, 2, 1)
    assert "b" not in pipe.state("out", "scores")  # the tombstone propagated

    # a late backfill: day 4, then day 2 corrected after it
    pipe.run(pipe.features, P4)
    pipe.events.loc[
        (pipe.events["day"].astype(str) == P2) & (pipe.events["entity"] == "d"), "value"
    ] = 40
    pipe.run(pipe.features, P2)
    late = ticks.step()
    assert list(map(described, late)) == [("scores", P2, P4)]  # the span: one run
    (minor,) = ticks.run(late)
    assert minor["kind"] == "minor" and pipe.state("out", "scores")["d"]["score"] == 80.0

    # a reference row changes: the newest scored day
    pipe.groups.loc[pipe.groups["grp"] == "g1", "weight"] = 3.0
    pipe.run(pipe.groups_asset)
    assert list(map(described, ref := ticks.step())) == [("scores", P4, P4)]
    ticks.run(ref)

    # a features code bump: one major over the materialized range, then the scores' reset
    pipe.build(Versions(features="2"))
    major = ticks.step()
    assert list(map(described, major)) == [("features", P1, P4)]
    assert ticks.run(major)[0]["kind"] == "major"
    (reset,) = ticks.run(ticks.step())
    assert reset["kind"] == "major" and reset["why"] == "upstream reset in features"

    # a scoring code bump: the scores' own major, pinned to the heads seen
    pipe.build(Versions(features="2", scores="2"))
    own = ticks.step()
    assert list(map(described, own)) == [("scores", P1, P4)]
    assert ticks.run(own)[0]["why"] == "code version changed: '1' -> '2'"
    assert ticks.step() == []

    # exactly once: every scoring revision consumed what the one before left
    revisions = pipe.dataset("out").revisions("scores")
    assert len(revisions) == 6
    consumed = [{p.table: p.sequence for p in r.upstream} for r in revisions]
    assert [c["features"] for c in consumed] == [2, 3, 5, 5, 6, 6]


def test_a_requested_run_is_pinned_by_its_partitions(pipe):
    pipe.run(pipe.groups_asset)
    pipe.run(pipe.features, P1)
    ticks = Ticks(pipe)
    ticks.run(ticks.step())
    pipe.run(pipe.features, P2)
    (request,) = ticks.automation()  # scores P2 requested ...
    pipe.run(pipe.features, P4)  # ... and before its run starts, day 4 is committed
    (scored,) = ticks.run([request])
    assert scored["partitions"] == P2  # the revision of day 2 only; day 4 waits
    (features,) = [u for u in scored["upstream_positions"] if u["table"] == "features"]
    assert (features["from"], features["to"]) == (1, 2)
    assert list(map(described, ticks.step())) == [("scores", P4, P4)]

    # day 2 corrected meanwhile: a run asked by hand for day 4 (no pin: the current heads)
    # would have to materialize day 2 too, and refuses
    pipe.events.loc[pipe.events["entity"] == "d", "value"] = 41
    pipe.run(pipe.features, P2)
    refused = pipe.run(pipe.scores, P4, raise_on_error=False)
    (failure,) = [e for e in refused.all_events if e.is_step_failure]
    assert "ScoringRangeError" in failure.step_failure_data.error.to_string()


def test_a_failed_blocking_check_holds_the_scores_back(pipe):
    pipe.automation = revisions_automation()
    pipe.build(Versions())
    pipe.run(pipe.groups_asset, with_checks=True)
    pipe.run(pipe.features, P1, with_checks=True)
    ticks = Ticks(pipe)
    first = ticks.automation()  # the blocking checks of features and groups passed
    assert list(map(described, first)) == [("scores", P1, P1)]
    ticks.run(first)

    negative = pd.DataFrame([(P2, "z", "g1", -5, False)], columns=pipe.events.columns)
    negative["day"] = pd.to_datetime(negative["day"]).dt.date
    pipe.events = pd.concat([pipe.events, negative], ignore_index=True)
    failed = pipe.run(pipe.features, P2, with_checks=True, raise_on_error=False)
    assert not failed.success  # the blocking partition_schema check failed
    assert ticks.automation() == []  # a scoring run would consume that revision: none
    assert list(map(described, ticks.sensors()))[-1] == ("scores", P2, P2)  # sensors see no checks

    pipe.events.loc[pipe.events["entity"] == "z", "value"] = 5  # fixed forward
    pipe.run(pipe.features, P2, with_checks=True)
    assert list(map(described, ticks.automation())) == [("scores", P2, P2)]
