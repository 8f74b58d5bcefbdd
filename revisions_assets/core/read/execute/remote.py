"""Data files read where they are: the reader's scans of an object store root, by byte range.

Without a download cache, ``DatasetReader`` hands Polars the files' ``s3://`` URIs with the
options that reach them, and Polars' Parquet reader fetches what a scan needs and nothing
else: each file's footer, then the column chunks of the columns it projects, in the row
groups its filters keep (their min/max statistics skip the others). No file is downloaded
whole.

The options follow the root's boto3 client: its region, its endpoint where it is not AWS's
own, and the credentials it signs with, lent to Polars through a credential provider that
asks the client again when they expire. They are never written into a plan, a log or a
message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...storage.base import Storage

if TYPE_CHECKING:  # boto3 is imported when an S3 root is opened, not with the reader
    from ...storage.s3 import S3Storage


class RemoteFiles:
    """The data files of an S3 root as Polars scans them in place: ``paths`` gives their
    URIs, ``scan_options`` what every ``scan_parquet`` of them is given."""

    def __init__(self, storage: S3Storage):
        self.storage = storage

    def paths(self, files: Sequence[str]) -> list[str]:
        return [self.storage.object_uri(f) for f in files]

    @property
    def scan_options(self) -> dict[str, Any]:
        return {
            "storage_options": self.storage.object_store_options(),
            "credential_provider": self.storage.credentials,
        }


def remote_files(storage: Storage) -> RemoteFiles | None:
    """The files of ``storage`` as Polars reads them in place, or None where it reads local
    files (a local root, or other stores: fetched into a cache)."""
    if not storage.uri.startswith("s3://"):
        return None
    from ...storage.s3 import S3Storage

    return RemoteFiles(storage) if isinstance(storage, S3Storage) else None
