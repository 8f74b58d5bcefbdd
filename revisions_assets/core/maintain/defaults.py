"""Defaults of the maintenance operations, importable without Spark (the CLI shows them)."""

from __future__ import annotations

from datetime import timedelta

#: the size a compaction aims its files at
DEFAULT_TARGET_FILE_BYTES = 128 * 2**20
#: how long an unreferenced folder or temporary file must be untouched before vacuum removes it
DEFAULT_GRACE = timedelta(hours=1)
