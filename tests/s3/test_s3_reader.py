"""DatasetReader on an s3:// root (the loopback moto server): reads without a JVM, by byte
range without a cache, the download cache of whole files, and credentials that never appear
in what the reader says."""

from __future__ import annotations

import boto3
import polars as pl
import pytest
from core.helpers import frame
from harness.dates import day
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.s3_server import Request, Traffic
from revisions_assets import DatasetReader, RevisionedDataset
from revisions_assets.core.errors import MissingFileError, NotCachedError

from .conftest import BUCKET

pytestmark = pytest.mark.s3


def random_rows(spark: SparkSession, step: int, seed: int) -> DataFrame:
    """Ids ``range(0, 40_000, step)`` and 8 columns of random doubles drawn from ``seed``:
    files that do not compress, where a read of one column moves about a ninth of them."""
    ids = spark.range(0, 40_000, step)
    return ids.select("id", *[F.rand(seed * 8 + c).alias(f"c{c}") for c in range(8)])


def test_read_an_s3_root_by_ranges_and_through_the_cache(
    s3_spark, s3_options, s3_server, s3_root_factory, tmp_path
):
    """Without ``cache_dir`` a read fetches footers and column chunks, never a whole file: a
    1-column read moves well under the files' bytes, and reads give the rows of the local
    read (the cached copies). With ``cache_dir`` the cache keeps whole files, only those a
    read needs: fetched once, then read again and offline without a request for data."""
    root = s3_root_factory("reader")
    ds = RevisionedDataset(root, spark=s3_spark, id_columns=["id"], storage_options=s3_options)
    ds.commit({"t": random_rows(s3_spark, 1, seed=0)}, day(0), True)
    ds.commit({"t": random_rows(s3_spark, 100, seed=1)}, day(1), False)
    client = boto3.client("s3", **s3_options)
    prefix = root.split("/", 3)[3] + "/"
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]
    sizes = {o["Key"]: o["Size"] for o in listed if "/t/part-" in o["Key"]}  # the data files
    major_files = {prefix + f for f in ds.revisions("t")[0].tables["t"].files}

    def data_traffic(mark: int) -> tuple[Traffic, list[Request]]:
        requests = [r for r in s3_server.since(mark) if r.key in sizes]
        return Traffic.of(requests, lambda r: True), requests

    cache = tmp_path / "cache"
    mark = s3_server.mark()
    online = DatasetReader(root, storage_options=s3_options, cache_dir=cache)
    major = online.read("t", as_of=day(0)).sort("id")
    whole, _ = data_traffic(mark)
    assert whole.bytes == sum(sizes[f] for f in major_files)  # whole, not the minor's
    local = online.read("t").sort("id")
    assert data_traffic(mark)[0].bytes == sum(sizes.values())  # each file once

    mark = s3_server.mark()
    reader = DatasetReader(root, storage_options=s3_options)  # no cache: byte ranges
    one = reader.read("t", columns=["c0"])
    ranged, requests = data_traffic(mark)
    assert all(r.range for r in requests), "a data file was fetched whole"
    assert ranged.bytes < 0.5 * sum(sizes.values())
    assert one.sort("id").equals(local.select("id", "c0"))
    assert reader.changes("t", since_sequence=1).df.height == 400
    secret = s3_options["aws_secret_access_key"]
    assert secret not in repr(reader) and secret not in reader.root

    # a ready boto3 client lends its endpoint and credentials (dagster-aws's S3Resource's)
    by_client = DatasetReader(root, storage_options={"client": client})
    assert by_client.read("t").sort("id").equals(local)
    ids = pl.col("id").is_in([0, 100, 39_999])
    assert by_client.read("t", filter=ids).sort("id").equals(local.filter(ids))

    mark = s3_server.mark()
    again = DatasetReader(root, storage_options=s3_options, cache_dir=cache).read("t", filter=ids)
    assert data_traffic(mark)[0].gets == 0  # the cache holds every file of the read
    assert again.sort("id").equals(local.filter(ids))
    offline = DatasetReader(tmp_path / "elsewhere", cache_dir=cache, offline=True)
    assert offline.read("t").sort("id").equals(local)  # no credentials needed

    fresh = tmp_path / "fresh"
    DatasetReader(root, storage_options=s3_options, cache_dir=fresh).download("t", as_of=day(0))
    offline = DatasetReader(root, cache_dir=fresh, offline=True)
    assert offline.read("t", as_of=day(0)).sort("id").equals(major)
    with pytest.raises(NotCachedError) as missing:
        offline.read("t")
    assert secret not in str(missing.value)
    assert reader.history("t").height == 40_400

    gone = sorted(set(sizes) - major_files)[0]  # a file of the minor, deleted
    client.delete_object(Bucket=BUCKET, Key=gone)
    with pytest.raises(MissingFileError, match=gone.rsplit("/", 1)[1]) as damaged:
        DatasetReader(root, storage_options=s3_options).read("t", columns=["c0"])
    assert secret not in str(damaged.value)


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


