"""The engine's semantic tests, re-run with the dataset root on S3 (moto on loopback).

The test functions are the ones of tests/core, imported as they are: here their
fixtures give an ``s3://`` root, and a SparkSession whose ``s3a`` connector reaches the
loopback server. Data goes through Spark's s3a, the log through boto3 conditional writes.
"""

from __future__ import annotations

import io

import pandas as pd
import pytest
from core.helpers import frame
from core.test_reads import test_tombstones  # noqa: F401  (collected here, S3 fixtures)
from core.test_worked_example import (  # noqa: F401
    EXAMPLE,
    test_as_of_day_2,
    test_as_of_day_4,
    test_changes_not_a_reset,
    test_changes_reset,
    test_latest_state,
    test_positional_reads,
    test_rows_name_their_revision,
)
from harness.dates import day

from revisions_assets import RevisionedDataset
from revisions_assets.core.storage.backends import open_storage

pytestmark = pytest.mark.s3


@pytest.fixture
def spark(s3_spark):
    return s3_spark


@pytest.fixture
def root(s3_root):
    """An S3 root; RevisionedDataset finds the endpoint in the standard AWS variables."""
    return s3_root


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch, s3_options):
    """The tests of tests/core open datasets by root alone: configure boto3 like a user would."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_options["endpoint_url"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_options["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_options["aws_secret_access_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", s3_options["region_name"])


@pytest.fixture(scope="module")
def ds(s3_spark, s3_options, s3_root_factory):
    """The docs/concepts/read-semantics.md worked example, committed to S3."""
    root = s3_root_factory("worked")
    dataset = RevisionedDataset(root, spark=s3_spark, id_columns=["id"], storage_options=s3_options)
    for name, d, major, ids in EXAMPLE:
        rows = [(i, d) for i in ids]
        dataset.commit(
            {"t": frame(s3_spark, rows, "id long, day int")},
            timestamp=day(d),
            is_major=major,
            version="v1",
            name=name,
        )
    return dataset


def test_layout_on_s3(ds, s3_options):
    """Data under <revision>/<table>/, one log entry per commit, description.parquet current."""
    storage = open_storage(ds.root, **s3_options)
    paths = [f.path for f in storage.list_files("")]
    assert [p for p in paths if p.startswith("_log/") and p.endswith(".json")] == [
        f"_log/{seq:020d}.json" for seq in range(1, 5)
    ]
    data = [p for p in paths if p.endswith(".parquet") and not p.startswith("_log/")]
    assert {p.split("/")[0] for p in data} == {"r0", "r2", "r4", "r6", "description.parquet"}
    assert all(p.split("/")[1] == "t" for p in data if p != "description.parquet")
    desc = pd.read_parquet(io.BytesIO(storage.read("description.parquet")))
    assert list(desc["name"]) == ["r0", "r2", "r4", "r6"]
    assert list(desc["is_major"]) == [True, False, True, False]
    files = {f for r in ds.revisions() for w in r.tables.values() for f in w.files}
    assert files == {p for p in data if p != "description.parquet"}
    assert all(uri.startswith("s3a://revisions-tests/") for uri in ds.read("t").inputFiles())
