"""Defaults of the maintenance operations, importable without Spark (the CLI shows them)."""

from __future__ import annotations

from datetime import timedelta

#: the size a compaction aims its files at
DEFAULT_TARGET_FILE_BYTES = 128 * 2**20
#: how long an unreferenced folder or temporary file must be untouched before vacuum removes it
DEFAULT_GRACE = timedelta(hours=1)
#: the shortest retention ``revisions vacuum`` accepts without ``--force``: a read or job that
#: planned before a vacuum and still runs later than this loses files it needs
MIN_RETAIN = timedelta(days=1)
