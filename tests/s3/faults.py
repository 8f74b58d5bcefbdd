"""Deterministic S3 faults on one boto3 client, through botocore's ``before-send`` hook.

Each matching request consumes the next step of a plan:

- ``"pass"``: sent normally;
- ``"slowdown"``: answered 503 SlowDown without reaching the server (nothing written);
- ``"lost"``: really sent to the server (the object IS written), then the connection is
  reported closed before the response arrived: the ambiguous failure of a commit;
- ``"lost-500"``: really sent, then answered 500 InternalError;
- ``"rival"``: another writer's bytes land at the key first, then 503 (nothing of ours
  written): a retry must see 412 and report the conflict.

Requests beyond the plan pass through.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit

import urllib3
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ConnectionClosedError

_ERRORS = {
    503: b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>",
    500: b"<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message>"
    b"</Error>",
}


class _Body:
    def __init__(self, data: bytes):
        self.data = data

    def stream(self, **_kwargs):
        yield self.data


def _error_response(request: AWSPreparedRequest, status: int) -> AWSResponse:
    return AWSResponse(
        request.url, status, {"Content-Type": "application/xml"}, _Body(_ERRORS[status])
    )


def _body_bytes(request: AWSPreparedRequest) -> bytes:
    body = request.body
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    position = body.tell()
    data = body.read()
    body.seek(position)
    return data


def _send_for_real(request: AWSPreparedRequest) -> None:
    """Deliver the signed request to the server ourselves (so the write really happens)."""
    response = urllib3.PoolManager().request(
        request.method,
        request.url,
        body=_body_bytes(request),
        headers={
            k: v.decode() if isinstance(v, bytes) else v
            for k, v in request.headers.items()
            if k.lower() != "expect"
        },
        retries=False,
    )
    assert response.status == 200, f"real send failed: {response.status} {response.data[:200]!r}"


class FaultPlan:
    """Faults for one client and operation; ``seen`` records the step each request got."""

    def __init__(
        self,
        client,
        operation: str,
        plan: list[str],
        match: Callable[[AWSPreparedRequest], bool] = lambda request: True,
        rival: Callable[[AWSPreparedRequest], None] | None = None,
    ):
        self.plan = list(plan)
        self.match = match
        self.rival = rival
        self.seen: list[str] = []
        client.meta.events.register(f"before-send.s3.{operation}", self._on_send)

    def _on_send(self, request: AWSPreparedRequest, **_kwargs):
        if not self.match(request):
            return None
        step = self.plan.pop(0) if self.plan else "pass"
        self.seen.append(step)
        if step == "pass":
            return None
        if step == "slowdown":
            return _error_response(request, 503)
        if step == "rival":
            assert self.rival is not None, "a 'rival' step needs rival="
            self.rival(request)
            return _error_response(request, 503)
        _send_for_real(request)
        if step == "lost":
            raise ConnectionClosedError(endpoint_url=request.url)
        if step == "lost-500":
            return _error_response(request, 500)
        raise ValueError(f"unknown fault step {step!r}")


def conditional(request: AWSPreparedRequest) -> bool:
    """Only the put-if-absent requests of log entries (the commits)."""
    entry = re.search(r"/_log/\d{20}\.json$", urlsplit(request.url).path)
    return entry is not None and request.headers.get("If-None-Match") in ("*", b"*")
