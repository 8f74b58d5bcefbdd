"""Transient S3 failures on log writes: retried with backoff, never a duplicate or lost revision.

Faults are injected deterministically on the real client talking to the loopback server
(tests/s3/faults.py), including the ambiguous one: the conditional PUT of a log entry
reaches the server and is stored, but the response is lost.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from core.helpers import frame
from harness.dates import day
from test_log import record

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import StorageError
from revisions_assets.core.log.revision_log import LOG_DIR, RevisionLog, entry_path
from revisions_assets.core.storage.s3 import S3Storage

from .faults import FaultPlan, conditional

pytestmark = pytest.mark.s3


@pytest.fixture
def storage(s3_root, s3_options) -> S3Storage:
    return S3Storage(s3_root, base_delay=0.01, **s3_options)


def entries(s3_root, s3_options) -> list[str]:
    """The log entries stored, seen through a fault-free client."""
    clean = S3Storage(s3_root, **s3_options)
    return [f.path for f in clean.list_files(LOG_DIR) if f.path.endswith(".json")]


def fresh_log(s3_root, s3_options) -> RevisionLog:
    log = RevisionLog(S3Storage(s3_root, **s3_options))
    log.refresh()
    return log


@pytest.mark.parametrize(
    "plan",
    [
        ["slowdown", "slowdown", "slowdown"],  # throttled, nothing stored until the 4th try
        ["lost"],  # stored, response lost: the retry's 412 must be recognized as ours
        ["lost-500", "slowdown"],  # stored, answered 500; then throttled; then 412
        ["slowdown", "lost", "slowdown", "slowdown"],
    ],
)
def test_a_log_write_survives_transient_failures_exactly_once(storage, s3_root, s3_options, plan):
    faults = FaultPlan(storage.client, "PutObject", plan, match=conditional)
    log = RevisionLog(storage)
    log.refresh()
    assert log.try_append(record(1)) is True
    assert faults.seen == plan + ["pass"]
    assert storage.retries == len(plan)
    assert log.try_append(record(2)) is True  # the next commit lands right after, no gap
    assert entries(s3_root, s3_options) == [entry_path(1), entry_path(2)]
    assert [r.name for r in fresh_log(s3_root, s3_options).records] == ["rev1", "rev2"]


def test_a_rival_entry_after_a_failed_attempt_is_a_conflict_not_a_success(
    storage, s3_root, s3_options
):
    """Our attempt fails (nothing stored) while another writer takes the sequence: the retry
    sees 412 with someone else's bytes, so the log layer must report a conflict."""
    rival_storage = S3Storage(s3_root, **s3_options)
    rival = record(1, name="rival")
    FaultPlan(
        storage.client,
        "PutObject",
        ["rival"],
        match=conditional,
        rival=lambda _request: rival_storage.create_exclusive(
            entry_path(1), rival.to_json().encode()
        ),
    )
    log = RevisionLog(storage)
    log.refresh()
    assert log.try_append(record(1, name="ours")) is False
    log.refresh()
    assert log.try_append(dataclasses.replace(record(2, name="ours"))) is True
    assert [r.name for r in fresh_log(s3_root, s3_options).records] == ["rival", "ours"]


def test_retries_run_out_with_a_clear_error_and_nothing_stored(s3_root, s3_options):
    storage = S3Storage(s3_root, max_attempts=4, base_delay=0.01, **s3_options)
    FaultPlan(storage.client, "PutObject", ["slowdown"] * 4, match=conditional)
    log = RevisionLog(storage)
    log.refresh()
    with pytest.raises(StorageError) as caught:
        log.try_append(record(1))
    message = str(caught.value)
    assert entry_path(1) in message and "after 4 attempts" in message and "SlowDown" in message
    assert s3_options["aws_secret_access_key"] not in message
    assert s3_options["aws_access_key_id"] not in message
    assert storage.retries == 3
    assert entries(s3_root, s3_options) == []


def test_retries_run_out_after_our_write_landed_still_count_it_once(s3_root, s3_options):
    storage = S3Storage(s3_root, max_attempts=3, base_delay=0.01, **s3_options)
    FaultPlan(storage.client, "PutObject", ["lost", "slowdown", "slowdown"], match=conditional)
    log = RevisionLog(storage)
    log.refresh()
    assert log.try_append(record(1)) is True
    assert entries(s3_root, s3_options) == [entry_path(1)]


def test_throttled_reads_are_retried(storage, s3_root, s3_options):
    RevisionLog(S3Storage(s3_root, **s3_options)).try_append(record(1))
    faults = FaultPlan(storage.client, "GetObject", ["slowdown", "slowdown", "pass", "slowdown"])
    log = RevisionLog(storage)
    assert [r.name for r in log.refresh()] == ["rev1"]
    assert faults.seen[:4] == ["slowdown", "slowdown", "pass", "slowdown"]
    assert storage.retries == 3


def test_engine_commit_under_faults_commits_each_revision_once(s3_spark, s3_root, s3_options):
    """Through the engine: a lost response on the commit, throttling on the description."""
    ds = RevisionedDataset(s3_root, spark=s3_spark, id_columns=["id"], storage_options=s3_options)
    ds.storage.base_delay = 0.01
    ds.commit({"t": frame(s3_spark, [(1, 1)], "id long, v long")}, timestamp=day(0), is_major=True)
    commit_faults = FaultPlan(
        ds.storage.client, "PutObject", ["lost", "slowdown"], match=conditional
    )
    description_faults = FaultPlan(
        ds.storage.client,
        "PutObject",
        ["slowdown", "slowdown"],
        match=lambda request: request.url.split("?")[0].endswith("/description.parquet"),
    )
    started = datetime.now(UTC)
    rev = ds.commit(
        {"t": frame(s3_spark, [(2, 2)], "id long, v long")},
        timestamp=day(1),
        is_major=False,
        name="under-faults",
    )
    finished = datetime.now(UTC)
    assert rev.sequence == 2
    assert commit_faults.seen[:2] == ["lost", "slowdown"]
    assert description_faults.seen[:2] == ["slowdown", "slowdown"]
    reopened = RevisionedDataset(s3_root, spark=s3_spark, storage_options=s3_options)
    assert [r.sequence for r in reopened.revisions()] == [1, 2]
    assert reopened.revision(2).name == "under-faults"
    assert list(reopened.inspect.log()["sequence"]) == [1, 2]  # description.parquet is current
    assert {r.id: r.v for r in reopened.read("t").collect()} == {1: 1, 2: 2}
    assert started <= rev.committed_at <= finished  # stamped by this commit, not copied


def test_a_dagster_aws_client_with_its_own_retries_still_commits_once(s3_root, s3_options):
    """A client from dagster-aws's S3Resource retries inside botocore, unseen by us: a lost
    response is retried there, answered 412, and resolved by reading our bytes back."""
    from dagster_aws.s3 import S3Resource

    client = S3Resource(**s3_options, max_attempts=3).get_client()
    storage = S3Storage(s3_root, client=client, base_delay=0.01)
    faults = FaultPlan(client, "PutObject", ["lost", "slowdown"], match=conditional)
    log = RevisionLog(storage)
    log.refresh()
    assert log.try_append(record(1)) is True
    assert faults.seen == ["lost", "slowdown", "pass"]  # all three inside botocore
    assert storage.retries == 0
    assert log.try_append(record(2)) is True
    assert [r.name for r in fresh_log(s3_root, s3_options).records] == ["rev1", "rev2"]
