"""Training-set assets end to end: labels joined point-in-time to a featurized asset."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest
from harness.frames import frame
from revisions_pipeline import P1, P2

from revisions_assets.dagster import reference_asset, training_set_asset

pytestmark = pytest.mark.dagster

UTC = dt.UTC
LABELS = [  # label_id, entity, event time, label
    (1, "a", dt.datetime(2024, 1, 2, 12, tzinfo=UTC), 1),  # after the P1 major (total 1)
    (2, "a", dt.datetime(2024, 1, 3, 12, tzinfo=UTC), 0),  # after the P2 minor (total 10)
    (3, "zz", dt.datetime(2024, 1, 3, 12, tzinfo=UTC), 1),  # no such entity
    (4, "a", dt.datetime(2024, 1, 1, 12, tzinfo=UTC), 0),  # before the first major
]


def test_training_sets_latest_knowledge_and_what_production_saw(pipe, spark):
    pipe.run(pipe.features, P1)
    pipe.run(pipe.features, P2)

    @reference_asset(name="labels", id_columns=["label_id"], code_version="1", group_name="test")
    def labels(spark):
        return frame(spark, LABELS, "label_id long, entity string, at timestamp, y int")

    sets = {
        known_at: training_set_asset(
            name=f"training_{name}",
            labels=labels,
            features=[pipe.features],
            event_time="at",
            on=["entity"],
            known_at=known_at,
        )
        for name, known_at in [("latest", "all_committed"), ("as_seen", "event")]
    }
    result = dg.materialize(
        [*pipe.assets, labels, *sets.values()],
        selection=dg.AssetSelection.assets(labels, *sets.values()),
        instance=pipe.instance,
        resources=pipe.resources,
    )
    assert result.success

    def written(asset: dg.AssetsDefinition) -> dict[int, tuple]:
        (mat,) = result.asset_materializations_for_node(asset.node_def.name)
        path = mat.metadata["path"].value
        assert mat.metadata["head_main_features"].value == 2
        rows = spark.read.parquet(path).collect()
        return {r.label_id: (r.y, r.total, r._revision_features is not None) for r in rows}

    assert written(sets["all_committed"]) == {
        1: (1, 1, True),
        2: (0, 10, True),
        3: (1, None, False),
        4: (0, None, False),
    }
    # the features were committed today, after every 2024 event: production knew nothing
    assert written(sets["event"]) == {
        1: (1, None, False),
        2: (0, None, False),
        3: (1, None, False),
        4: (0, None, False),
    }
