"""Revisioned datasets as a Feast offline store (the ``feast`` extra), leak-free by default.

In ``feature_store.yaml``::

    offline_store:
      type: revisions_assets.feast.RevisionsOfflineStore

and a table as a batch source: ``RevisionsSource(name=..., path=..., table=...)``. Training
sets (``get_historical_features``) see each feature as it was known at the entity row's
time; ``feast materialize`` fills the online store with the latest values. Reads go through
``DatasetReader`` (Polars and its download cache, no JVM); docs/guides/training-sets.md.
"""

from __future__ import annotations

from ..core.extras import needs_extra

with needs_extra("revisions_assets.feast", "feast"):
    from .source import CREATED_TIMESTAMP, EVENT_TIMESTAMP, RevisionsSource
    from .store import RevisionsOfflineStore, RevisionsOfflineStoreConfig, RevisionsRetrievalJob

__all__ = [
    "CREATED_TIMESTAMP",
    "EVENT_TIMESTAMP",
    "RevisionsOfflineStore",
    "RevisionsOfflineStoreConfig",
    "RevisionsRetrievalJob",
    "RevisionsSource",
]
