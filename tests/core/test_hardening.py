"""Hardening without Spark jobs: credentials never shown, paths confined to the root,
temporary files removed on failure, the all-digit name rule, log health on open, and what
verify() reports for the leftovers of failed writers."""

from __future__ import annotations

import errno
import json
import os
import re
import traceback
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from revisions_assets import RevisionedDataset
from revisions_assets.core.errors import (
    CorruptLogError,
    PathEscapeError,
    RevisionsError,
    StorageError,
    StorageOptionsError,
)
from revisions_assets.core.log.health import check_log_health
from revisions_assets.core.log.layout import CLAIM_FILE, DESCRIPTION, LAST_CHECKPOINT, LOG_MARKER
from revisions_assets.core.log.revision_log import RevisionLog, entry_path
from revisions_assets.core.maintain.verify import KINDS, verify
from revisions_assets.core.read.plan.refs import resolve_position
from revisions_assets.core.storage import base as storage_module
from revisions_assets.core.storage.backends import configure_storage, open_storage
from revisions_assets.core.storage.base import LocalStorage, check_relative
from revisions_assets.core.uris import redact

from .damage import TABLE, copy_dataset, snapshot

SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCY"
KEY_ID = "AKIAIOSFODNN7EXAMPLE"
RECOVERY = Path(__file__).resolve().parents[2] / "docs" / "guides" / "operating" / "recovering.md"


def full_text(error: BaseException) -> str:
    """Everything a traceback would print, the chained causes included."""
    return "".join(traceback.format_exception(error)) + repr(error)


# -- credentials ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, shown",
    [
        (f"s3://{KEY_ID}:{SECRET}@bucket/p", "s3://***@bucket/p"),
        (f"s3a://{KEY_ID}:{SECRET}@bucket", "s3a://***@bucket"),
        (f"read s3://{KEY_ID}@bucket/x failed", "read s3://***@bucket/x failed"),
        (f"http://user:{SECRET}@minio:9000/b", "http://***@minio:9000/b"),
        ("s3://bucket/a:b@c/part.parquet", "s3://bucket/a:b@c/part.parquet"),  # a plain key
        ("/data/features", "/data/features"),
    ],
)
def test_redact_masks_the_user_info_of_uris(text, shown):
    assert redact(text) == shown


@pytest.mark.parametrize(
    "open_it",
    [
        lambda uri: open_storage(uri),
        lambda uri: RevisionedDataset(uri),
        lambda uri: configure_storage(uri, region_name="x"),
        lambda uri: verify(uri),
        lambda uri: RevisionedDataset(f"/tmp/{uri}"),  # as a path: an invalid folder name
    ],
)
def test_roots_with_credentials_are_refused_without_showing_them(open_it):
    with pytest.raises(StorageOptionsError) as caught:
        open_it(f"s3://{KEY_ID}:{SECRET}@bucket/prefix")
    assert "***" in str(caught.value)
    assert SECRET not in full_text(caught.value) and KEY_ID not in full_text(caught.value)


def test_credentials_given_as_options_appear_nowhere():
    storage = open_storage(
        "s3://bucket/prefix",
        endpoint_url="http://127.0.0.1:9",  # nothing listens: connection refused
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        max_attempts=1,
    )
    assert storage.uri == "s3://bucket/prefix"
    assert SECRET not in repr(storage) and KEY_ID not in repr(storage)
    with pytest.raises(StorageError) as caught:
        storage.read("_log/_last_checkpoint")
    assert "s3://bucket/prefix/_log/_last_checkpoint" in str(caught.value)
    assert SECRET not in str(caught.value) and KEY_ID not in str(caught.value)
    numeric_secret = 12345678
    with pytest.raises(StorageOptionsError) as wrong:
        open_storage("s3://bucket/prefix", aws_secret_access_key=numeric_secret)
    assert "12345678" not in full_text(wrong.value)


def test_a_pasted_uri_in_an_argument_is_masked_in_the_error(template, tmp_path):
    ds = RevisionedDataset(str(copy_dataset(template, tmp_path / "ds")))
    pasted = f"s3://{KEY_ID}:{SECRET}@bucket/p"
    for attempt in (
        lambda: ds.revision(pasted),
        lambda: ds.changes(TABLE, since=pasted),
        lambda: ds.revisions(table=[pasted]),
    ):
        with pytest.raises(RevisionsError) as caught:
            attempt()
        assert SECRET not in str(caught.value) and KEY_ID not in str(caught.value)
    assert SECRET not in repr(ds)


# -- paths stay inside the root ---------------------------------------------------------------


@pytest.mark.parametrize("rel", ["../x", "/etc/passwd", "a/../../b", "a\\b", "c:/x", "a/..", "\0"])
def test_paths_that_leave_the_root_are_refused(rel):
    with pytest.raises(PathEscapeError):
        check_relative(rel)


@pytest.mark.parametrize("rel", ["", "a", "a/b/c.parquet", "_log/00000000000000000001.json"])
def test_paths_inside_the_root_are_kept(rel):
    assert check_relative(rel) == rel


