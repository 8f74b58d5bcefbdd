"""Row hashes in Dagster: unchanged rows are not committed, soft majors re-score only what
changed, and the positions still move."""

from __future__ import annotations

import dagster as dg
from pyspark.sql import functions as F
from revisions_pipeline import DAILY, EVENT_SCHEMA, P1, Versions

from revisions_assets.dagster import Reference, featurized_asset, scoring_asset


def test_soft_majors_rescore_only_changed_entities(pipe):
    pipe.run(pipe.groups_asset)
    pipe.run(pipe.features, P1)
    first = pipe.meta(pipe.run(pipe.scores, P1), pipe.scores)
    assert first["kind"] == "major" and "rescored_entities" not in first
    before = pipe.state("out", "scores")

    # the same day recomputed by the same code: every row unchanged, nothing committed
    assert pipe.meta(pipe.run(pipe.features, P1), pipe.features)["kind"] == "none"

    # a new features code version that changes no value: a major upstream, and the scores'
    # soft major re-scores nobody but records the new position
    pipe.build(Versions(features="2"))
    assert pipe.meta(pipe.run(pipe.features, P1), pipe.features)["kind"] == "major"
    soft = pipe.meta(pipe.run(pipe.scores, P1), pipe.scores)
    # a carrying major: nothing written, every previous score kept
    assert (soft["kind"], soft["rescored_entities"], soft["rows"]) == ("major", 0, 0)
    assert soft["carried_revisions"] >= 1 and soft["dagster/row_count"] == len(before)
    assert pipe.state("out", "scores") == before
    head = pipe.dataset("main").revisions("features")[-1].sequence
    assert (
        pipe.dataset("out").inspect.upstream_position(pipe.dataset("main").root, "features") == head
    )

    # a formula change that changes one entity's value: only that entity is re-scored
    pipe.events.loc[(pipe.events["entity"] == "c"), "value"] = 30
    pipe.build(Versions(features="3"))
    pipe.run(pipe.features, P1)
    changed = pipe.meta(pipe.run(pipe.scores, P1), pipe.scores)
    assert (changed["kind"], changed["rescored_entities"], changed["rows"]) == ("major", 1, 1)
    assert changed["dagster/row_count"] == len(before)
    after = pipe.state("out", "scores")
    assert after["c"]["score"] == 60.0
    assert {k: v for k, v in after.items() if k != "c"} == {
        k: v for k, v in before.items() if k != "c"
    }


def field_pipeline(pipe, *, events_version: str, events_scale: int):
    """features (total, events) with a field version on ``events``; scores reading only
    ``grp`` and ``total`` (uses_columns)."""

    def source(spark, start, end):
        ev = pipe.events
        mask = (ev["day"] >= start.date()) & (ev["day"] < end.date())
        return spark.createDataFrame(ev[mask], schema=EVENT_SCHEMA)

    @featurized_asset(
        name="features",
        id_columns=["entity"],
        partitions_def=DAILY,
        code_version="1",
        field_versions={"events": events_version},
        source=source,
        dataset="main",
        table="features",
    )
    def features(events, window):
        return events.groupBy("entity").agg(
            F.max("grp").alias("grp"),
            F.sum("value").alias("total"),
            (F.count(F.lit(1)) * events_scale).alias("events"),
        )

    @scoring_asset(
        name="scores",
        upstream=features,
        references={"groups": Reference(pipe.groups_asset, on={"grp": "grp"})},
        partitions_def=DAILY,
        code_version="1",
        uses_columns=["grp", "total"],
        dataset="out",
        table="scores",
    )
    def scores(features, groups):
        return features.join(groups, "grp", "left").select(
            "entity", (F.col("total") * F.col("weight")).alias("score")
        )

    return features, scores


def test_field_versions_and_uses_columns(pipe):
    def run(assets, asset):
        result = dg.materialize(
            [*assets, pipe.groups_asset],
            selection=dg.AssetSelection.assets(asset),
            partition_key=P1,
            instance=pipe.instance,
            resources=pipe.resources,
        )
        return pipe.meta(result, asset)

    pipe.run(pipe.groups_asset)
    features, scores = field_pipeline(pipe, events_version="1", events_scale=1)
    first = run([features, scores], features)
    assert first["field_versions"] == {"grp": "1", "total": "1", "events": "1"}
    run([features, scores], scores)
    before = pipe.state("out", "scores")

    # a new formula for events, declared by its field version: a major of the features ...
    features, scores = field_pipeline(pipe, events_version="2", events_scale=10)
    bumped = run([features, scores], features)
    assert (
        bumped["kind"] == "major" and bumped["why"] == "field versions changed: events '1' -> '2'"
    )
    assert bumped["field_versions"] == {"grp": "1", "total": "1", "events": "2"}
    # ... that the scores, which do not read events, absorb without re-scoring anyone
    soft = run([features, scores], scores)
    assert (soft["kind"], soft["rescored_entities"]) == ("major", 0)
    assert pipe.state("out", "scores") == before
    # the same declaration again: no major
    again = run([features, scores], features)
    assert again["kind"] == "none"
