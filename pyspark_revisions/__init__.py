"""Spark finds ``format("revisions")`` here without a call: when a session first looks up a
Python data source, Spark imports the modules named ``pyspark_*`` in the Python its workers
run and registers their ``DefaultSource`` (so ``spark-sql`` and the Thrift server, which run
no Python of their own, read revisioned datasets too). ``revisions_assets.spark.register``
does the same for one session, and turns on the filter pushdown the source uses."""

from revisions_assets.spark.source import RevisionsDataSource as DefaultSource

__all__ = ["DefaultSource"]
