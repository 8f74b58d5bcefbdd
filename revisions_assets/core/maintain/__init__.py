"""Maintenance (docs/concepts/lifecycle.md): compaction, retention and vacuum, purge, verify, and
the import of
the original layout. Each commits at most one log entry, like any revision."""
