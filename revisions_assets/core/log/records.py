"""Immutable revision records: one committed entry of the description log.

Every entry has a ``kind``. Data revisions (``major``, ``minor``) are what reads, change
reads, ``HEAD~n`` and consumers see. Maintenance entries (``compaction``, ``vacuum``;
later ``purge``) take a sequence like any entry but never change what a read returns:
``core/log/view.py`` applies them in one place.

Records loaded from a checkpoint are materialized lazily: their small fields come from
the checkpoint's columns, and their per-table details (files, schemas, counts), producer
and properties are parsed from the stored JSON only when something asks for them. So
opening a handle on a long log does not parse every record.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any

from ..timeutil import from_micros, to_micros

#: 1: data revisions only (``kind`` derived from ``is_major``); 2: entries carry ``kind``;
#: 3: each entry records the digest of its predecessor (``previous_sha256``) and each
#: write the statistics of its files (``file_stats``)
LOG_FORMAT = 3

MAJOR = "major"
MINOR = "minor"
COMPACTION = "compaction"
VACUUM = "vacuum"
PURGE = "purge"
DATA_KINDS = frozenset({MAJOR, MINOR})
MAINTENANCE_KINDS = frozenset({COMPACTION, VACUUM, PURGE})
KINDS = DATA_KINDS | MAINTENANCE_KINDS


def canonical_json(value: Any) -> str:
    """Compact, key-sorted JSON: equal values serialize to equal strings."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


#: a sha256 digest as the log records it: 64 lowercase hex digits
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


