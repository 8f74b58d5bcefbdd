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
