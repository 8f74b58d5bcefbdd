"""Reads: ``plan/`` turns a request and one snapshot of the log into a frozen plan (which
revisions, which files, the merge program); ``execute/`` runs it on Spark or Polars, with
what both engines do alike (change reads, the SCD2 history, the real-change diff) written
once."""
