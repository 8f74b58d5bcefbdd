"""Immutable revision records: one committed entry of the description log."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .timeutil import from_micros, to_micros

LOG_FORMAT = 1


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON: equal values serialize to equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class TableWrite:
    """What one revision wrote to one table."""

    id_columns: tuple[str, ...]
    schema_json: str  # Spark StructType as JSON, without the system column _deleted
    version: str | None
    rows: int  # rows written, tombstones included
    tombstones: int
    files: tuple[str, ...]  # data files, relative to the dataset root
    bytes: int


@dataclass(frozen=True)
class UpstreamPosition:
    """A consumer's position in one upstream table: the last upstream sequence consumed."""

    dataset: str
    table: str
    sequence: int

    @property
    def key(self) -> str:
        return f"{self.dataset}#{self.table}"


@dataclass(frozen=True)
class Revision:
    """One revision of a dataset, as committed to the log."""

    name: str
    timestamp: datetime  # logical "as of" time, UTC
    is_major: bool
    sequence: int  # commit order, 1, 2, 3 … gap-free
    committed_at: datetime  # wall-clock UTC time of the commit
    tables: dict[str, TableWrite]
    version: str | None = None  # the code version when all tables share one
    producer: dict[str, str] = field(default_factory=dict)
    upstream: tuple[UpstreamPosition, ...] = ()
    data_change: bool = True
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[datetime, int]:
        """Order of revisions for reads: (timestamp, sequence)."""
        return (self.timestamp, self.sequence)

    def wrote(self, table: str) -> bool:
        return table in self.tables

    def version_of(self, table: str) -> str | None:
        return self.tables[table].version if table in self.tables else self.version

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables.values())

    @property
    def tombstones(self) -> int:
        return sum(t.tombstones for t in self.tables.values())

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tables.values())

    @property
    def file_count(self) -> int:
        return sum(len(t.files) for t in self.tables.values())

    def position_in(self, dataset: str, table: str) -> int | None:
        for pos in self.upstream:
            if pos.dataset == dataset and pos.table == table:
                return pos.sequence
        return None

    # -- serialization -------------------------------------------------------------------

    def to_json(self) -> str:
        doc: dict[str, Any] = {
            "format": LOG_FORMAT,
            "name": self.name,
            "timestamp_us": to_micros(self.timestamp),
            "is_major": self.is_major,
            "version": self.version,
            "sequence": self.sequence,
            "committed_at_us": to_micros(self.committed_at),
            "tables": {
                name: {
                    "id_columns": list(t.id_columns),
                    "schema": json.loads(t.schema_json),
                    "version": t.version,
                    "rows": t.rows,
                    "tombstones": t.tombstones,
                    "files": list(t.files),
                    "bytes": t.bytes,
                }
                for name, t in self.tables.items()
            },
            "producer": dict(self.producer),
            "upstream": [
                {"dataset": p.dataset, "table": p.table, "sequence": p.sequence}
                for p in self.upstream
            ],
            "data_change": self.data_change,
            "properties": dict(self.properties),
        }
        return canonical_json(doc)

    @classmethod
    def from_json(cls, text: str | bytes) -> Revision:
        doc = json.loads(text)
        return cls(
            name=doc["name"],
            timestamp=from_micros(doc["timestamp_us"]),
            is_major=bool(doc["is_major"]),
            version=doc.get("version"),
            sequence=int(doc["sequence"]),
            committed_at=from_micros(doc["committed_at_us"]),
            tables={
                name: TableWrite(
                    id_columns=tuple(t["id_columns"]),
                    schema_json=canonical_json(t["schema"]),
                    version=t.get("version"),
                    rows=int(t["rows"]),
                    tombstones=int(t["tombstones"]),
                    files=tuple(t["files"]),
                    bytes=int(t["bytes"]),
                )
                for name, t in doc["tables"].items()
            },
            producer=dict(doc.get("producer") or {}),
            upstream=tuple(
                UpstreamPosition(p["dataset"], p["table"], int(p["sequence"]))
                for p in doc.get("upstream") or []
            ),
            data_change=bool(doc.get("data_change", True)),
            properties=dict(doc.get("properties") or {}),
        )
