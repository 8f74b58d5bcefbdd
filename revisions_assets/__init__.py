"""revisions-assets: incremental, revisioned datasets on Spark, as Dagster assets."""

from .core.dataset import ChangeSet, RevisionedDataset, TableInfo, VacuumReport
from .core.errors import RevisionsError
from .core.records import Revision, TableWrite, UpstreamPosition

__all__ = [
    "ChangeSet",
    "Revision",
    "RevisionedDataset",
    "RevisionsError",
    "TableInfo",
    "TableWrite",
    "UpstreamPosition",
    "VacuumReport",
]
