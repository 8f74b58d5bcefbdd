"""Feast's real ``FeatureStore`` (local provider, sqlite online store) over a dataset the
engine wrote: ``feature_store.yaml`` naming ``RevisionsOfflineStore``, ``apply``, training
rows as known at their time (a late correction committed after an entity row's time does
not leak), ``filter_by_created_timestamp``, everything committed as the store's explicit
opt-in, ``materialize`` (both of Feast's pull paths) and ``get_online_features`` after a
later correction, and writes refused. No mocks: the store reads through ``DatasetReader``.
"""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import polars as pl
import pytest
from core.helpers import frame

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import InvalidArgumentError, ReadOnlyDatasetError

if TYPE_CHECKING:
    from feast import FeatureStore

# Feast is imported where it is used: its import takes seconds (typeguard instruments its
# classes), and every pytest worker collects this module

SCHEMA = "driver_id long, rating double, trips long, _deleted boolean"


def now() -> datetime:
    return datetime.now(UTC)


def repo(folder: Path, offline: str = "", materialization: str = "") -> FeatureStore:
    """A feature repository in ``folder``, configured by its ``feature_store.yaml``."""
    from feast import FeatureStore

    folder.mkdir()
    (folder / "feature_store.yaml").write_text(
        textwrap.dedent(
            """\
            project: drivers
            registry: registry.db
            provider: local
            offline_store:
              type: revisions_assets.feast.RevisionsOfflineStore
            """
        )
        + offline
        + textwrap.dedent(
            """\
            online_store:
              type: sqlite
              path: online.db
            entity_key_serialization_version: 3
            """
        )
        + materialization
    )
    return FeatureStore(repo_path=str(folder))


def test_training_rows_as_known_then_and_the_online_store_after_a_late_correction(spark, tmp_path):
    from feast import Entity, FeatureView, Field
    from feast.types import Float64, Int64
    from feast.value_type import ValueType

    from revisions_assets.feast import RevisionsSource

    root = str(tmp_path / "drivers")
    ds = RevisionedDataset(root, spark=spark, id_columns=["driver_id"])

    def commit(rows, timestamp, is_major):
        ds.commit({"stats": frame(spark, rows, SCHEMA)}, timestamp, is_major=is_major)

    monday = now() - timedelta(hours=1)
    commit([(1, 4.5, 10, False), (2, 3.9, 20, False), (3, 4.8, 5, False)], monday, True)
    served = now()  # production scored driver 1 here, with 4.5
    commit([(1, 4.1, 10, False)], monday, False)  # a late correction of Monday
    commit([(3, None, None, True)], now(), False)  # driver 3 leaves
    after = now()

    driver = Entity(name="driver", join_keys=["driver_id"], value_type=ValueType.INT64)
    source = RevisionsSource(name="driver_stats_source", path=root, table="stats")
    stats = FeatureView(
        name="driver_stats",
        entities=[driver],
        schema=[Field(name="rating", dtype=Float64), Field(name="trips", dtype=Int64)],
        source=source,
        ttl=timedelta(0),
    )
    store = repo(tmp_path / "repo")
    store.apply([driver, stats])
    assert store.get_data_source("driver_stats_source") == source  # through the registry

    entity_rows = pd.DataFrame(
        {
            "driver_id": [1, 1, 2, 3, 9],
            "event_timestamp": [served, after, served, after, served],
            "label": [1, 0, 1, 1, 0],
        }
    )
    features = ["driver_stats:rating", "driver_stats:trips"]

    def ratings(**kwargs) -> list:
        df = store.get_historical_features(entity_df=entity_rows, features=features, **kwargs)
        out = df.to_df()
        assert out["label"].tolist() == [1, 0, 1, 1, 0]  # the entity rows' order
        return [None if pd.isna(v) else v for v in out["rating"]]

    leak_free = [4.5, 4.1, 3.9, None, None]  # what production knew at each row's time
    assert ratings() == leak_free
    assert ratings(filter_by_created_timestamp=True) == leak_free
    # the same rows as the notebook's join
    joined = DatasetReader(root).as_of_join(
        pl.from_pandas(entity_rows), "stats", event_time="event_timestamp", on=["driver_id"]
    )
    assert joined["rating"].to_list() == leak_free
    # everything committed is the store's explicit opt-in
    latest = repo(tmp_path / "latest", offline="  known_at: all_committed\n")
    latest.apply([driver, stats])
    out = latest.get_historical_features(entity_df=entity_rows, features=features).to_df()
    assert [None if pd.isna(v) else v for v in out["rating"]] == [4.1, 4.1, 3.9, None, None]
    full = store.get_historical_features(
        entity_df=entity_rows, features=features, full_feature_names=True
    ).to_df()
    assert "driver_stats__rating" in full.columns

    # materialize: the latest values, a deletion as none
    store.materialize(monday - timedelta(days=1), after)
    keys = [{"driver_id": 1}, {"driver_id": 2}, {"driver_id": 3}]
    online = store.get_online_features(features=features, entity_rows=keys).to_dict()
    assert online["rating"] == [4.1, 3.9, None]
    # a correction of Monday committed after the last materialization reaches the online
    # store with the next one (pulled by its commit time), on both of Feast's pull paths
    commit([(2, 3.5, 21, False)], monday, False)
    store.materialize_incremental(now())
    online = store.get_online_features(features=features, entity_rows=keys).to_dict()
    assert online["rating"] == [4.1, 3.5, None]
    pulled = repo(
        tmp_path / "pull_latest", materialization="materialization:\n  pull_latest_features: true\n"
    )
    pulled.apply([driver, stats])
    pulled.materialize(monday - timedelta(days=1), now())
    assert pulled.get_online_features(features=features, entity_rows=keys).to_dict() == online
    # and the training row at `served` still sees what production saw
    assert ratings()[0] == 4.5

    # the store never writes a revision
    with pytest.raises(ReadOnlyDatasetError, match="feature view 'driver_stats'.*producer"):
        store.write_to_offline_store(
            "driver_stats",
            pd.DataFrame(
                {
                    "driver_id": [1],
                    "rating": [1.0],
                    "trips": [1],
                    "valid_from": [now()],
                    "committed_at": [now()],
                }
            ),
        )
    with pytest.raises(InvalidArgumentError, match="entity rows as a pandas DataFrame"):
        store.get_historical_features(entity_df="select * from drivers", features=features)
