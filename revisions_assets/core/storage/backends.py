"""Opening a dataset root: the storage backend for its scheme, with deployment-wide options.

Local paths and ``file://`` roots use ``LocalStorage``; ``s3://`` (and ``s3a://``) roots
use ``S3Storage``, imported only when an S3 root is opened (it needs boto3).
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

from ..arguments import check_type
from ..errors import StorageError, StorageOptionsError
from ..uris import describe, redact, refuse_credentials
from .base import LocalStorage, Storage

_CONFIGURED: dict[str, dict[str, object]] = {}


def configure_storage(prefix: str, **options: object) -> None:
    """Default options (endpoint, credentials, a ready client) for every root under ``prefix``.

    Lets a deployment configure access once, e.g. the Dagster layer registers the client of
    its ``dagster-aws`` S3 resource for its base URI; options given to ``open_storage``
    directly still win. The longest matching prefix applies.
    """
    check_type(prefix, str, "prefix", "a root URI prefix such as 's3://bucket/base'")
    refuse_credentials(prefix)
    _CONFIGURED[prefix.rstrip("/")] = dict(options)


def _configured_options(root: str) -> dict[str, object]:
    matches = [p for p in _CONFIGURED if root == p or root.startswith(p + "/")]
    return dict(_CONFIGURED[max(matches, key=len)]) if matches else {}


def open_storage(root: str | os.PathLike[str] | Storage, **options: object) -> Storage:
    """The Storage for a dataset root: a local path, ``file://…`` or ``s3://bucket/prefix``.

    ``options`` configure S3 access (see ``S3Storage``); they are refused for local roots
    and for a ready Storage, where they would silently do nothing.
    """
    if isinstance(root, Storage):
        if options:
            raise StorageOptionsError(
                f"storage options {sorted(options)} do not apply to the ready storage "
                f"{root.uri!r}: configure it when you build it"
            )
        return root
    check_type(root, (str, os.PathLike), "root", "a path, file:// or s3:// URI")
    text = os.fspath(root)
    if not isinstance(text, str):
        raise StorageError(f"root {describe(root)} is not a text path")
    refuse_credentials(text)
    scheme = urlparse(text).scheme if "://" in text else ""
    if scheme in ("", "file"):
        if options:
            raise StorageOptionsError(
                f"storage_options {sorted(options)} do not apply to the local root {text!r}: "
                "they configure S3 access (endpoint, credentials, client)"
            )
        return LocalStorage(text)
    if scheme not in ("s3", "s3a"):
        raise StorageError(
            f"no storage backend for {redact(text)!r}: use a local path or s3://bucket/prefix"
        )
    from .s3 import S3Storage

    if not options:
        canonical = "s3://" + text.split("://", 1)[1] if scheme == "s3a" else text
        options = _configured_options(canonical)
    return S3Storage(text, **options)
