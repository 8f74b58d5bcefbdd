"""revisions-assets: incremental, revisioned datasets on Spark, as Dagster assets.

The names below load on first use, so ``from revisions_assets import DatasetReader``
imports neither PySpark nor Dagster. The base install reads; the engine (``RevisionedDataset``,
``build_spark_session``) needs the ``spark`` extra, ``revisions_assets.dagster`` the ``dagster``
extra: without them these names raise ``MissingExtraError`` naming the extra to install.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .core.extras import needs_extra

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .core.dataset import RevisionedDataset
    from .core.errors import RevisionsError
    from .core.log.records import FileStats, Revision, TableWrite, UpstreamPosition
    from .core.maintain.vacuum import VacuumReport
    from .core.read.results import ChangeSet, TableInfo
    from .core.read.scan import DatasetSnapshot, PlannedFiles, Scan
    from .core.reader import DatasetReader
    from .core.spark_session import build_spark_session

#: public name -> the module that defines it
_EXPORTS = {
    "ChangeSet": ".core.read.results",
    "DatasetSnapshot": ".core.read.scan",
    "PlannedFiles": ".core.read.scan",
    "RevisionedDataset": ".core.dataset",
    "Scan": ".core.read.scan",
    "TableInfo": ".core.read.results",
    "VacuumReport": ".core.maintain.vacuum",
    "DatasetReader": ".core.reader",
    "RevisionsError": ".core.errors",
    "FileStats": ".core.log.records",
    "Revision": ".core.log.records",
    "TableWrite": ".core.log.records",
    "UpstreamPosition": ".core.log.records",
    "build_spark_session": ".core.spark_session",
}

__all__ = [
    "ChangeSet",
    "DatasetReader",
    "DatasetSnapshot",
    "FileStats",
    "PlannedFiles",
    "Revision",
    "RevisionedDataset",
    "RevisionsError",
    "Scan",
    "TableInfo",
    "TableWrite",
    "UpstreamPosition",
    "VacuumReport",
    "build_spark_session",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'revisions_assets' has no attribute {name!r}")
    with needs_extra(f"revisions_assets.{name}"):
        value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value
