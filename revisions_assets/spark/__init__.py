"""Revisioned datasets as a Spark data source: ``format("revisions")``.

``register(spark)`` makes it available in a session (classic or Spark Connect); then
``spark.read.format("revisions").option("table", t).load(root)`` reads a table with the
options of ``RevisionedDataset.read``, ``changes`` and ``history``, SQL reads it through
``CREATE TEMPORARY VIEW v USING revisions OPTIONS (path '...', table '...')``, and
``spark.readStream`` follows its changes (docs/guides/spark-sql.md,
docs/guides/change-feed.md).
"""

from __future__ import annotations

from .source import FORMAT, RevisionsDataSource, register

__all__ = ["FORMAT", "RevisionsDataSource", "register"]
