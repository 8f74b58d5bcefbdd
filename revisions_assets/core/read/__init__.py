"""Reads: which revisions and files a read needs (pure planning over the log), and the merges
that turn a plan into rows (Spark here, Polars in the Spark-free reader), plus history and
bitemporal reads."""
