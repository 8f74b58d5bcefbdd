"""Refusals from a real S3 endpoint give clear errors that never carry credentials.

The 403s come from a second moto server (its own process) with authorization switched
on after set-up: an IAM user without permissions gets AccessDenied, a read-only user can
open a dataset but not commit to it, an unknown key is rejected.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from test_log import record

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import StorageError
from revisions_assets.core.log.revision_log import RevisionLog
from revisions_assets.core.storage.backends import open_storage
from revisions_assets.core.storage.s3 import S3Storage
from revisions_assets.s3a import s3a_conf

from .conftest import free_port

pytestmark = pytest.mark.s3

LOCKED = "locked-bucket"
READ_ONLY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": "*"}
    ],
}


@pytest.fixture(scope="module")
def locked() -> Iterator[dict[str, dict[str, str]]]:
    """A moto server enforcing IAM: options for a user without rights and a read-only user."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "moto_server down"
                time.sleep(0.1)
        admin = {
            "endpoint_url": endpoint,
            "region_name": "us-east-1",
            "aws_access_key_id": "AKIAADMINSETUPONLY00",
            "aws_secret_access_key": "admin-secret",
        }
        boto3.client("s3", **admin).create_bucket(Bucket=LOCKED)
        iam = boto3.client("iam", **admin)
        users = {}
        for user in ("nobody", "reader"):
            iam.create_user(UserName=user)
            key = iam.create_access_key(UserName=user)["AccessKey"]
            users[user] = {
                "endpoint_url": endpoint,
                "region_name": "us-east-1",
                "aws_access_key_id": key["AccessKeyId"],
                "aws_secret_access_key": key["SecretAccessKey"],
            }
        iam.put_user_policy(
            UserName="reader", PolicyName="read-only", PolicyDocument=json.dumps(READ_ONLY)
        )
        users["unknown"] = {**users["nobody"], "aws_access_key_id": "AKIANOSUCHKEY0000000"}
        enable = urllib.request.Request(
            f"{endpoint}/moto-api/reset-auth",
            data=b"0",  # authorize every request from now on
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        urllib.request.urlopen(enable, timeout=10)
        yield users
    finally:
        server.terminate()
        server.wait(timeout=30)


def assert_no_credentials(message: str, *option_sets: dict[str, str]) -> None:
    for options in option_sets:
        assert options["aws_secret_access_key"] not in message
        assert options["aws_access_key_id"] not in message


def test_a_user_without_rights_gets_access_denied_naming_bucket_and_key(locked):
    storage = S3Storage(f"s3://{LOCKED}/sales", **locked["nobody"])
    with pytest.raises(StorageError) as caught:
        storage.read("_log/00000000000000000001.json")
    message = str(caught.value)
    assert f"s3://{LOCKED}/sales/_log/00000000000000000001.json" in message
    assert "access denied (AccessDenied)" in message and repr(LOCKED) in message
    assert_no_credentials(message, locked["nobody"])
    assert storage.retries == 0  # a refusal is not retried


def test_opening_a_dataset_without_rights_fails_clearly(locked, s3_spark):
    with pytest.raises(StorageError, match=f"s3://{LOCKED}/sales/.*access denied") as caught:
        RevisionedDataset(f"s3://{LOCKED}/sales", spark=s3_spark, storage_options=locked["nobody"])
    assert_no_credentials(str(caught.value), locked["nobody"])


def test_read_only_credentials_can_read_but_not_commit(locked):
    storage = open_storage(f"s3://{LOCKED}/scores", **locked["reader"])
    log = RevisionLog(storage)
    assert log.refresh() == ()  # reading (an empty log) is allowed
    with pytest.raises(StorageError) as caught:
        log.try_append(record(1))
    message = str(caught.value)
    # refused at the first write of the commit (the once-per-bucket conditional-write probe)
    assert message.startswith(f"PutObject s3://{LOCKED}/scores/_log/")
    assert "access denied (AccessDenied)" in message
    assert_no_credentials(message, locked["reader"])
    assert storage.list_files("_log") == []


def test_an_unknown_access_key_is_reported_as_rejected_credentials(locked):
    storage = S3Storage(f"s3://{LOCKED}/sales", **locked["unknown"])
    with pytest.raises(
        StorageError, match="rejected the credentials \\(InvalidAccessKeyId\\)"
    ) as c:
        storage.list_files("")
    assert_no_credentials(str(c.value), locked["unknown"])


def test_a_missing_bucket_is_named(s3_options):
    with pytest.raises(StorageError, match="bucket 'no-such-bucket' does not exist") as caught:
        S3Storage("s3://no-such-bucket/x", **s3_options).create_exclusive("_log/a.json", b"{}")
    assert_no_credentials(str(caught.value), s3_options)


def test_a_store_ignoring_conditional_writes_is_refused(s3_options):
    """A store that drops If-None-Match would let two commits overwrite each other."""
    boto3.client("s3", **s3_options).create_bucket(Bucket="ignores-conditions")
    storage = S3Storage("s3://ignores-conditions/sales", **s3_options)

    def drop_condition(request, **_kwargs):
        if "If-None-Match" in request.headers:
            del request.headers["If-None-Match"]

    storage.client.meta.events.register("before-sign.s3.PutObject", drop_condition)
    with pytest.raises(StorageError, match="ignores conditional writes .*'ignores-conditions'"):
        RevisionLog(storage).try_append(record(1))
    assert storage.list_files("_log") == []  # the probe cleaned up; no entry was written


def test_credentials_never_reach_the_log_or_reprs(s3_spark, s3_root, s3_options, caplog):
    from core.helpers import frame
    from harness.dates import day

    caplog.set_level(logging.DEBUG, logger="revisions_assets")
    ds = RevisionedDataset(s3_root, spark=s3_spark, id_columns=["id"], storage_options=s3_options)
    ds.commit({"t": frame(s3_spark, [(1, 1)], "id long, v long")}, timestamp=day(0), is_major=True)
    empty = frame(s3_spark, [], "id long, v long")
    assert ds.commit({"t": empty}, timestamp=day(1), is_major=False) is None  # logged: no rows
    ours = [r for r in caplog.records if r.name.startswith("revisions_assets")]
    assert any(s3_root in r.getMessage() for r in ours)  # the root is logged, without secrets
    assert_no_credentials("\n".join(r.getMessage() for r in ours), s3_options)
    storage = ds.storage
    for info in storage.list_files(""):
        blob = storage.read(info.path)
        for secret in (s3_options["aws_secret_access_key"], s3_options["aws_access_key_id"]):
            assert secret.encode() not in blob, f"credential stored in {info.path}"
    shown = " ".join([repr(ds), repr(storage), repr(s3a_conf(**s3_options, jars="none"))])
    assert_no_credentials(shown, s3_options)
    assert_no_credentials(ds.inspect.log().to_json(), s3_options)
    assert os.environ.get("AWS_SECRET_ACCESS_KEY") != s3_options["aws_secret_access_key"]
