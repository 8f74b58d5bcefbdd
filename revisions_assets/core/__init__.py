"""The engine: log, commit, reads, versioning. No Dagster import here."""
