"""The revisions log as a Declarative Automation condition: at every step of a flow (first
scores, deletions, a late backfill, a reference change, code bumps) its automation sensor
requests the same runs as the two sensors it replaces, once; a run it requests is pinned by
its partitions (revisions committed before it starts wait for the next); a failed blocking
check holds the scores back."""

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

    # day 4 is requested, and before its run starts, day 2 is corrected (a late backfill):
    # the run is pinned by its partitions (the revision of day 4 only), day 2 comes next
    pipe.run(pipe.features, P4)
    day4 = ticks.step()
    assert list(map(described, day4)) == [("scores", P4, P4)]
    pipe.events.loc[
        (pipe.events["day"].astype(str) == P2) & (pipe.events["entity"] == "d"), "value"
    ] = 40
    pipe.run(pipe.features, P2)
    (pinned,) = ticks.run(day4)
    (features,) = [u for u in pinned["upstream_positions"] if u["table"] == "features"]
    assert (pinned["partitions"], features["from"], features["to"]) == (P4, 3, 4)
    late = ticks.step()
    assert list(map(described, late)) == [("scores", P2, P2)]
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
    # launched by hand for one day instead, the major re-evaluates and reports every day:
    # the condition and the sensors agree that no day of the features is left to request
    by_hand = pipe.run(pipe.features, P2)
    assert pipe.meta(by_hand, pipe.features)["kind"] == "major"
    assert sorted(pipe.partitions(by_hand, pipe.features)) == [P1, P2, P3, P4]
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
    assert len(revisions) == 7
    consumed = [{p.table: p.sequence for p in r.upstream} for r in revisions]
    assert [c["features"] for c in consumed] == [2, 3, 4, 5, 5, 6, 6]


def test_a_failed_blocking_check_holds_the_scores_back(pipe):
    pipe.automation = revisions_automation()
    pipe.build(Versions())
    pipe.run(pipe.groups_asset, with_checks=True)
    pipe.run(pipe.features, P1, with_checks=True)
    negative = pd.DataFrame([(P2, "z", "g1", -5, False)], columns=pipe.events.columns)
    negative["day"] = pd.to_datetime(negative["day"]).dt.date
    pipe.events = pd.concat([pipe.events, negative], ignore_index=True)
    failed = pipe.run(pipe.features, P2, with_checks=True, raise_on_error=False)
    assert not failed.success  # the blocking partition_schema check failed
    ticks = Ticks(pipe)
    assert ticks.automation() == []  # the scores would consume that revision: no run
    assert list(map(described, ticks.sensors())) == [("scores", P1, P2)]  # sensors see no checks

    pipe.events.loc[pipe.events["entity"] == "z", "value"] = 5  # fixed forward
    pipe.run(pipe.features, P2, with_checks=True)
    assert list(map(described, ticks.automation())) == [("scores", P1, P2)]

    # a day skipped: the 4th runs before the 3rd. The freshness check shows the gap, and the
    # automation asks for the missing day (no upstream asset misses it), a minor of its own
    pipe.run(pipe.features, P4, with_checks=True)
    freshness = [c for c in pipe.checks() if "partition_freshness" in str(c.check_keys)]
    gap = pipe.run_checks(freshness)["features:partition_freshness"]
    assert not gap.passed and gap.severity == dg.AssetCheckSeverity.WARN
    assert (gap.metadata["gaps"].value, gap.metadata["newest_partition"].value) == (P3, P4)
    landings = gap.metadata["landings"].records  # the newest partitions first
    assert [(r.data["partition"], r.data["kind"]) for r in landings] == [
        (P4, "minor"),
        (P2, "minor"),
        (P1, "major"),
    ]
    assert list(map(described, ticks.automation())) == [("features", P3, P3)]
    # the scores wait for it (one of their days, whose blocking checks have not run), then
    # score every day at once
    pipe.run(pipe.features, P3, with_checks=True)
    assert list(map(described, ticks.automation())) == [("scores", P1, P4)]