#: every kind of column the ranged reader decodes from fetched chunks
WIDE = (
    "id string, n int, x double, d decimal(12,3), at timestamp, day date, "
    "tags array<string>, pair struct<a:int,b:string>, m map<string,int>"
)


def wide_rows(keys: range, scale: int) -> list[tuple]:
    from datetime import date, datetime, timezone
    from decimal import Decimal

    return [
        (
            f"k{k:05d}",
            k * scale,
            k / 7,
            Decimal(k) / 1000,
            datetime(2026, 1, 1, k % 24, tzinfo=timezone.utc),
            date(2026, 1, 1 + k % 28),
            [f"t{k % 3}"] * (k % 3),
            (k, f"b{k}") if k % 5 else None,
            [("k", k)] if k % 2 else [],
        )
        for k in keys
    ]


def test_ranged_reads_equal_reads_of_whole_files(
    s3_spark, s3_options, s3_server, s3_root_factory, tmp_path
):
    """Reads of an ``s3://`` root by byte range (footers from the file gate, column chunks
    decoded by Arrow) give what reads of the same files fetched whole give, for every kind
    of column, a deletion, projections, filters on ids and on other columns, time travel,
    changes, history and batches; a lookup of ids a minor lacks fetches that minor's id
    chunks, not its other columns."""
    root = s3_root_factory("ranged")
    ds = RevisionedDataset(root, spark=s3_spark, id_columns=["id"], storage_options=s3_options)
    ds.commit({"t": frame(s3_spark, wide_rows(range(0, 3000), 1), WIDE)}, day(0), True)
    minor = frame(s3_spark, wide_rows(range(1, 3000, 3), 2), WIDE)
    ds.commit({"t": minor}, day(1), False)
    gone = frame(s3_spark, wide_rows(range(5, 6), 3), WIDE).withColumn("_deleted", F.lit(True))
    ds.commit({"t": gone}, day(2), False)
    ranged = DatasetReader(root, storage_options=s3_options)
    whole = DatasetReader(root, storage_options=s3_options, cache_dir=tmp_path / "cache")

    wanted = pl.col("id").is_in(["k00001", "k00097", "k02999", "nope"])
    reads = [
        {},
        {"columns": ["x", "pair"]},
        {"filter": wanted},
        {"filter": pl.col("n") > 2900},
        {"filter": (pl.col("id") >= "k02990") & (pl.col("x") > 0)},
        {"as_of": day(0), "filter": wanted},
    ]
    for options in reads:
        got = ranged.read("t", **options).sort("id")
        assert got.equals(whole.read("t", **options).sort("id")), options
    assert ranged.read("t").height == 2999
    since = {"since_sequence": 1}
    assert (
        ranged.changes("t", **since).df.sort("id").equals(whole.changes("t", **since).df.sort("id"))
    )
    assert (
        ranged.history("t")
        .sort("id", "valid_from")
        .equals(whole.history("t").sort("id", "valid_from"))
    )
    streamed = pl.from_arrow(ranged.batches("t", batch_size=500).read_all())
    assert streamed.sort("id").equals(whole.read("t").sort("id"))

    client = boto3.client("s3", **s3_options)
    minor_files = ds.revisions("t")[1].tables["t"].files
    prefix = root.split("/", 3)[3] + "/"
    sizes = {
        prefix + f: client.head_object(Bucket=BUCKET, Key=prefix + f)["ContentLength"]
        for f in minor_files
    }
    mark = s3_server.mark()
    absent = pl.col("id").is_in(["k00002", "k01235"])  # ids of the major only
    fresh = DatasetReader(root, storage_options=s3_options)
    assert fresh.read("t", filter=absent).height == 2
    fetched = [r for r in s3_server.since(mark) if r.key in sizes]
    chunks = [r for r in fetched if not r.range.startswith("bytes=-")]  # not the footers
    read = {r.key for r in fetched}  # (the log's id ranges leave out a file of the minor)
    assert read and len(fetched) == 2 * len(read)  # a footer and the id chunk of each
    assert sum(r.bytes for r in chunks) < 0.25 * sum(sizes[k] for k in read)
