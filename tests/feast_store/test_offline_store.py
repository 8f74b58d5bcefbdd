"""Feast's real ``FeatureStore`` (local provider, sqlite online store) over a dataset the
engine wrote: ``feature_store.yaml`` naming ``RevisionsOfflineStore``, ``apply``, training
rows as known at their time (a late correction committed after an entity row's time does
not leak), ``filter_by_created_timestamp``, everything committed as the store's explicit
opt-in, ``materialize`` (both of Feast's pull paths) and ``get_online_features`` after a
later correction, and writes refused. Retrievals without entity rows and saved datasets
against Feast's own file offline store over the same rows as a Parquet file. No mocks: the
store reads through ``DatasetReader``.
"""

from __future__ import annotations

import textwrap
import warnings
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


def repo(
    folder: Path,
    offline: str = "",
    materialization: str = "",
    store: str = "revisions_assets.feast.RevisionsOfflineStore",
) -> FeatureStore:
    """A feature repository in ``folder``, configured by its ``feature_store.yaml``
    (``store``: the offline store's type, ``offline``: more of its settings)."""
    from feast import FeatureStore

    folder.mkdir(parents=True)
    (folder / "feature_store.yaml").write_text(
        textwrap.dedent(
            f"""\
            project: drivers
            registry: registry.db
            provider: local
            offline_store:
              type: {store}
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

    # the store never writes a revision; Feast checks the frame's columns against the source's
    # first, so a frame of other columns fails there (docs/guides/training-sets.md)
    ordinary = pd.DataFrame(
        {"driver_id": [1], "rating": [1.0], "trips": [1], "event_timestamp": [now()]}
    )
    with pytest.raises(
        ValueError, match=r"missing_expected_columns: \['committed_at', 'valid_from'\]"
    ):
        store.write_to_offline_store("driver_stats", ordinary)
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
    assert DatasetReader(root).inspect.log().height == 4  # nothing was written


FEATURES = ["driver_stats:rating", "driver_stats:trips"]


@pytest.fixture(scope="module")
def drivers(spark, tmp_path_factory):
    """A dataset of drivers as the engine wrote it, and the same rows as a Parquet file for
    Feast's file store (each revision's rows, its timestamp and commit time as the event
    and created timestamps; a deletion as a row of nulls): Monday's major, then (after
    ``served``) a late correction of driver 1 on Monday, driver 3 deleted, driver 4 new.
    """
    folder = tmp_path_factory.mktemp("drivers")
    root = str(folder / "drivers")
    ds = RevisionedDataset(root, spark=spark, id_columns=["driver_id"])

    def commit(rows, timestamp, is_major=False):
        ds.commit({"stats": frame(spark, rows, SCHEMA)}, timestamp, is_major=is_major)

    monday = now() - timedelta(hours=1)
    commit([(1, 4.5, 10, False), (2, 3.9, 20, False), (3, 4.8, 5, False)], monday, True)
    served = now()
    commit([(1, 4.1, 10, False)], monday)
    commit([(3, None, None, True)], now())
    commit([(4, 2.0, 1, False)], now())
    reader = DatasetReader(root)
    parts = [
        reader.changes("stats", since_sequence=r.sequence - 1, until_sequence=r.sequence)
        .df.select("driver_id", "rating", "trips")
        .with_columns(
            pl.lit(r.timestamp).alias("event_timestamp"), pl.lit(r.committed_at).alias("created")
        )
        for r in reader.revisions("stats")
    ]
    export = folder / "drivers.parquet"
    pl.concat(parts).write_parquet(export)
    return {"root": root, "export": str(export), "served": served, "after": now()}


def stores(drivers, folder: Path, ttl: timedelta = timedelta(0)) -> dict[str, FeatureStore]:
    """Feature stores in ``folder`` with the view ``driver_stats`` (``ttl``): ours (as
    known then, and everything committed) over the dataset, Feast's file store over the
    export."""
    from feast import Entity, FeatureView, Field, FileSource
    from feast.types import Float64, Int64
    from feast.value_type import ValueType

    from revisions_assets.feast import RevisionsSource

    driver = Entity(name="driver", join_keys=["driver_id"], value_type=ValueType.INT64)
    sources = {
        "ours": RevisionsSource(name="stats", path=drivers["root"], table="stats"),
        "file": FileSource(
            name="stats",
            path=drivers["export"],
            timestamp_field="event_timestamp",
            created_timestamp_column="created",
        ),
    }
    out = {
        "ours": repo(folder / "ours"),
        "ours_all": repo(folder / "ours_all", offline="  known_at: all_committed\n"),
        "file": repo(folder / "file", store="file"),
    }
    for name, store in out.items():
        schema = [Field(name="rating", dtype=Float64), Field(name="trips", dtype=Int64)]
        source = sources["file" if name == "file" else "ours"]
        view = FeatureView(
            name="driver_stats", entities=[driver], schema=schema, source=source, ttl=ttl
        )
        store.apply([driver, view])
    return out


def rows(out: pd.DataFrame) -> list[tuple]:
    """A retrieval's rows, sorted, nulls as None; a row whose features are all null (what
    Feast's file store returns for an entity whose last row is a deletion) left out."""
    kept = out[out[["rating", "trips"]].notna().any(axis=1)]
    return sorted(
        tuple(None if pd.isna(v) else v for v in row)
        for row in kept.itertuples(index=False, name=None)
    )


