"""The Dagster DatasetLocation hands its dagster-aws S3 resource to every dataset under it."""

from __future__ import annotations

import pytest
from dagster_aws.s3 import S3Resource

from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage
from revisions_assets.dagster import DatasetLocation

from .conftest import BUCKET

pytestmark = pytest.mark.s3


def test_location_registers_its_s3_resource_for_roots_below_it(s3_options):
    base = f"s3://{BUCKET}/location-test"
    location = DatasetLocation(base_uri=base, s3=S3Resource(**s3_options))
    location.configure_access()
    storage = open_storage(location.root_for("planes"))
    assert storage.client.meta.endpoint_url == s3_options["endpoint_url"]
    assert RevisionLog(storage).refresh() == ()  # reaches the loopback server
    assert storage.create_exclusive("_log/probe.json", b"{}")
    assert storage.read("_log/probe.json") == b"{}"
    # the s3a spelling of the same root resolves to the same configuration
    s3a = open_storage(location.root_for("planes").replace("s3://", "s3a://"))
    assert s3a.client.meta.endpoint_url == s3_options["endpoint_url"]
