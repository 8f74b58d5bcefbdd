"""DatasetReader on an s3:// root (the loopback moto server): reads without a JVM, the
download cache, and credentials that never appear in what the reader says."""

from __future__ import annotations

import pytest
from core.helpers import frame
from harness.dates import day

from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import NotCachedError

pytestmark = pytest.mark.s3


def test_read_an_s3_root_through_the_cache(s3_spark, s3_options, s3_root_factory, tmp_path):
    root = s3_root_factory("reader")
    ds = RevisionedDataset(root, spark=s3_spark, id_columns=["id"], storage_options=s3_options)
    ds.commit({"t": frame(s3_spark, [(1, 10), (2, 20)], "id long, v long")}, day(0), True)
    ds.commit({"t": frame(s3_spark, [(2, 21), (3, 30)], "id long, v long")}, day(1), False)

    reader = DatasetReader(root, storage_options=s3_options)  # a temporary cache
    assert reader.read("t").sort("id").rows() == [(1, 10), (2, 21), (3, 30)]
    assert reader.changes("t", since_sequence=1).df.height == 2
    secret = s3_options["aws_secret_access_key"]
    assert secret not in repr(reader) and secret not in reader.root

    cache = tmp_path / "cache"
    online = DatasetReader(root, storage_options=s3_options, cache_dir=cache)
    assert online.read("t", as_of=day(0)).sort("id").rows() == [(1, 10), (2, 20)]
    offline = DatasetReader(root, cache_dir=cache, offline=True)  # no credentials needed
    assert offline.read("t", as_of=day(0)).height == 2
    with pytest.raises(NotCachedError) as missing:
        offline.read("t")
    assert secret not in str(missing.value)
    assert online.history("t").height == 4


def test_format_revisions_reads_an_s3_root(s3_spark, s3_options, s3_root_factory):
    """``format("revisions")`` on an ``s3://`` root: the storage options as ``storage.*``
    options, each task fetching its files into its worker's download cache; the secret in
    no plan Spark shows."""
    from revisions_assets.spark import register

    root = s3_root_factory("source")
    ds = RevisionedDataset(root, spark=s3_spark, id_columns=["id"], storage_options=s3_options)
    ds.commit({"t": frame(s3_spark, [(1, 10), (2, 20)], "id long, v long")}, day(0), True)
    ds.commit({"t": frame(s3_spark, [(2, 21), (3, 30)], "id long, v long")}, day(1), False)
    register(s3_spark)
    reader = s3_spark.read.format("revisions").option("table", "t")
    for name, value in s3_options.items():
        reader = reader.option(f"storage.{name}", value)
    df = reader.load(root).where("id >= 2")
    assert sorted(tuple(r) for r in df.collect()) == [(2, 21), (3, 30)]
    plan = df._jdf.queryExecution().toString()
    assert s3_options["aws_secret_access_key"] not in plan


def test_the_feast_store_reads_an_s3_root(s3_spark, s3_options, s3_root_factory, tmp_path):
    """``RevisionsOfflineStore`` on an ``s3://`` dataset: the store's storage options reach
    the reader, a retrieval is as known at each entity row's time, materialize fills the
    online store."""
    import pandas as pd
    from feast import Entity, FeatureStore, FeatureView, RepoConfig
    from feast.infra.online_stores.sqlite import SqliteOnlineStoreConfig
    from feast.value_type import ValueType

    from revisions_assets.feast import RevisionsOfflineStoreConfig, RevisionsSource

    root = s3_root_factory("feast")
    ds = RevisionedDataset(root, spark=s3_spark, id_columns=["id"], storage_options=s3_options)
    ds.commit({"t": frame(s3_spark, [(1, 10), (2, 20)], "id long, v long")}, day(0), True)
    seen = ds.revisions()[-1].committed_at
    ds.commit({"t": frame(s3_spark, [(1, 11)], "id long, v long")}, day(0), False)  # late fix
    config = RepoConfig(
        project="s3",
        provider="local",
        registry=str(tmp_path / "registry.db"),
        repo_path=tmp_path,
        offline_store=RevisionsOfflineStoreConfig(
            storage_options=s3_options, cache_dir=str(tmp_path / "cache")
        ),
        online_store=SqliteOnlineStoreConfig(path=str(tmp_path / "online.db")),
        entity_key_serialization_version=3,
    )
    store = FeatureStore(config=config)
    entity = Entity(name="id", join_keys=["id"], value_type=ValueType.INT64)
    view = FeatureView(
        name="t", entities=[entity], source=RevisionsSource(name="t", path=root, table="t")
    )
    store.apply([entity, view])
    rows = pd.DataFrame({"id": [1, 2], "event_timestamp": [seen, seen]})
    out = store.get_historical_features(entity_df=rows, features=["t:v"]).to_df()
    assert out["v"].tolist() == [10, 20]  # the correction came later
    store.materialize(day(-1), day(1))
    online = store.get_online_features(features=["t:v"], entity_rows=[{"id": 1}]).to_dict()
    assert online["v"] == [11]
    assert s3_options["aws_secret_access_key"] not in (
        tmp_path / "registry.db"
    ).read_bytes().decode("latin-1")