def test_without_entity_rows_the_rows_of_feasts_file_store_as_known_then(drivers, tmp_path):
    """``get_historical_features(features, start_date, end_date)``: what Feast's file store
    returns (an entity per row at ``end_date``, its features as of then), as known at
    ``end_date`` (the file store's ``filter_by_created_timestamp=True``) by default, with
    everything committed as the opt-in (the file store's default); ``ttl`` leaves out the
    entities whose row is older, as the file store does."""
    by = stores(drivers, tmp_path / "zero")

    def get(name: str, end: datetime, store_by=by, **options) -> pd.DataFrame:
        start = end - timedelta(days=1)
        job = store_by[name].get_historical_features(
            features=FEATURES, start_date=start, end_date=end, **options
        )
        out = job.to_df()
        assert list(out.columns) == ["event_timestamp", "driver_id", "rating", "trips"]
        assert (out["event_timestamp"] == end).all()
        return out

    for end in (drivers["served"], drivers["after"]):
        known_then = get("file", end, filter_by_created_timestamp=True)
        assert rows(get("ours", end)) == rows(known_then)
        assert rows(get("ours", end, filter_by_created_timestamp=True)) == rows(known_then)
        assert rows(get("ours_all", end)) == rows(get("file", end))
    # at `served`, the correction committed later leaks into the file store's default
    assert [r[2] for r in rows(get("ours", drivers["served"]))] == [4.5, 3.9, 4.8]
    assert [r[2] for r in rows(get("ours_all", drivers["served"]))] == [4.1, 3.9, 4.8]
    # driver 3, deleted, has no row (the file store gives its deletion row, of nulls)
    assert get("ours", drivers["after"])["driver_id"].tolist() == [1, 2, 4]
    # before the first major was committed: no entity
    assert get("ours", drivers["served"] - timedelta(hours=2)).empty

    fresh = stores(drivers, tmp_path / "ttl", ttl=timedelta(minutes=30))
    recent = get("ours", drivers["after"], fresh)
    assert rows(recent) == rows(get("file", drivers["after"], fresh))
    assert recent["driver_id"].tolist() == [4]  # Monday's rows are older than the ttl


def test_a_saved_training_set_reads_back_as_feasts_file_store_reads_it(drivers, tmp_path):
    """``create_saved_dataset`` writes the retrieval to a Parquet file (a relative path in
    the feature repository, as Feast's file store puts it) and ``get_saved_dataset`` reads
    it back: the same rows and columns as the file store's saved dataset of the same
    retrieval. Entity rows without a time zone are read as UTC. No other file is read."""
    from feast import FileSource
    from feast.infra.offline_stores.file_source import SavedDatasetFileStorage

    from revisions_assets.feast import RevisionsOfflineStore

    # after Feast's import, whose filters would show them once (pytest restores the filters)
    warnings.filterwarnings("ignore", ".* is an experimental feature", RuntimeWarning)
    by = stores(drivers, tmp_path)
    served = drivers["served"].replace(tzinfo=None)  # naive: UTC
    entity_rows = pd.DataFrame(
        {"driver_id": [1, 2, 9], "event_timestamp": [served] * 3, "label": [1, 0, 1]}
    )

    def saved(name: str, **options) -> pd.DataFrame:
        store = by[name]
        job = store.get_historical_features(entity_df=entity_rows, features=FEATURES, **options)
        storage = SavedDatasetFileStorage(path="training.parquet")
        store.create_saved_dataset(from_=job, name="training", storage=storage)
        assert (Path(store.repo_path) / "training.parquet").is_file()
        out = store.get_saved_dataset("training").to_df()
        return out[sorted(out.columns)].sort_values("driver_id", ignore_index=True)

    ours = saved("ours")
    assert ours["rating"].tolist()[:2] == [4.5, 3.9]  # as known at the rows' time
    pd.testing.assert_frame_equal(
        ours, saved("file", filter_by_created_timestamp=True), check_dtype=False
    )
    # a retrieval without entity rows keeps its join keys when saved
    job = by["ours"].get_historical_features(features=FEATURES, end_date=drivers["after"])
    storage = SavedDatasetFileStorage(path="saved/snapshot.parquet")
    by["ours"].create_saved_dataset(from_=job, name="snapshot", storage=storage)
    back = by["ours"].get_saved_dataset("snapshot").to_df()
    pd.testing.assert_frame_equal(back[job.to_df().columns], job.to_df())
    with pytest.raises(InvalidArgumentError, match="exists; pass allow_overwrite=True"):
        by["ours"].create_saved_dataset(from_=job, name="again", storage=storage)

    # a file source of a feature view is still refused, on every path
    source = FileSource(name="f", path=drivers["export"], timestamp_field="event_timestamp")
    config = by["ours"].config
    pull = (config, source, ["driver_id"], ["rating"], "event_timestamp", None)
    for job in (
        RevisionsOfflineStore.pull_all_from_table_or_query(*pull),
        RevisionsOfflineStore.pull_latest_from_table_or_query(*pull),
    ):
        with pytest.raises(InvalidArgumentError, match="reads RevisionsSource tables only"):
            job.to_df()