def load_json(raw: str | bytes) -> Any:
    """``json.loads`` for what a dataset stores (entries, checkpoint records, the checkpoint
    hint): a document nested deeper than Python's recursion limit (``[[[…`` in a few KB)
    raises ValueError like any other invalid JSON, not a RecursionError."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("nested too deeply to be a log entry") from None


#: the id types whose min and max the log records (Spark's type names); ids of other types
#: (refused at commit) record none
_INT_TYPES = frozenset({"byte", "short", "integer", "long"})
_DECIMAL_TYPE = re.compile(r"^decimal\(\d+,\s*\d+\)$")
#: a string id's min or max longer than this is not recorded (the log stays small; a
#: reader that finds no bound prunes nothing)
MAX_ID_TEXT = 256
_EPOCH = datetime(1970, 1, 1)


def id_types(schema_json: str, id_columns: Sequence[str]) -> tuple[str, ...]:
    """The recorded Spark type name of each id column ("" for a type without a name, or an
    id the schema lacks)."""
    fields = {f.get("name"): f.get("type") for f in json.loads(schema_json).get("fields", ())}
    return tuple(t if isinstance(t := fields.get(c), str) else "" for c in id_columns)


def encode_id_value(type_name: str, value: Any) -> Any:
    """An id's value as the log records it: JSON typed by the column's Spark type (ints,
    booleans and strings as they are, a date as ``"YYYY-MM-DD"``, a timestamp as integer
    microseconds since the epoch, a decimal as its text); None when the type records no
    bound or the value does not fit it (``decode_id_value`` reads it back to the same
    value)."""
    if type_name in _INT_TYPES:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if type_name == "string":
        if isinstance(value, bytes):
            try:
                value = value.decode()
            except UnicodeDecodeError:
                return None
        return value if isinstance(value, str) and len(value) <= MAX_ID_TEXT else None
    if type_name == "boolean":
        return value if isinstance(value, bool) else None
    if type_name == "date":
        ok = isinstance(value, date) and not isinstance(value, datetime)
        return value.isoformat() if ok else None
    if type_name == "timestamp" and isinstance(value, datetime):
        return to_micros(value if value.tzinfo else value.replace(tzinfo=UTC))
    if type_name == "timestamp_ntz" and isinstance(value, datetime) and value.tzinfo is None:
        return (value - _EPOCH) // timedelta(microseconds=1)
    if _DECIMAL_TYPE.match(type_name) and isinstance(value, Decimal) and value.is_finite():
        return str(value)
    return None


def decode_id_value(type_name: str, value: Any) -> Any:
    """The value ``encode_id_value`` recorded (None stays None); ValueError when the JSON does
    not fit the type."""
    if value is None:
        return None
    if type_name in _INT_TYPES and isinstance(value, int) and not isinstance(value, bool):
        return value
    if type_name == "string" and isinstance(value, str) and len(value) <= MAX_ID_TEXT:
        return value
    if type_name == "boolean" and isinstance(value, bool):
        return value
    if type_name == "date" and isinstance(value, str) and len(value) == 10:
        return date.fromisoformat(value)
    if type_name in ("timestamp", "timestamp_ntz") and type(value) is int:
        try:
            if type_name == "timestamp":
                return from_micros(value)
            return _EPOCH + timedelta(microseconds=value)
        except OverflowError:
            raise ValueError(f"{value} microseconds is out of the range of times") from None
    if _DECIMAL_TYPE.match(type_name) and isinstance(value, str):
        try:
            number = Decimal(value)
        except InvalidOperation:
            raise ValueError(f"{value!r} is not a decimal") from None
        if number.is_finite() and str(number) == value:
            return number
    raise ValueError(f"{json.dumps(value)[:60]} is not a bound of an id of type {type_name!r}")


@dataclass(frozen=True)
class FileStats:
    """What the job that wrote one data file recorded about it, read from the file's footer
    right after the write: so a plan prunes files by their id ranges without opening any,
    and a reader fetches a footer in one ranged request (or never, when the log answers).

    ``id_min``/``id_max``: per id column, in the order of the write's ``id_columns``, the
    smallest and largest value of the file, typed by the schema (int, str, bool, date,
    datetime, Decimal), or None where the footer holds no statistics (Spark writes none for
    its INT96 timestamps) or a string is longer than ``MAX_ID_TEXT``. ``footer_offset`` and
    ``footer_length``: the footer's place (bytes ``[footer_offset, bytes)`` are the footer,
    its length and the closing magic); ``footer_sha256``: the digest of the footer, which a
    file rewritten with other values cannot keep (``log/file_stats.check_stored_file``).
    """

    path: str
    rows: int
    bytes: int
    row_groups: int
    footer_offset: int
    footer_length: int
    footer_sha256: str
    id_min: tuple[Any, ...]
    id_max: tuple[Any, ...]

    def to_doc(self, types: Sequence[str]) -> dict[str, Any]:
        """As the log stores it: without the path (the write's ``files`` at the same index)."""
        return {
            "rows": self.rows,
            "bytes": self.bytes,
            "row_groups": self.row_groups,
            "footer_offset": self.footer_offset,
            "footer_length": self.footer_length,
            "footer_sha256": self.footer_sha256,
            "id_min": [encode_id_value(t, v) for t, v in zip(types, self.id_min, strict=True)],
            "id_max": [encode_id_value(t, v) for t, v in zip(types, self.id_max, strict=True)],
        }

    @classmethod
    def from_doc(cls, path: str, doc: Mapping[str, Any], types: Sequence[str]) -> FileStats:
        return cls(
            path=path,
            rows=int(doc["rows"]),
            bytes=int(doc["bytes"]),
            row_groups=int(doc["row_groups"]),
            footer_offset=int(doc["footer_offset"]),
            footer_length=int(doc["footer_length"]),
            footer_sha256=str(doc["footer_sha256"]),
            id_min=tuple(decode_id_value(t, v) for t, v in zip(types, doc["id_min"], strict=True)),
            id_max=tuple(decode_id_value(t, v) for t, v in zip(types, doc["id_max"], strict=True)),
        )


@dataclass(frozen=True)
class TableWrite:
    """What one revision wrote to one table.

    A commit writes one (``StagedTable.to_write``) and a compaction one for the state it
    holds (new files; the provenance fields of a revision do not apply to it). Nothing
    rebuilds one field by field from another: a purge rewrites one with ``purged``, which
    keeps every field but ``PURGED_FIELDS``.
    """

    id_columns: tuple[str, ...]
    schema_json: str  # Spark StructType as JSON, without the system columns
    version: str | None
    rows: int  # rows written, tombstones included
    tombstones: int
    files: tuple[str, ...]  # data files, relative to the dataset root
    bytes: int
    #: rows the caller offered, when a skip-unchanged minor dropped the unchanged ones
    #: (``rows`` are those written); None otherwise, and in entries written before it
    rows_offered: int | None = None
    #: the head sequence whose state a skip-unchanged minor compared its rows with (a
    #: concurrent commit may land between that and this revision); None when not recorded
    compared_with: int | None = None
    #: the version of each value column (field-level versions); None: not recorded, every
    #: field is at ``version``
    field_versions: Mapping[str, str] | None = None
    #: a carrying major: the sequences of the data revisions whose state it keeps (the
    #: merge of the table's state as of its timestamp when it was written); its own rows
    #: are the changed entities and tombstones on top of them. Empty: a complete major
    carries: tuple[int, ...] = ()
    #: per file of ``files`` (same order), what its footer said when it was written; None
    #: in entries written before (``RevisionLog.file_stats`` reads them from the footers)
    file_stats: tuple[FileStats, ...] | None = None

    def to_doc(self) -> dict[str, Any]:
        doc = {
            "id_columns": list(self.id_columns),
            "schema": json.loads(self.schema_json),
            "version": self.version,
            "rows": self.rows,
            "tombstones": self.tombstones,
            "files": list(self.files),
            "bytes": self.bytes,
        }
        if self.rows_offered is not None:
            doc["rows_offered"] = self.rows_offered
        if self.compared_with is not None:
            doc["compared_with"] = self.compared_with
        if self.field_versions is not None:
            doc["field_versions"] = dict(sorted(self.field_versions.items()))
        if self.carries:
            doc["carries"] = to_ranges(self.carries)
        if self.file_stats is not None:
            types = id_types(self.schema_json, self.id_columns)
            doc["file_stats"] = [s.to_doc(types) for s in self.file_stats]
        return doc

    def field_version(self, column: str) -> str | None:
        """The version of one value column: recorded, else the table's version."""
        return (self.field_versions or {}).get(column, self.version)

    def purged(
        self,
        files: tuple[str, ...],
        rows: int,
        tombstones: int,
        size: int,
        file_stats: tuple[FileStats, ...] | None,
    ) -> TableWrite:
        """This write after a purge rewrote its files: only ``PURGED_FIELDS`` change.

        Everything else (what it carries, its versions, what it offered and compared with)
        is what the revision recorded: a purge removes entities, never provenance."""
        return replace(
            self, files=files, rows=rows, tombstones=tombstones, bytes=size, file_stats=file_stats
        )

    def with_purged_fields(self, swapped: TableWrite) -> TableWrite:
        """This write with ``PURGED_FIELDS`` taken from ``swapped`` (a purge's record of it).

        How a purge is applied. Purges of earlier releases recorded their swapped writes
        without ``carries`` and the other provenance fields, so reads of a purged carrying
        major lost the state it carries; taking only these fields reads such a log as if
        the purge had kept them (docs/guides/operating/recovering.md)."""
        return replace(self, **{name: getattr(swapped, name) for name in PURGED_FIELDS})

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> TableWrite:
        schema_json = canonical_json(doc["schema"])
        files = tuple(doc["files"])
        stats = None
        if doc.get("file_stats") is not None:
            types = id_types(schema_json, doc["id_columns"])
            stats = tuple(
                FileStats.from_doc(path, s, types)
                for path, s in zip(files, doc["file_stats"], strict=True)
            )
        return cls(
            id_columns=tuple(doc["id_columns"]),
            schema_json=schema_json,
            version=doc.get("version"),
            rows=int(doc["rows"]),
            tombstones=int(doc["tombstones"]),
            files=files,
            bytes=int(doc["bytes"]),
            rows_offered=int(doc["rows_offered"]) if doc.get("rows_offered") is not None else None,
            compared_with=(
                int(doc["compared_with"]) if doc.get("compared_with") is not None else None
            ),
            field_versions=dict(doc["field_versions"]) if doc.get("field_versions") else None,
            carries=from_ranges(doc.get("carries") or ()),
            file_stats=stats,
        )


#: the fields of a ``TableWrite`` a purge rewrites (its files without the purged rows);
#: every other field survives a purge unchanged
PURGED_FIELDS = ("files", "rows", "tombstones", "bytes", "file_stats")


@dataclass(frozen=True)
class UpstreamPosition:
    """A consumer's position in one upstream table: the last upstream sequence consumed.

    ``dataset`` is the upstream's root. The log stores it relative to the consumer's root
    when both sit under a common folder (``../features``), so a tree of datasets copied
    elsewhere keeps its positions; in memory it is always the root the log resolves it to.
    """

    dataset: str
    table: str
    sequence: int

    @property
    def key(self) -> str:
        return f"{self.dataset}#{self.table}"


def _split_root(root: str) -> tuple[str, list[str]]:
    """``s3://bucket/a/b`` -> (``s3://bucket``, [a, b]); ``/a/b`` -> ("", [a, b])."""
    if "://" in root:
        scheme, rest = root.split("://", 1)
        bucket, _, path = rest.partition("/")
        return f"{scheme}://{bucket}", [p for p in path.split("/") if p]
    return "", [p for p in root.split("/") if p]


def is_relative_dataset(dataset: str) -> bool:
    """Whether a recorded upstream names its dataset relative to the consumer's root."""
    return dataset == "." or dataset.startswith(("./", "../"))


def stored_dataset(root: str | None, dataset: str) -> str:
    """How the log of the dataset at ``root`` records the upstream root ``dataset``:
    relative (``../features``) when both sit in one folder below the filesystem root or
    the bucket, else as given. Stored this way, copying the tree keeps the positions."""
    if root is None or is_relative_dataset(dataset):
        return dataset
    if not (dataset.startswith("/") or "://" in dataset) or dataset.startswith("file://"):
        return dataset
    (base, own), (up_base, up) = _split_root(root), _split_root(dataset)
    if base != up_base or not own or not up or own[0] != up[0]:
        return dataset
    relative = posixpath.relpath("/" + "/".join(up), "/" + "/".join(own))
    if relative != "." and not relative.startswith(".."):
        relative = f"./{relative}"
    # only a spelling that reads back as the same text: positions are compared as text
    return relative if located_dataset(root, relative) == dataset else dataset


def located_dataset(root: str | None, dataset: str) -> str:
    """The upstream root a recorded ``dataset`` names, read in the log of ``root``."""
    if root is None or not is_relative_dataset(dataset):
        return dataset
    base, own = _split_root(root)
    path = posixpath.normpath(posixpath.join("/" + "/".join(own), dataset))
    return f"{base}{path}" if base else path


@dataclass(frozen=True)
class CompactedRange:
    """The data revisions of one table whose state a compaction holds.

    Exactly the merge set of a default read pinned at ``through``: every data revision of
    the table committed at or before ``through`` and ordered at or after the major
    ``major`` (by ``(timestamp, sequence)``). ``through`` is the newest sequence in the
    set, ``timestamp`` its newest timestamp, ``revisions`` its size. ``read_at``: the head
    of the log the compaction was planned on (None: written by an earlier release, which
    did not record it); a purge committed between it and the compaction's own sequence
    erased rows the compaction may hold (``LogView``: ``Compaction.missed_purge``). Two
    ranges of the same revisions are equal, whenever they were read.
    """

    major: int
    through: int
    revisions: int
    timestamp: datetime
    read_at: int | None = field(default=None, compare=False)

    def to_doc(self) -> dict[str, Any]:
        doc = {
            "major": self.major,
            "through": self.through,
            "revisions": self.revisions,
            "timestamp_us": to_micros(self.timestamp),
        }
        if self.read_at is not None:
            doc["read_at"] = self.read_at
        return doc

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> CompactedRange:
        read_at = doc.get("read_at")
        return cls(
            major=int(doc["major"]),
            through=int(doc["through"]),
            revisions=int(doc["revisions"]),
            timestamp=from_micros(int(doc["timestamp_us"])),
            read_at=None if read_at is None else int(read_at),
        )


@dataclass(frozen=True)
class DeletedFiles:
    """Everything a vacuum deletes once its entry is committed: its audit record.

    ``files``/``bytes``: every file (those inside removed folders included); ``folders``:
    the folders removed whole (revisions, compactions, orphans); ``loose``: every other
    file removed (temporary files, files purges swapped out of folders that stay);
    ``purged``: per purge sequence, the files it swapped out that go now, wherever they
    lie: the proof that the erasure reached storage.
    """

    files: int
    bytes: int
    folders: tuple[str, ...] = ()
    loose: tuple[str, ...] = ()
    purged: Mapping[int, tuple[str, ...]] = field(default_factory=dict)

    def to_doc(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "folders": list(self.folders),
            "loose": list(self.loose),
            "purged": {str(s): list(paths) for s, paths in sorted(self.purged.items())},
        }

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> DeletedFiles:
        return cls(
            files=int(doc["files"]),
            bytes=int(doc["bytes"]),
            folders=tuple(doc.get("folders") or ()),
            loose=tuple(doc.get("loose") or ()),
            purged={int(s): tuple(paths) for s, paths in (doc.get("purged") or {}).items()},
        )


@dataclass(frozen=True)
class VacuumMark:
    """What a vacuum entry removes: the sequences of the revisions whose files it deletes,
    the retention horizon it judged them by (docs/concepts/lifecycle.md) and what it
    deletes (``deleted``; None in entries written before it was recorded)."""

    removed: tuple[int, ...]
    horizon_sequence: int
    horizon_timestamp: datetime | None  # None: no data revision at or before the horizon
    retain_seconds: float
    deleted: DeletedFiles | None = None

    def to_doc(self) -> dict[str, Any]:
        doc = {
            "removed": to_ranges(self.removed),
            "horizon_sequence": self.horizon_sequence,
            "horizon_timestamp_us": (
                None if self.horizon_timestamp is None else to_micros(self.horizon_timestamp)
            ),
            "retain_seconds": self.retain_seconds,
        }
        if self.deleted is not None:
            doc["deleted"] = self.deleted.to_doc()
        return doc

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> VacuumMark:
        stamp = doc.get("horizon_timestamp_us")
        return cls(
            removed=from_ranges(doc["removed"]),
            horizon_sequence=int(doc["horizon_sequence"]),
            horizon_timestamp=None if stamp is None else from_micros(int(stamp)),
            retain_seconds=float(doc["retain_seconds"]),
            deleted=DeletedFiles.from_doc(doc["deleted"]) if doc.get("deleted") else None,
        )


@dataclass(frozen=True)
class PurgedWrite:
    """One entry's files of one table after a purge: ``write`` replaces what the entry
    (a data revision or a compaction) references for the table; ``rows_removed`` counts
    the rows (tombstones included) the purge took out of it."""

    sequence: int
    write: TableWrite
    rows_removed: int

    def to_doc(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence,
            "write": self.write.to_doc(),
            "rows_removed": self.rows_removed,
        }

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> PurgedWrite:
        return cls(
            sequence=int(doc["sequence"]),
            write=TableWrite.from_doc(doc["write"]),
            rows_removed=int(doc["rows_removed"]),
        )


@dataclass(frozen=True)
class PurgeMark:
    """What a purge entry swaps, and its audit record: the reason, how many entities were
    asked for and, per table, the rewritten entries with the rows removed from each. It
    never holds the purged values (ids included).

    ``offered_removed``: per table, per entry that recorded ``rows_offered`` (written with
    skip_unchanged), how many of the rows it was offered the purge removed: a minor's are
    the rows removed from its files; a carrying major, offered the whole state, loses
    every purged entity its state held (written or unchanged). Empty in purges of
    earlier releases."""

    reason: str
    entities: int
    swaps: Mapping[str, tuple[PurgedWrite, ...]]
    offered_removed: Mapping[str, Mapping[int, int]] = field(default_factory=dict)

    @property
    def rows_removed(self) -> int:
        return sum(s.rows_removed for swaps in self.swaps.values() for s in swaps)

    def to_doc(self) -> dict[str, Any]:
        doc = {
            "reason": self.reason,
            "entities": self.entities,
            "swaps": {t: [s.to_doc() for s in swaps] for t, swaps in self.swaps.items()},
        }
        if self.offered_removed:
            doc["offered_removed"] = {
                t: {str(s): n for s, n in sorted(counts.items())}
                for t, counts in self.offered_removed.items()
            }
        return doc

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> PurgeMark:
        return cls(
            reason=str(doc["reason"]),
            entities=int(doc["entities"]),
            swaps={
                t: tuple(PurgedWrite.from_doc(s) for s in swaps)
                for t, swaps in doc["swaps"].items()
            },
            offered_removed={
                t: {int(s): int(n) for s, n in counts.items()}
                for t, counts in (doc.get("offered_removed") or {}).items()
            },
        )


def to_ranges(sequences: Sequence[int]) -> list[list[int]]:
    """Sorted sequences as inclusive ``[first, last]`` runs of consecutive numbers."""
    runs: list[list[int]] = []
    for seq in sorted(set(sequences)):
        if runs and runs[-1][1] == seq - 1:
            runs[-1][1] = seq
        else:
            runs.append([seq, seq])
    return runs


def from_ranges(runs: Sequence[Sequence[int]]) -> tuple[int, ...]:
    return tuple(seq for first, last in runs for seq in range(int(first), int(last) + 1))


@dataclass(frozen=True)
class Revision:
    """One entry of a dataset's log: a data revision or a maintenance entry."""

    name: str
    timestamp: datetime  # logical "as of" time, UTC
    is_major: bool
    sequence: int  # commit order, 1, 2, 3 … gap-free
    committed_at: datetime  # wall-clock UTC time of the commit
    tables: Mapping[str, TableWrite]
    version: str | None = None  # the code version when all tables share one
    producer: Mapping[str, str] = field(default_factory=dict)
    upstream: tuple[UpstreamPosition, ...] = ()
    data_change: bool = True
    properties: Mapping[str, str] = field(default_factory=dict)
    #: major | minor | compaction | vacuum | purge; "" derives major/minor from is_major
    kind: str = ""
    #: compaction: per table, the data revisions whose state it holds
    replaces: Mapping[str, CompactedRange] = field(default_factory=dict)
    #: vacuum: what it removes and the horizon it used
    vacuum: VacuumMark | None = None
    #: purge: the files it swaps and its audit record
    purge: PurgeMark | None = None
    #: the sha256 (hex) of the stored bytes of the entry before it (``sequence - 1``): the
    #: chain that a rewritten entry breaks. None for the first entry and in entries written
    #: before (the chain starts at the first entry that records one)
    previous: str | None = None
    #: the stored JSON this record was read from (to_json() returns it unchanged)
    raw: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.kind:
            object.__setattr__(self, "kind", MAJOR if self.is_major else MINOR)

    @property
    def key(self) -> tuple[datetime, int]:
        """Order of revisions for reads: (timestamp, sequence)."""
        return (self.timestamp, self.sequence)

    @property
    def is_data(self) -> bool:
        """A major or minor: the revisions reads, change reads and consumers see."""
        return self.kind in DATA_KINDS

    def wrote(self, table: str) -> bool:
        """Whether this is a data revision of ``table`` (maintenance entries never are)."""
        return self.is_data and table in self.tables

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

    def to_json(self, root: str | None = None) -> str:
        """The stored JSON; ``root``: the dataset's own root, against which upstream roots
        are stored relative where they share a folder (``stored_dataset``)."""
        if self.raw is not None:
            return self.raw
        doc: dict[str, Any] = {
            "format": LOG_FORMAT,
            "kind": self.kind,
            "name": self.name,
            "timestamp_us": to_micros(self.timestamp),
            "is_major": self.is_major,
            "version": self.version,
            "sequence": self.sequence,
            "committed_at_us": to_micros(self.committed_at),
            "tables": {name: t.to_doc() for name, t in self.tables.items()},
            "producer": dict(self.producer),
            "upstream": upstream_doc(self.upstream, root),
            "data_change": self.data_change,
            "properties": dict(self.properties),
        }
        if self.replaces:
            doc["replaces"] = {t: r.to_doc() for t, r in self.replaces.items()}
        if self.vacuum is not None:
            doc["vacuum"] = self.vacuum.to_doc()
        if self.purge is not None:
            doc["purge"] = self.purge.to_doc()
        if self.previous is not None:
            doc["previous_sha256"] = self.previous
        return canonical_json(doc)

    @classmethod
    def from_json(cls, text: str | bytes, root: str | None = None) -> Revision:
        """A record from its stored JSON, which it keeps (``to_json`` gives it back, so a
        checkpoint holds the entry's very bytes); ``root``: the dataset's own root, against
        which relative upstream roots are resolved (``located_dataset``)."""
        doc = json.loads(text)
        return cls.from_doc(doc, text if isinstance(text, str) else text.decode(), root)

    @classmethod
    def from_doc(
        cls, doc: Mapping[str, Any], text: str | None, root: str | None = None
    ) -> Revision:
        """A record from its decoded JSON ``doc`` (stored as ``text``)."""
        return cls(
            name=doc["name"],
            timestamp=from_micros(doc["timestamp_us"]),
            is_major=bool(doc["is_major"]),
            version=doc.get("version"),
            sequence=int(doc["sequence"]),
            committed_at=from_micros(doc["committed_at_us"]),
            tables={name: TableWrite.from_doc(t) for name, t in doc["tables"].items()},
            producer=dict(doc.get("producer") or {}),
            upstream=upstream_from_doc(doc.get("upstream"), root),
            data_change=bool(doc.get("data_change", True)),
            properties=dict(doc.get("properties") or {}),
            kind=doc.get("kind") or "",
            replaces={
                t: CompactedRange.from_doc(r) for t, r in (doc.get("replaces") or {}).items()
            },
            vacuum=VacuumMark.from_doc(doc["vacuum"]) if doc.get("vacuum") else None,
            purge=PurgeMark.from_doc(doc["purge"]) if doc.get("purge") else None,
            previous=doc.get("previous_sha256"),
            raw=text,
        )

    @classmethod
    def from_checkpoint_row(
        cls, row: Sequence[Any], record: str, root: str | None = None, previous: str | None = None
    ) -> Revision:
        """A data revision from a checkpoint row (the values of ``CHECKPOINT_COLUMNS`` of
        ``core/log/revision_log.py``, in that order); its details are parsed on first use.

        Built without ``__init__`` (its values come from a checkpoint whose columns and
        records ``records_of_checkpoint`` checked): opening a long log creates thousands of
        these. ``previous``: the digest its record holds (``Revision.previous``)."""
        (
            sequence,
            name,
            kind,
            is_major,
            timestamp_us,
            committed_at_us,
            version,
            tables,
            upstream,
            data_change,
        ) = row
        source = _StoredJson(record)
        revision = object.__new__(cls)
        revision.__dict__.update(
            name=name,
            timestamp=from_micros(timestamp_us),
            is_major=is_major,
            sequence=sequence,
            committed_at=from_micros(committed_at_us),
            tables=_LazyTables(tuple(tables), source),
            version=version,
            producer=_LazyStrings(source, "producer"),
            upstream=upstream_from_doc(json.loads(upstream), root) if upstream else (),
            data_change=data_change,
            properties=_LazyStrings(source, "properties"),
            kind=kind,
            replaces=_NO_REPLACES,
            vacuum=None,
            purge=None,
            previous=previous,
            raw=record,
        )
        return revision


#: the shared empty ``replaces`` of data revisions built from checkpoints (never mutated)
_NO_REPLACES: Mapping[str, CompactedRange] = MappingProxyType({})


def upstream_doc(
    upstream: Sequence[UpstreamPosition], root: str | None = None
) -> list[dict[str, Any]]:
    """Positions as stored in the log of ``root`` (relative where they can be)."""
    return [
        {"dataset": stored_dataset(root, p.dataset), "table": p.table, "sequence": p.sequence}
        for p in upstream
    ]


def upstream_from_doc(
    doc: Sequence[Mapping[str, Any]] | None, root: str | None = None
) -> tuple[UpstreamPosition, ...]:
    """Stored positions, their roots resolved against the log's own ``root``."""
    return tuple(
        UpstreamPosition(located_dataset(root, p["dataset"]), p["table"], int(p["sequence"]))
        for p in doc or []
    )


class _StoredJson:
    """The stored JSON of one record, parsed once, the first time a detail is needed."""

    __slots__ = ("_doc", "text")

    def __init__(self, text: str):
        self.text = text
        self._doc: dict[str, Any] | None = None

    @property
    def doc(self) -> dict[str, Any]:
        if self._doc is None:
            self._doc = json.loads(self.text)
        return self._doc


class _LazyTables(Mapping[str, TableWrite]):
    """A record's tables: the names are known up front, the details parsed on demand."""

    __slots__ = ("_names", "_parsed", "_source")

    def __init__(self, names: tuple[str, ...], source: _StoredJson):
        self._names = names
        self._source = source
        self._parsed: dict[str, TableWrite] | None = None

    def __contains__(self, table: object) -> bool:
        return table in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __getitem__(self, table: str) -> TableWrite:
        if self._parsed is None:
            docs = self._source.doc["tables"]
            self._parsed = {t: TableWrite.from_doc(docs[t]) for t in self._names}
        return self._parsed[table]


class _LazyStrings(Mapping[str, str]):
    """A string mapping of a record (producer, properties), parsed on demand."""

    __slots__ = ("_key", "_source")

    def __init__(self, source: _StoredJson, key: str):
        self._source = source
        self._key = key

    def _values(self) -> dict[str, str]:
        return self._source.doc.get(self._key) or {}

    def __getitem__(self, key: str) -> str:
        return self._values()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values())

    def __len__(self) -> int:
        return len(self._values())
