"""Defaults of the maintenance operations, importable without Spark (the CLI shows them)."""

from __future__ import annotations

from datetime import timedelta

from ..write.file_size import DEFAULT_TARGET_FILE_BYTES

#: how long an unreferenced folder or temporary file must be untouched before vacuum removes it
DEFAULT_GRACE = timedelta(hours=1)
#: the shortest retention ``revisions vacuum`` accepts without ``--force``: a read or job that
#: planned before a vacuum and still runs later than this loses files it needs
MIN_RETAIN = timedelta(days=1)

__all__ = ["DEFAULT_GRACE", "DEFAULT_TARGET_FILE_BYTES", "MIN_RETAIN"]
