"""The tests' S3 server (moto on loopback), with a log of every request it answered.

The tests (``tests/s3/conftest.py``) and the object storage benchmark (``bench/s3_reads.py``)
run the same server. Its log records what crossed the storage boundary as the server saw
it: each request's method, object key, ``Range`` header, status and the bytes of its
response body. A reader's traffic is counted there, whatever client made it (boto3, Polars'
object_store, Spark's s3a), and never from the reader's own account of it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

REGION = "us-east-1"


@dataclass(frozen=True)
class Request:
    """One request the server answered."""

    method: str
    bucket: str
    key: str  #: the object key ("" for a request on the bucket, such as a listing)
    range: str | None  #: the ``Range`` header, e.g. ``bytes=-65536``
    status: int
    bytes: int  #: the bytes of the response body


@dataclass(frozen=True)
class Traffic:
    """The GET requests of some objects and the bytes they returned."""

    gets: int
    bytes: int

    @staticmethod
    def of(requests: Iterable[Request], wanted: Callable[[Request], bool]) -> Traffic:
        chosen = [r for r in requests if r.method == "GET" and wanted(r)]
        return Traffic(len(chosen), sum(r.bytes for r in chosen))


class _Logged:
    """A WSGI app that records each request its wrapped app answers."""

    def __init__(self, app: Any, log: list[Request], lock: threading.Lock):
        self.app, self.log, self.lock = app, log, lock

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        status: list[str] = []

        def start(code: str, headers: Any, exc_info: Any = None) -> Any:
            status.append(code)
            return start_response(code, headers, exc_info)

        body = self.app(environ, start)
        try:
            chunks = list(body)
        finally:
            if hasattr(body, "close"):
                body.close()
        bucket, _, key = unquote(environ.get("PATH_INFO", "")).lstrip("/").partition("/")
        code = int(status[0].split()[0]) if status else 0
        request = Request(
            environ["REQUEST_METHOD"],
            bucket,
            key,
            environ.get("HTTP_RANGE"),
            code,
            sum(len(c) for c in chunks),
        )
        with self.lock:
            self.log.append(request)
        return chunks


class S3Server:
    """moto's S3 on 127.0.0.1 in a thread of this process, path-style, logging its requests.

    ``options(access_key, secret_key)``: the ``storage_options`` that reach it.
    """

    def __init__(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line a request
        self._log: list[Request] = []
        self._lock = threading.Lock()
        app = _Logged(DomainDispatcherApplication(create_backend_app), self._log, self._lock)
        self._server = make_server(
            "127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler
        )
        self.endpoint_url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def options(self, access_key: str, secret_key: str) -> dict[str, str]:
        return {
            "endpoint_url": self.endpoint_url,
            "region_name": REGION,
            "aws_access_key_id": access_key,
            "aws_secret_access_key": secret_key,
        }

    def requests(self) -> list[Request]:
        """Every request answered so far, in order."""
        with self._lock:
            return list(self._log)

    def mark(self) -> int:
        """Where the log stands: ``since(mark)`` gives the requests answered after it."""
        with self._lock:
            return len(self._log)

    def since(self, mark: int) -> list[Request]:
        with self._lock:
            return self._log[mark:]

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()


def objects_under(prefix: str) -> Callable[[Request], bool]:
    """Requests on the objects whose keys start with ``prefix``."""
    return lambda r: bool(r.key) and r.key.startswith(prefix)