@pytest.fixture
def linked(tmp_path):
    """A root whose folder ``out`` links outside and ``in`` links to a folder inside."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.json").write_text("{}")
    (root / "out").symlink_to(outside)
    (root / "in").symlink_to(root / "real")
    return LocalStorage(root), outside


@pytest.mark.parametrize(
    "operation",
    [
        lambda s: s.read("out/secret.json"),
        lambda s: s.write("out/new.json", b"x"),
        lambda s: s.create_exclusive("out/_claimed", b"x"),
        lambda s: s.exists("out/secret.json"),
        lambda s: s.list_files("out"),
        lambda s: s.list_names("out"),
        lambda s: s.spark_uri("out/part-0.parquet"),
        lambda s: s.check_inside("out"),
    ],
)
def test_a_symlink_out_of_the_root_is_never_followed(linked, operation):
    storage, outside = linked
    before = snapshot(outside)
    with pytest.raises(PathEscapeError, match=r"'out.*symbolic link"):
        operation(storage)
    assert snapshot(outside) == before


def test_a_symlink_inside_the_root_is_fine(linked):
    storage, _ = linked
    storage.write("in/x.json", b"1")
    assert storage.read("in/x.json") == b"1" and storage.read("real/x.json") == b"1"


def test_deleting_a_linked_folder_removes_the_link_only(linked):
    storage, outside = linked
    (storage.base / "in2").symlink_to(storage.base / "real")
    storage.write("real/keep.json", b"1")
    storage.delete_tree("in2")
    assert not (storage.base / "in2").exists() and storage.read("real/keep.json") == b"1"
    assert (outside / "secret.json").exists()


# -- temporary files of failures --------------------------------------------------------------


def test_a_failed_write_leaves_no_temporary_file_nor_folder(tmp_path, monkeypatch):
    storage = LocalStorage(tmp_path / "root")

    def disk_full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(storage_module.os, "fsync", disk_full)
    for attempt in (
        lambda: storage.create_exclusive("rev/_claimed", b"token"),
        lambda: storage.write("_log/_last_checkpoint", b"{}"),
    ):
        with pytest.raises(StorageError, match=r"No space left on device.*errno 28"):
            attempt()
    assert not (tmp_path / "root").exists() or snapshot(tmp_path / "root") == {}


# -- positions: names and numbers never collide --------------------------------------------------


def test_an_all_digit_string_is_the_sequence(template, tmp_path):
    ds = RevisionedDataset(str(copy_dataset(template, tmp_path / "ds")))
    records = ds.revisions()
    assert [resolve_position(records, TABLE, at) for at in (2, "2", "r2")] == [2, 2, 2]


def test_an_old_all_digit_name_still_reads_by_name(template, tmp_path):
    """Logs written before the rule may hold such names: a name wins, as it always did."""
    root = copy_dataset(template, tmp_path / "ds")
    path = root / entry_path(1)
    path.write_text(path.read_text().replace('"name":"r1"', '"name":"3"'))
    ds = RevisionedDataset(str(root))
    assert resolve_position(ds.revisions(), TABLE, "3") == 1


# -- log health ---------------------------------------------------------------------------------


def test_entries_committed_while_opening_are_not_a_gap(template, tmp_path):
    storage = LocalStorage(copy_dataset(template, tmp_path / "ds"))
    for head in range(4):
        check_log_health(storage, head)  # 1..3 exist beyond: a writer was committing


def test_a_first_commit_in_progress_is_not_a_lost_log(tmp_path):
    root = tmp_path / "ds"
    storage = LocalStorage(root)
    storage.write(LOG_MARKER, b"{}")  # written before the claim
    storage.create_exclusive(f"first/{CLAIM_FILE}", b"token")
    assert RevisionLog(storage).refresh() == ()
    (root / LOG_MARKER).unlink()  # a folder with a claim but no log: the log was lost
    with pytest.raises(CorruptLogError, match=r"'first'.*_log/ is missing"):
        RevisionLog(storage).refresh()


def test_a_directory_of_other_things_opens_as_an_empty_dataset(tmp_path):
    (tmp_path / "photos").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    assert RevisionedDataset(str(tmp_path)).head_sequence == 0


def test_an_unhealthy_log_is_not_rewritten(template, tmp_path):
    """A gap is found on open, before description.parquet could be healed to the short log."""
    root = copy_dataset(template, tmp_path / "ds")
    (root / DESCRIPTION).unlink()
    (root / entry_path(2)).unlink()
    with pytest.raises(CorruptLogError):
        RevisionedDataset(str(root))
    assert not (root / DESCRIPTION).exists()


# -- verify -------------------------------------------------------------------------------------


def test_a_healthy_dataset_has_no_findings(template, tmp_path):
    assert verify(copy_dataset(template, tmp_path / "ds")) == []


LEFTOVERS = {
    "orphan_folder": ("orphan", lambda r: (r / "orphan" / CLAIM_FILE).parent.mkdir()),
    "temp_file": (
        "_log/.00000000000000000004.json.0f.tmp",
        lambda r: (r / "_log/.00000000000000000004.json.0f.tmp").write_text("{"),
    ),
    "description_stale": (DESCRIPTION, lambda r: (r / DESCRIPTION).unlink()),
    "checkpoint_unreadable": (
        LAST_CHECKPOINT,
        lambda r: (r / LAST_CHECKPOINT).write_text(json.dumps({"sequence": 100})),
    ),
}


@pytest.mark.parametrize("kind", sorted(LEFTOVERS))
def test_verify_reports_leftovers_as_warnings_and_only_reads(kind, template, tmp_path):
    root = copy_dataset(template, tmp_path / "ds")
    path, make = LEFTOVERS[kind]
    make(root)
    before = snapshot(root)
    findings = verify(str(root))
    assert [(f.kind, f.severity, f.path) for f in findings] == [(kind, "warning", path)]
    assert findings[0].message and findings[0].fix == KINDS[kind][1]
    assert snapshot(root) == before


@pytest.mark.parametrize(
    "where", ["._claimed.1f.tmp", "r1/._claimed.2e.tmp", ".description.parquet.3d.tmp"]
)
def test_temporary_files_of_failed_writers_are_found(where, template, tmp_path):
    root = copy_dataset(template, tmp_path / "ds")
    (root / where).write_bytes(b"")
    assert [(f.kind, f.path) for f in verify(str(root))] == [("temp_file", where)]


def test_verify_lists_every_problem_of_a_dataset_that_cannot_open(template, tmp_path):
    """The folders of the missing and the damaged entry are theirs (description.parquet
    names them), never orphans to delete; the empty folder nothing names is one."""
    root = copy_dataset(template, tmp_path / "ds")
    (root / entry_path(2)).unlink()
    (root / entry_path(3)).write_text("[]")
    os.mkdir(root / "orphan")
    with pytest.raises(CorruptLogError):
        RevisionedDataset(str(root))
    kinds = {(f.kind, f.severity, f.path) for f in verify(str(root))}
    assert kinds == {
        ("log_gap", "error", entry_path(2)),
        ("log_entry_corrupt", "error", entry_path(3)),
        ("description_stale", "warning", DESCRIPTION),
        ("orphan_folder", "warning", "orphan"),
    } | {("folder_of_damaged_entry", "warning", "r2"), ("folder_of_damaged_entry", "warning", "r3")}


def test_every_finding_kind_has_a_recovery_in_the_docs():
    text = RECOVERY.read_text()
    missing = [kind for kind in KINDS if not re.search(rf"`{kind}`", text)]
    assert not missing, f"{RECOVERY.name} lacks recovery steps for {missing}"


# -- a lost newest entry --------------------------------------------------------------------------


def test_a_lost_newest_entry_is_noticed_and_nothing_is_written_on_top(template, tmp_path):
    """description.parquet is rewritten only after a commit: listing an entry past the
    log's end proves it was committed. Verify says so, its folder is no orphan, opening
    leaves the evidence alone, and nothing (a vacuum, an append) takes its sequence."""
    root = copy_dataset(template, tmp_path / "ds")
    lost = (root / entry_path(3)).read_bytes()
    (root / entry_path(3)).unlink()
    before = snapshot(root)
    kinds = {(f.kind, f.severity, f.path): f for f in verify(str(root))}
    assert set(kinds) == {
        ("log_head_lost", "error", entry_path(3)),
        ("folder_of_damaged_entry", "warning", "r3"),
    }
    message = kinds["log_head_lost", "error", entry_path(3)].message
    assert "entry 3 (minor 'r3' of t)" in message and "its folder 'r3' holds its data" in message

    ds = RevisionedDataset(str(root))  # reads the two entries left; never heals the description
    assert ds.head_sequence == 2 and snapshot(root) == before
    with pytest.raises(CorruptLogError, match=r"lost its newest entries.*3 \(minor 'r3'\)"):
        ds.vacuum(retain=timedelta(0), grace=timedelta(0))
    log = RevisionLog(LocalStorage(root))
    record = replace(log.refresh()[-1], name="r3b", sequence=3, raw=None)
    with pytest.raises(CorruptLogError, match="a commit now would take its sequence"):
        log.try_append(record)
    assert snapshot(root) == before

    (root / entry_path(3)).write_bytes(lost)  # put back: whole again
    assert verify(str(root)) == [] and RevisionedDataset(str(root)).head_sequence == 3


def test_a_log_cut_by_hand_with_its_description_removed_is_accepted(template, tmp_path):
    """The recovery guide's way to give an entry up: move it out, delete the description."""
    root = copy_dataset(template, tmp_path / "ds")
    (root / entry_path(3)).unlink()
    (root / DESCRIPTION).unlink()
    assert [(f.kind, f.path) for f in verify(str(root))] == [
        ("description_stale", DESCRIPTION),
        ("orphan_folder", "r3"),
    ]
