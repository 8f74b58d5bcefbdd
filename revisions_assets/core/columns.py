"""The names of the system columns, shared by the Spark and the Polars engines."""

from __future__ import annotations

#: beside every data row: a tombstone flag, and the hash of its values (``core/hashing.py``)
DELETED = "_deleted"
ROW_HASH = "_row_hash"
#: what ``with_revision=True`` adds: the name, timestamp and sequence of each row's revision
REVISION_COLUMNS = ("_revision", "_revision_timestamp", "_revision_sequence")
#: the column of compaction files naming the revision that wrote each row
SOURCE_SEQUENCE = "_revision_sequence"
#: the columns an SCD2 history adds to the table's
VALID_FROM = "valid_from"
VALID_TO = "valid_to"
IS_CURRENT = "is_current"
IS_DELETED = "is_deleted"
REVISION = "_revision"
