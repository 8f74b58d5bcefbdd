"""Credentials never leave a URI: they are refused in roots and masked in every message.

A root such as ``s3://KEY:SECRET@bucket/prefix`` would copy the secret into error
messages, logs, ``repr``, Dagster metadata and the consumer positions recorded in other
datasets' logs (a root is a dataset's identity). So roots with credentials are refused
(as Hadoop's s3a connector does), and any text that may quote a user-given URI goes
through ``redact`` first.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import StorageOptionsError

# scheme://user:secret@…  or  scheme://user@… (an access key id alone is still a secret);
# the secret may contain '/', the user part may not (so s3://bucket/a:b@c is a plain path)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?:[^/@:\s]*:[^@\s]*|[^/@\s]+)@")


def redact(text: str) -> str:
    """``text`` with the user-info part of every URI in it replaced by ``***``."""
    return _USERINFO.sub(r"\g<scheme>***@", text)


def refuse_credentials(uri: str) -> None:
    """Raise StorageOptionsError (with the secret masked) when ``uri`` embeds credentials."""
    if _USERINFO.search(uri):
        raise StorageOptionsError(
            f"root {redact(uri)!r} embeds credentials: they would be copied into errors, logs "
            "and metadata. Pass them as storage_options={'aws_access_key_id': …, "
            "'aws_secret_access_key': …} (and s3a_conf(...) for Spark), or through the AWS "
            "environment variables / profile"
        )


_SHOWN = 80


def describe(value: Any) -> str:
    """``type repr`` of a bad value for an error message: one line, short, credentials masked."""
    try:
        text = repr(value)
    except Exception:
        text = "<unprintable>"
    text = " ".join(redact(text).split())
    if len(text) > _SHOWN:
        text = text[: _SHOWN - 3] + "..."
    return f"{type(value).__name__} {text}"
