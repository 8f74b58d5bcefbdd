"""Dataset roots on S3 (``s3://bucket/prefix``): the log's small objects through boto3.

The commit primitive is S3's conditional write: ``PutObject`` with
``If-None-Match: *`` creates the log entry only if it is absent (HTTP 412
otherwise), so two writers racing for one sequence can never both win, and no
listing is ever trusted for correctness.

Every call is retried with capped exponential backoff and full jitter on 5xx,
throttling and dropped connections. botocore's own retries are switched off on
the client we build, so this module always knows when an attempt was
ambiguous. A conditional create that answers 412 is resolved by reading the
stored object back: the same bytes mean an earlier attempt of ours landed (its
response was lost), so the commit counts as done exactly once. Log entries hold
a unique revision name and commit time, so another writer's entry never has
our bytes.

Errors never include credentials: messages name the bucket, key and operation.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlparse

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from ..errors import StorageError, StorageOptionsError
from ..uris import redact, refuse_credentials
from .base import FileInfo, Storage, check_relative

T = TypeVar("T")

_RETRYABLE_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "ServiceUnavailable",
        "InternalError",
        "RequestTimeout",
        "RequestTimeoutException",
        "ConditionalRequestConflict",  # 409: a concurrent conditional write was in flight
        "OperationAborted",
    }
)
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_BAD_CREDENTIAL_CODES = frozenset(
    {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"}
)
#: (endpoint, bucket) pairs whose conditional writes were verified in this process
_CONDITIONAL_WRITES_OK: set[tuple[str, str]] = set()
_CLIENT_OPTIONS = (
    "endpoint_url",
    "region_name",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def is_retryable(exc: BaseException) -> bool:
    """Transient failures worth another attempt: 5xx, throttling, dropped connections."""
    if isinstance(exc, ClientError):
        status = _status(exc)
        return _code(exc) in _RETRYABLE_CODES or status >= 500 or status == 429
    return isinstance(exc, (BotoConnectionError, HTTPClientError))


class S3Storage(Storage):
    """A dataset root ``s3://bucket/prefix`` (``s3a://`` accepted) on S3 or an S3-compatible store.

    Options: ``endpoint_url``, ``region_name``, ``aws_access_key_id``,
    ``aws_secret_access_key``, ``aws_session_token`` (unset ones come from the
    standard AWS environment variables and config files), or a ready ``client``
    (a boto3 S3 client, e.g. ``dagster_aws.s3.S3Resource(...).get_client()``);
    ``max_attempts`` and ``base_delay`` tune the retries.
    """

    def __init__(
        self,
        root_uri: str,
        *,
        client: Any = None,
        max_attempts: int = 8,
        base_delay: float = 0.05,
        max_delay: float = 5.0,
        **options: Any,
    ):
        if not isinstance(root_uri, str):
            raise StorageOptionsError(
                f"an S3 root is a string s3://bucket/prefix, not {type(root_uri).__name__}"
            )
        refuse_credentials(root_uri)
        parsed = urlparse(root_uri)
        if parsed.scheme not in ("s3", "s3a") or not parsed.netloc:
            raise StorageError(
                f"not an S3 root: {redact(root_uri)!r} (expected s3://bucket/prefix)"
            )
        unknown = sorted(set(options) - set(_CLIENT_OPTIONS))
        if unknown:
            raise StorageOptionsError(
                f"unknown S3 storage options {unknown}; known: {_CLIENT_OPTIONS}"
            )
        # values are never shown: they may be secrets
        wrong = sorted(k for k, v in options.items() if v is not None and not isinstance(v, str))
        if wrong:
            raise StorageOptionsError(f"S3 storage options {wrong} must be strings")
        for name, value, low in (("max_attempts", max_attempts, 1), ("base_delay", base_delay, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
                raise StorageOptionsError(f"S3 storage option {name} must be a number >= {low}")
        self.bucket = parsed.netloc
        self.prefix = parsed.path.strip("/")
        self.uri = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        self.max_attempts = max(1, max_attempts)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.retries = 0  # transient failures absorbed so far (for metrics and tests)
        if client is not None and options:
            raise StorageError(f"pass either a boto3 client or {sorted(options)}, not both")
        self.client = client if client is not None else _make_client(options)

    def __repr__(self) -> str:
        return f"S3Storage({self.uri!r})"

    # -- paths -----------------------------------------------------------------------------

    def key(self, rel: str) -> str:
        rel = check_relative(rel).strip("/")
        if not self.prefix:
            return rel
        return f"{self.prefix}/{rel}" if rel else self.prefix

    def _dir_key(self, rel_prefix: str) -> str:
        base = self.key(rel_prefix)
        return f"{base}/" if base else ""

    def spark_uri(self, rel: str = "") -> str:
        key = self.key(rel)
        return f"s3a://{self.bucket}/{key}" if key else f"s3a://{self.bucket}"

    # -- operations ------------------------------------------------------------------------

    def read(self, rel: str, limit: int | None = None) -> bytes | None:
        key = self.key(rel)
        byte_range = None if limit is None else f"bytes=0-{limit}"
        # the body is read inside the retried call: a cut-off body is retried too
        return self._call("GetObject", key, lambda: self._get_or_none(key, byte_range))

    def read_tail(self, rel: str, length: int) -> bytes | None:
        key = self.key(rel)
        return self._call("GetObject", key, lambda: self._get_or_none(key, f"bytes=-{length}"))

    def read_range(self, rel: str, offset: int, length: int) -> bytes | None:
        key = self.key(rel)
        if length <= 0:
            return b""
        byte_range = f"bytes={offset}-{offset + length - 1}"
        return self._call("GetObject", key, lambda: self._get_or_none(key, byte_range))

    def read_tail_sized(self, rel: str, length: int) -> tuple[bytes, int] | None:
        key = self.key(rel)

        def get() -> tuple[bytes, int] | None:
            try:
                got = self.client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes=-{length}")
            except ClientError as exc:
                if _code(exc) in _NOT_FOUND_CODES:
                    return None
                raise
            body = got["Body"].read()
            # "bytes 100-199/200": the object's size after the slash; a whole object: its length
            whole = str(got.get("ContentRange") or "").rpartition("/")[2]
            return body, int(whole) if whole.isdigit() else len(body)

        return self._call("GetObject", key, get)

    def write(self, rel: str, data: bytes) -> None:
        key = self.key(rel)
        self._call(
            "PutObject", key, lambda: self.client.put_object(Bucket=self.bucket, Key=key, Body=data)
        )

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        self._verify_conditional_writes()
        key = self.key(rel)
        try:
            created = self._call("PutObject", key, lambda: self._put_if_absent(key, data))
        except StorageError as exc:
            if not exc.__cause__ or not is_retryable(exc.__cause__):
                raise
            # retries ran out on transient errors: one of the attempts may still have landed
            stored = self._settle(key, exc)
            if stored == data:
                return True
            if stored is None:
                raise
            return False
        if created:
            return True
        # 412: the key exists. Ours (an earlier attempt's lost response) or another writer's?
        return self.read(rel) == data

    def _put_if_absent(self, key: str, data: bytes) -> bool:
        """One conditional PUT: False on 412 (the key exists)."""
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as exc:
            if _code(exc) == "PreconditionFailed" or _status(exc) == 412:
                return False
            raise
        return True

    def _verify_conditional_writes(self) -> None:
        """Refuse a store that ignores ``If-None-Match``: there, concurrent commits would
        silently overwrite each other. Probed once per endpoint and bucket per process."""
        probe_id = (str(self.client.meta.endpoint_url), self.bucket)
        if probe_id in _CONDITIONAL_WRITES_OK:
            return
        key = self.key(f"_log/.conditional-write-probe-{uuid.uuid4().hex}")
        put = self.client.put_object
        self._call("PutObject", key, lambda: put(Bucket=self.bucket, Key=key, Body=b"1"))
        try:
            refused = not self._call("PutObject", key, lambda: self._put_if_absent(key, b"2"))
        finally:
            delete = self.client.delete_object
            self._call("DeleteObject", key, lambda: delete(Bucket=self.bucket, Key=key))
        if not refused:
            raise StorageError(
                f"{probe_id[0]} ignores conditional writes (If-None-Match) on bucket "
                f"{self.bucket!r}: commits could silently overwrite each other there; use a "
                "store that supports them (AWS S3, MinIO, ...)"
            )
        _CONDITIONAL_WRITES_OK.add(probe_id)

    def _settle(self, key: str, failure: StorageError) -> bytes | None:
        try:
            return self._call("GetObject", key, lambda: self._get_or_none(key))
        except StorageError as exc:
            raise StorageError(
                f"{failure} -- and the outcome of the conditional write to "
                f"s3://{self.bucket}/{key} is unknown: check whether that object exists"
            ) from exc

    def _get_or_none(self, key: str, byte_range: str | None = None) -> bytes | None:
        ranged = {"Range": byte_range} if byte_range else {}
        try:
            return self.client.get_object(Bucket=self.bucket, Key=key, **ranged)["Body"].read()
        except ClientError as exc:
            if _code(exc) in _NOT_FOUND_CODES:
                return None
            if byte_range and _code(exc) == "InvalidRange":  # an empty object
                return b""
            raise

    def list_files(self, rel_prefix: str) -> list[FileInfo]:
        start = self._dir_key(rel_prefix)
        strip = len(self._dir_key(""))

        def listing() -> list[FileInfo]:
            out = []
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=start
            )
            for page in pages:
                for obj in page.get("Contents", []):
                    if not obj["Key"].endswith("/"):  # skip "directory" markers
                        path, size = obj["Key"][strip:], int(obj["Size"])
                        out.append(FileInfo(path, size, obj.get("LastModified")))
            return out

        return sorted(self._call("ListObjectsV2", start, listing), key=lambda f: f.path)

    def list_names(self, rel_prefix: str, start_after: str | None = None) -> list[str]:
        start = self._dir_key(rel_prefix)

        def listing() -> list[str]:
            args = {"Bucket": self.bucket, "Prefix": start, "Delimiter": "/"}
            if start_after is not None:
                args["StartAfter"] = start + start_after
            out = []
            for page in self.client.get_paginator("list_objects_v2").paginate(**args):
                out += [p["Prefix"][len(start) :] for p in page.get("CommonPrefixes", [])]
                out += [o["Key"][len(start) :] for o in page.get("Contents", [])]
            return out

        names = self._call("ListObjectsV2", start, listing)
        return sorted(n for n in names if n and (start_after is None or n > start_after))

    def exists(self, rel: str) -> bool:
        """True for an object, or (like a local directory) for a prefix holding objects."""
        key = self.key(rel)

        def head() -> bool:
            try:
                self.client.head_object(Bucket=self.bucket, Key=key)
            except ClientError as exc:
                if _code(exc) in _NOT_FOUND_CODES or _status(exc) == 404:
                    return False
                raise
            return True

        def any_below() -> bool:
            response = self.client.list_objects_v2(
                Bucket=self.bucket, Prefix=self._dir_key(rel), MaxKeys=1
            )
            return bool(response.get("KeyCount") or response.get("Contents"))

        if self._call("HeadObject", key, head):
            return True
        return self._call("ListObjectsV2", key, any_below)

    def delete_tree(self, rel_prefix: str) -> None:
        keys = [self.key(f.path) for f in self.list_files(rel_prefix)]
        if rel_prefix.strip("/"):
            keys.append(self.key(rel_prefix))  # it may name one object, like a file; absent is fine
        self._delete_keys(keys)

    def delete_files(self, rels: Sequence[str]) -> None:
        """Delete these objects in batches of 1,000 (one DeleteObjects call each)."""
        self._delete_keys([self.key(rel) for rel in rels])

    def _delete_keys(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]

            def delete(batch: list[str] = batch) -> None:
                response = self.client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True},
                )
                errors = response.get("Errors") or []
                if errors:
                    first = errors[0]
                    error = {"Code": first.get("Code", ""), "Message": first.get("Message", "")}
                    raise ClientError({"Error": error, "ResponseMetadata": {}}, "DeleteObjects")

            self._call("DeleteObjects", batch[0], delete)

    # -- retries and errors ----------------------------------------------------------------

    def _call(self, operation: str, key: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` with backoff on transient failures; map the rest to StorageError."""
        for attempt in range(1, self.max_attempts + 1):
            try:
                return fn()
            except (ClientError, BotoCoreError) as exc:
                if attempt < self.max_attempts and is_retryable(exc):
                    self.retries += 1
                    cap = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
                    time.sleep(random.uniform(cap / 2, cap))  # jittered, never zero
                    continue
                raise self._error(operation, key, exc, attempt) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(self, operation: str, key: str, exc: BaseException, attempts: int) -> StorageError:
        where = f"s3://{self.bucket}/{key}"
        if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
            return StorageError(
                f"{operation} {where}: no usable AWS credentials; set them in the storage options "
                "or the AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY environment variables"
            )
        if isinstance(exc, ClientError):
            code, status = _code(exc), _status(exc)
            if code == "NoSuchBucket":
                return StorageError(f"{operation} {where}: bucket {self.bucket!r} does not exist")
            if code in _BAD_CREDENTIAL_CODES:
                return StorageError(
                    f"{operation} {where}: the server rejected the credentials ({code}); check "
                    "the access key id, secret key and session token configured for this root"
                )
            if status == 403 or code in ("AccessDenied", "AllAccessDisabled"):
                return StorageError(
                    f"{operation} {where}: access denied ({code or status}); the credentials "
                    f"in use lack permission on bucket {self.bucket!r} (needs s3:GetObject, "
                    "s3:PutObject, s3:ListBucket and s3:DeleteObject under the dataset prefix)"
                )
            detail = f"{code or 'HTTP ' + str(status)}"
        else:
            detail = type(exc).__name__
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        return StorageError(f"{operation} {where} failed{tries}: {detail}")


def _make_client(options: dict[str, Any]) -> Any:
    """A boto3 S3 client without botocore retries (ours know when an attempt was ambiguous)."""
    session = boto3.session.Session(
        **{k: options[k] for k in _CLIENT_OPTIONS if k != "endpoint_url" and options.get(k)}
    )
    endpoint = options.get("endpoint_url")
    config = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        s3={"addressing_style": "path"} if endpoint else None,
        connect_timeout=10,
        read_timeout=60,
    )
    return session.client("s3", endpoint_url=endpoint or None, config=config)
