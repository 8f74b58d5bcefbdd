"""The description log: the transaction keeper of a dataset.

Layout under the dataset root::

    _log/00000000000000000001.json   one immutable entry per commit (the truth)
    _log/checkpoint-…0100.parquet    every CHECKPOINT_INTERVAL commits: all entries so far,
                                     with their small fields as columns
    _log/_last_checkpoint            a hint: the newest checkpoint's sequence
    description.parquet              the log as a flat table, rewritten after every commit

A commit is the exclusive creation of entry ``head + 1`` (put-if-absent). Two
writers racing for the same sequence: one wins, the other re-reads the log,
re-validates and retries at the next sequence. Sequences are therefore
gap-free, and nothing is ever lost or overwritten.

Opening a log reads the newest checkpoint and then probes forward entry by
entry, so both opening and committing cost O(CHECKPOINT_INTERVAL) reads,
whatever the length of the log. A checkpoint's data revisions are materialized
from its columns; their details (files, schemas) are parsed only when a read
needs them. ``description.parquet`` is derived: it is rewritten after each commit
(appending to what the previous one holds, and healed on open if a writer died
before rewriting it); the engine itself never trusts it.

A dataset is untrusted input. Every entry records the sha256 of the stored bytes of the
one before it (``Revision.previous``), and a checkpoint the digest of the last entry it
covers: a handle checks that chain over the entries it reads as files, and refuses to
write on a broken one (``CorruptLogError``; reads go on). A checkpoint's records get the
checks of entries (``records_of_checkpoint``); a checkpoint, like ``description.parquet``,
is decoded only once its footer promises no more than the log can hold
(``read_parquet_bytes``).

The file names are spelled in ``layout``; ``loghealth`` parses entries strictly and
checks, on the first refresh, that the log is whole (no gap, not lost).
"""

from __future__ import annotations

import gc
import hashlib
import io
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import CorruptLogError, InvalidArgumentError
from ..storage.base import Storage
from ..storage.footer import stored_file
from ..timeutil import to_micros
from .file_stats import FooterStatsCache, logged_file_stats
from .health import MAX_ENTRY_BYTES, REPAIR_HINT, check_log_health, entry_problem, parse_entry
from .layout import DESCRIPTION, LAST_CHECKPOINT, LOG_DIR, checkpoint_path, entry_path
from .records import (
    DATA_KINDS,
    FileStats,
    Revision,
    TableWrite,
    load_json,
    stored_dataset,
    upstream_doc,
)
from .view import LogView

if TYPE_CHECKING:  # pandas loads only when a frame is asked for
    import pandas as pd

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL = 100
#: description.parquet lists at most this many entries past the log's last one as the
#: evidence of a lost head; a description listing more is stale (or forged), not decoded
LOST_HEAD_LIMIT = 1000
#: the most ``_log/_last_checkpoint`` is read of (its JSON is a few bytes)
MAX_HINT_BYTES = 1024
#: the key of a checkpoint's Parquet metadata that holds the sha256 of its last entry
LAST_ENTRY_DIGEST = b"revisions.last_entry_sha256"
#: what a log-sized Parquet file (a checkpoint, description.parquet) may decode to: per
#: row at most ``MAX_ENTRY_BYTES`` (the largest entry), and in all at most ``DECODE_FLOOR``
#: or ``DECODE_RATIO`` times its size on storage, whichever is more (the log's JSON
#: compresses far less; a file that expands more is not loaded)
DECODE_FLOOR = 256 * 2**20
DECODE_RATIO = 64
__all__ = [
    "CHECKPOINT_INTERVAL",
    "DESCRIPTION",
    "LOG_DIR",
    "LOST_HEAD_LIMIT",
    "CheckpointError",
    "LostEntry",
    "OversizedFileError",
    "RevisionLog",
    "checkpoint_path",
    "description_table",
    "entry_digest",
    "entry_path",
    "log_frame",
    "lost_entries",
    "lost_head_message",
    "read_checkpoint",
    "read_description",
    "read_parquet_bytes",
    "records_of_checkpoint",
    "table_frame",
]


def entry_digest(stored: bytes) -> str:
    """The digest the next entry records of an entry's stored bytes (``Revision.previous``)."""
    return hashlib.sha256(stored).hexdigest()


class OversizedFileError(ValueError):
    """A log-sized Parquet file whose footer promises more than the log can hold."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded: ``invalid`` when its records fail the checks of
    entries (hostile or forged: an error), else damaged or oversized (only a longer probe)."""

    def __init__(self, message: str, invalid: bool = False):
        super().__init__(message)
        self.invalid = invalid


class RevisionLog:
    """The committed revisions of one dataset, cached and refreshed incrementally."""

    def __init__(self, storage: Storage, root: str | None = None):
        self.storage = storage
        #: the dataset's root, against which upstream positions are stored relative and
        #: resolved (``UpstreamPosition``): the storage's own, or the one a cache mirrors
        self.root = root or storage.uri
        self._records: list[Revision] = []
        self._loaded = False
        self._description: pa.Table | None = None  # rows for the first records, appended to
        self._view: LogView | None = None
        #: entries description.parquet proves committed past the head (``lost_entries``),
        #: found when it is first read: nothing is appended or published on top of them
        self._lost: tuple[LostEntry, ...] | None = None
        #: the digest of the stored bytes of the head entry (None: not known yet)
        self._head_digest: str | None = None
        #: why the chain of digests is broken (the first break found), or None
        self._broken: str | None = None
        #: the footers' stats of writes whose entries recorded none, by path
        self._footer_stats: FooterStatsCache = {}

    # -- reading ---------------------------------------------------------------------------

    @property
    def records(self) -> tuple[Revision, ...]:
        """The revisions known to this handle, in sequence order (call refresh() first)."""
        return tuple(self._records)

    @property
    def head(self) -> int:
        return len(self._records)

    def view(self) -> LogView:
        """The cached log with its maintenance entries applied (call refresh() first)."""
        if self._view is None or self._view.head != self.head:
            self._view = LogView(self._records)
        return self._view

    def refresh(self) -> tuple[Revision, ...]:
        """Bring the cached log up to date with storage and return it.

        The first refresh also checks that the log is whole (no gap, not lost): a damaged
        log raises CorruptLogError before anything could be written on top of it. Every
        refresh checks the chain of digests over the entries it reads (a break refuses
        writes, ``refuse_broken_chain``).
        """
        opening = not self._loaded
        skipped: tuple[int, str] | None = None  # a checkpoint not loaded, and why
        if opening:
            self._records, self._head_digest, skipped = self._read_checkpoint()
            self._loaded = True
        while True:
            read = self._read_entry(self.head + 1)
            if read is None:
                break
            entry, digest = read
            self._check_link(entry)
            self._records.append(entry)
            self._head_digest = digest
        if opening and skipped is not None and self.head < skipped[0]:
            sequence, why = skipped
            raise CorruptLogError(
                f"{self.root}: {why}, and the log's entry files stop at sequence {self.head} "
                f"({entry_path(self.head + 1)} is missing): restore the checkpoint or the "
                f"entries from a backup; {REPAIR_HINT}"
            )
        if opening:
            check_log_health(self.storage, self.head)
        return self.records

    def _check_link(self, entry: Revision) -> None:
        """Note a break of the chain: ``entry`` records another digest of the entry before
        it than that entry's stored bytes (or the checkpoint's record of them) have."""
        if entry.previous is None or self._head_digest is None or self._broken is not None:
            return
        if entry.previous != self._head_digest:
            before = entry_path(entry.sequence - 1)
            self._broken = (
                f"{self.root}: the chain of log entries is broken: {entry_path(entry.sequence)} "
                f"records a digest of {before} other than the stored entry's (or its "
                f"checkpoint's record of it): one of them was rewritten after its commit; "
                f"restore it from a backup; {REPAIR_HINT}"
            )
            log.warning("%s", self._broken)

    def refuse_broken_chain(self) -> None:
        """Raise CorruptLogError when the entries this handle read break the chain of
        digests: nothing is written on top of a rewritten entry (reads go on)."""
        if self._broken is not None:
            raise CorruptLogError(self._broken)

    def _read_entry(self, sequence: int) -> tuple[Revision, str] | None:
        raw = self.storage.read(entry_path(sequence), MAX_ENTRY_BYTES)
        if raw is None:
            return None
        return parse_entry(raw, sequence, self.root), entry_digest(raw)

    def _read_checkpoint(self) -> tuple[list[Revision], str | None, tuple[int, str] | None]:
        """The records of the newest checkpoint and the digest of its last entry, or none
        and (its sequence, why) when it cannot be loaded: then the entry files are read
        (a damaged or oversized checkpoint only costs a longer probe; one whose records
        fail the checks of entries is not loaded either)."""
        try:
            sequence, records, digest = read_checkpoint(self.storage, self.root)
        except CheckpointError as exc:
            if exc.invalid:
                log.warning("%s: %s; reading the entry files instead", self.root, exc)
            return [], None, (checkpoint_sequence(self.storage) or 0, str(exc))
        if sequence == 0:
            return [], None, None
        return records, digest, None

    def file_stats(self, write: TableWrite) -> tuple[FileStats, ...]:
        """The stats of every file of ``write`` (aligned with ``write.files``): as its entry
        recorded them, or, for entries written before, from the files' footers, read once
        per handle (``logged_file_stats``)."""
        return logged_file_stats(self.storage, write, self._footer_stats)

    # -- writing ---------------------------------------------------------------------------

    def try_append(self, record: Revision) -> bool:
        """Commit ``record`` as entry ``head + 1``; False when another writer took it first."""
        if record.sequence != self.head + 1:
            raise InvalidArgumentError(
                f"record sequence {record.sequence} is not the log's head + 1 ({self.head + 1})"
            )
        self.refuse_broken_chain()
        if self._description is None:  # once per handle: is the head the log's end?
            self._description = self._stored_description()
        self._refuse_lost_head()
        chained = replace(record, previous=self._digest_of(self.head), raw=None)
        payload = chained.to_json(self.root).encode()
        if not self.storage.create_exclusive(entry_path(record.sequence), payload):
            return False
        self._records.append(chained)
        self._head_digest = entry_digest(payload)
        return True

    def _digest_of(self, sequence: int) -> str | None:
        """The digest of entry ``sequence``'s stored bytes: known for the head, recorded by
        the next entry, else read (None: no entry, or its file is gone)."""
        if sequence == 0:
            return None
        if sequence == self.head and self._head_digest is not None:
            return self._head_digest
        if sequence < self.head and self._records[sequence].previous is not None:
            return self._records[sequence].previous
        raw = self.storage.read(entry_path(sequence), MAX_ENTRY_BYTES)
        return None if raw is None else entry_digest(raw)

    def after_commit(self) -> None:
        """Post-commit upkeep: checkpoint when due, then bring description.parquet current."""
        if self.head % CHECKPOINT_INTERVAL == 0:
            self.write_checkpoint(self.head)
        self.publish_description()

    def write_checkpoint(self, sequence: int) -> None:
        table = checkpoint_table(self._records[:sequence], self.root, self._digest_of(sequence))
        buf = io.BytesIO()
        # no dictionaries: a reader bounds what a checkpoint decodes to by its pages' sizes
        pq.write_table(table, buf, compression="zstd", use_dictionary=False)
        self.storage.create_exclusive(checkpoint_path(sequence), buf.getvalue())
        current = checkpoint_sequence(self.storage)  # a hint that names none is replaced
        if current is None or current < sequence:
            self.storage.write(LAST_CHECKPOINT, json.dumps({"sequence": sequence}).encode())

    def publish_description(self, max_rounds: int = 20) -> None:
        """Rewrite description.parquet until no newer commit appeared meanwhile.

        Each writer re-checks the head after its own rewrite, so the last rewrite to land
        always covers every commit that finished before it.
        """
        for _ in range(max_rounds):
            self.refresh()
            self.refuse_broken_chain()
            parquet = self._description_parquet()
            self._refuse_lost_head()  # never shrink the evidence of a lost head
            self.storage.write(DESCRIPTION, parquet)
            if not self.storage.exists(entry_path(self.head + 1)):
                return

    def _description_parquet(self) -> bytes:
        """description.parquet for the cached log, appending only rows not yet tabulated."""
        buf = io.BytesIO()
        pq.write_table(self.description(), buf)
        return buf.getvalue()

    def description(self) -> pa.Table:
        """The log as a flat table (call refresh() first): the rows of entries, tabulated
        once and appended to, plus the vacuum marks, which later entries may change."""
        if self._description is None:
            self._description = self._stored_description()
        done = self._description.num_rows
        if done < self.head:
            new_rows = description_table(self._records[done:], self.root)
            self._description = pa.concat_tables([self._description, new_rows])
        if self._description.column(0).num_chunks > 64:  # one chunk per commit otherwise
            self._description = self._description.combine_chunks()
        return with_vacuum_marks(self._description, self.view())

    def _refuse_lost_head(self) -> None:
        lost = [e for e in self._lost or () if e.sequence > self.head]  # not put back since
        if lost:
            raise CorruptLogError(lost_head_message(self.storage.uri, self.head, lost))

    def _stored_description(self) -> pa.Table:
        """The rows description.parquet already holds for this log, so a fresh handle
        appends to them instead of tabulating every record (empty if unusable). Notes the
        entries it proves committed past the head (``lost_entries``)."""
        stored = read_description(self.storage, self.head)
        if stored is None:
            return description_table([])  # missing, damaged or older: tabulate again
        self._lost = lost_entries(self.storage, self._records, stored)
        names = stored.column("name").to_pylist()
        if len(names) > self.head or names != [r.name for r in self._records[: len(names)]]:
            return stored.slice(0, 0)
        return stored

    def description_is_current(self) -> bool:
        """Whether description.parquet lists every entry of the log, so that opening need
        not heal it. One that lists more is left alone: entries past the head are the
        evidence of a lost head (``lost_entries``), and the next commit rewrites any other."""
        raw = self.storage.read(DESCRIPTION)
        if raw is None:
            return self.head == 0
        try:
            return pq.read_metadata(io.BytesIO(raw)).num_rows >= self.head
        except (pa.ArrowException, ValueError):
            return False  # damaged: rewrite it


@dataclass(frozen=True)
class LostEntry:
    """An entry description.parquet lists after the log's last one (``lost_entries``)."""

    sequence: int
    name: str
    kind: str


def read_description(storage: Storage, head: int | None = None) -> pa.Table | None:
    """description.parquet, or None when it is missing, damaged, of an older version, or
    (given the log's ``head``) lists more than ``LOST_HEAD_LIMIT`` entries past it: rows
    that many are no evidence of a lost head (``description_overlong``), and are never
    decoded (a description of millions of rows is a few MB on storage)."""
    raw = storage.read(DESCRIPTION)
    if raw is None:
        return None
    empty = description_table([])
    try:
        if head is not None and description_rows(raw) > head + LOST_HEAD_LIMIT:
            return None
        stored = read_parquet_bytes(
            raw,
            columns=empty.column_names,
            max_rows=None if head is None else head + LOST_HEAD_LIMIT,
        )
    except (pa.ArrowException, ValueError, KeyError):
        return None
    return stored if stored.schema == empty.schema else None


def description_rows(raw: bytes) -> int:
    """How many entries a description.parquet lists, from its footer alone."""
    return pq.ParquetFile(pa.BufferReader(raw)).metadata.num_rows


def description_overlong(storage: Storage, head: int) -> int | None:
    """How many entries description.parquet lists when that is more than ``head`` +
    ``LOST_HEAD_LIMIT`` (too many to be the log's lost head: stale, or forged), else None."""
    raw = storage.read(DESCRIPTION)
    if raw is None:
        return None
    try:
        rows = description_rows(raw)
    except (pa.ArrowException, ValueError):
        return None
    return rows if rows > head + LOST_HEAD_LIMIT else None


def lost_entries(
    storage: Storage, records: Sequence[Revision], stored: pa.Table | None = None
) -> tuple[LostEntry, ...]:
    """The entries description.parquet lists after ``records`` (the log read up to its
    head) when it lists exactly ``records`` before them, and at most ``LOST_HEAD_LIMIT``
    after them.

    description.parquet is rewritten only after a commit, so such entries were committed
    and their entry files are lost (deleted, or never restored with the rest of the log).
    Empty when it lists no more, lists another history (a log an operator cut by hand:
    stale, not evidence), lists too many more, or the next entry exists (committed while
    we looked). ``stored``: description.parquet already read (else its footer is read first).
    """
    head = len(records)
    if stored is None:
        footer = stored_file(storage, DESCRIPTION)
        if footer.rows is None or footer.rows <= head:
            return ()
        stored = read_description(storage, head)
    if stored is None or stored.num_rows <= head or stored.num_rows > head + LOST_HEAD_LIMIT:
        return ()
    names = stored.column("name").to_pylist()
    if names[:head] != [r.name for r in records] or storage.exists(entry_path(head + 1)):
        return ()
    rows = stored.slice(head).select(["name", "kind"]).to_pylist()
    return tuple(
        LostEntry(head + n, row["name"], row["kind"]) for n, row in enumerate(rows, start=1)
    )


def lost_head_message(uri: str, head: int, lost: Sequence[LostEntry]) -> str:
    """Why nothing may be written on top of a log that lost its newest entries."""
    first, last = lost[0], lost[-1]
    entries = entry_path(first.sequence) + (
        "" if first is last else f" … {entry_path(last.sequence)}"
    )
    described = ", ".join(f"{e.sequence} ({e.kind} {e.name!r})" for e in lost)
    return (
        f"{uri}: the log lost its newest entries: {DESCRIPTION}, rewritten only after a "
        f"commit, lists entry {described} after the log's last one ({head}), but {entries} "
        f"is missing: restore it from a backup (a commit now would take its sequence); "
        f"{REPAIR_HINT}"
    )


#: the small fields of an entry, stored as columns in checkpoints (plus the full JSON)
CHECKPOINT_COLUMNS = (
    "sequence",
    "name",
    "kind",
    "is_major",
    "timestamp_us",
    "committed_at_us",
    "version",
    "tables",
    "upstream",
    "data_change",
)


def checkpoint_table(
    records: Sequence[Revision], root: str | None = None, last_digest: str | None = None
) -> pa.Table:
    """A checkpoint: every entry's JSON, and its small fields as columns (upstream roots
    stored relative to the dataset's ``root`` where they can be); ``last_digest``: the
    digest of the stored bytes of its last entry, kept in the file's metadata."""
    table = pa.table(
        {
            "sequence": pa.array([r.sequence for r in records], pa.int64()),
            "name": pa.array([r.name for r in records], pa.string()),
            "kind": pa.array([r.kind for r in records], pa.string()),
            "is_major": pa.array([r.is_major for r in records], pa.bool_()),
            "timestamp_us": pa.array([to_micros(r.timestamp) for r in records], pa.int64()),
            "committed_at_us": pa.array([to_micros(r.committed_at) for r in records], pa.int64()),
            "version": pa.array([r.version for r in records], pa.string()),
            "tables": pa.array([list(r.tables) for r in records], pa.list_(pa.string())),
            "upstream": pa.array(
                [
                    json.dumps(upstream_doc(r.upstream, root)) if r.upstream else None
                    for r in records
                ],
                pa.string(),
            ),
            "data_change": pa.array([r.data_change for r in records], pa.bool_()),
            "record": pa.array([r.to_json(root) for r in records], pa.string()),
        }
    )
    if last_digest is None:
        return table
    return table.replace_schema_metadata({LAST_ENTRY_DIGEST: last_digest.encode()})


#: the Arrow type of each column of a checkpoint
_CHECKPOINT_TYPES = {f.name: f.type for f in checkpoint_table([]).schema}


def checkpoint_sequence(storage: Storage) -> int | None:
    """The sequence ``_log/_last_checkpoint`` names, or None (none, or not a hint)."""
    hint = storage.read(LAST_CHECKPOINT, MAX_HINT_BYTES)
    if hint is None or len(hint) > MAX_HINT_BYTES:  # a hint is a few bytes of JSON
        return None
    try:
        sequence = load_json(hint)["sequence"]
    except (ValueError, KeyError, TypeError):
        return None
    return sequence if isinstance(sequence, int) and sequence >= 1 else None


def read_checkpoint(
    storage: Storage, root: str | None = None
) -> tuple[int, list[Revision], str | None]:
    """The newest checkpoint: its sequence, its records and the digest of its last entry
    (None in checkpoints written before); ``(0, [], None)`` without one. CheckpointError
    when the hint or the checkpoint cannot be used: damaged, decoding to more than its
    ``sequence`` entries can hold, or (``invalid``) holding records that fail the checks of
    entries (``records_of_checkpoint``)."""
    if storage.read(LAST_CHECKPOINT, MAX_HINT_BYTES) is None:
        return 0, [], None
    sequence = checkpoint_sequence(storage)
    if sequence is None:
        raise CheckpointError(f"{LAST_CHECKPOINT} does not name a checkpoint")
    path = checkpoint_path(sequence)
    most = sequence * MAX_ENTRY_BYTES  # what its entries can hold (no more is read of it)
    raw = storage.read(path, most)
    if raw is None:
        raise CheckpointError(f"checkpoint {path} is missing")
    if len(raw) > most:
        raise CheckpointError(f"checkpoint {path} is larger than its {sequence} entries can hold")
    try:
        table = read_parquet_bytes(raw, max_rows=sequence)
    except (ValueError, KeyError, TypeError, pa.ArrowException) as exc:
        raise CheckpointError(f"checkpoint {path} cannot be read: {exc}") from None
    if table.num_rows != sequence:
        raise CheckpointError(f"checkpoint {path} holds {table.num_rows} entries, not {sequence}")
    try:
        records = records_of_checkpoint(table, root)
    except CorruptLogError as exc:
        raise CheckpointError(f"checkpoint {path} {exc}", invalid=True) from None
    digest = (table.schema.metadata or {}).get(LAST_ENTRY_DIGEST)
    return sequence, records, None if digest is None else digest.decode("ascii", "replace")


def records_of_checkpoint(table: pa.Table, root: str | None = None) -> list[Revision]:
    """The entries of a checkpoint of the dataset at ``root``, each checked as an entry
    file is (``health.entry_problem``), its columns against its JSON, its sequence against
    its row: CorruptLogError naming the first that fails. Data revisions are materialized
    from the columns and build their details from their JSON only when a detail is needed;
    maintenance entries (few) are parsed. A checkpoint of the first format (sequence and
    JSON only) is parsed in full."""
    if "record" not in table.column_names or "sequence" not in table.column_names:
        raise CorruptLogError("lacks the columns 'sequence' and 'record'")
    columnar = set(CHECKPOINT_COLUMNS) <= set(table.column_names)
    for name in (CHECKPOINT_COLUMNS if columnar else ("sequence",)) + ("record",):
        if table.schema.field(name).type != _CHECKPOINT_TYPES[name]:
            raise CorruptLogError(
                f"has a column {name!r} of type {table.schema.field(name).type}, expected "
                f"{_CHECKPOINT_TYPES[name]}"
            )
    texts = table.column("record").to_pylist()
    columns = [
        table.column(c).to_pylist() for c in (CHECKPOINT_COLUMNS if columnar else ("sequence",))
    ]
    records = []
    # thousands of small objects, none of them garbage: a collection pass (which walks
    # every object of the process) would cost more than building them
    collecting = gc.isenabled()
    gc.disable()
    try:
        for at, (text, row) in enumerate(zip(texts, zip(*columns, strict=True), strict=True)):
            doc = _checked_record(text, row if columnar else None, row[0], at + 1)
            try:
                if columnar and row[2] in DATA_KINDS:
                    previous = doc.get("previous_sha256")
                    records.append(Revision.from_checkpoint_row(row, text, root, previous))
                else:
                    records.append(Revision.from_doc(doc, text, root))
            except Exception as exc:  # a shape entry_problem() does not know yet
                raise CorruptLogError(
                    f"row {at + 1}: the record cannot be read: {type(exc).__name__}: {exc}"
                ) from exc
    finally:
        if collecting:
            gc.enable()
    return records


def _checked_record(text: Any, row: Sequence[Any] | None, sequence: Any, at: int) -> dict:
    """The decoded JSON of a checkpoint's row ``at``, checked as an entry and against the
    row's columns (``row``: the values of ``CHECKPOINT_COLUMNS``; None in the first format)."""
    where = f"row {at} (sequence {sequence})"
    if not isinstance(text, str) or len(text) > MAX_ENTRY_BYTES:
        raise CorruptLogError(f"{where} has no record, or one larger than any entry")
    try:
        doc = load_json(text)
    except ValueError as exc:
        raise CorruptLogError(f"{where} holds a record that is not valid JSON ({exc})") from None
    problem = entry_problem(doc)
    if problem is None and (doc["sequence"] != at or sequence != at):
        problem = f"claims sequence {doc['sequence']}"
    if problem is None and row is not None:
        problem = _columns_problem(doc, row)
    if problem is not None:
        raise CorruptLogError(f"{where}: the record {problem}")
    return doc


#: the times a record may hold, in microseconds (what ``datetime`` can represent)
_MIN_US = to_micros(datetime.min.replace(tzinfo=UTC))
_MAX_US = to_micros(datetime.max.replace(tzinfo=UTC))


def _columns_problem(doc: dict[str, Any], row: Sequence[Any]) -> str | None:
    """Which of a checkpoint row's columns disagree with its record's JSON (opening builds
    data revisions from the columns)."""
    if not all(_MIN_US <= doc[k] <= _MAX_US for k in ("timestamp_us", "committed_at_us")):
        return "has a time out of the range of times"
    try:
        upstream = load_json(row[8]) if row[8] is not None else None
    except ValueError:
        return "has an upstream column that is not JSON"
    tables = row[7] or []
    expected = {
        "sequence": (row[0], doc["sequence"]),
        "name": (row[1], doc["name"]),
        "kind": (row[2], doc.get("kind") or ("major" if doc["is_major"] else "minor")),
        "is_major": (row[3], doc["is_major"]),
        "timestamp_us": (row[4], doc["timestamp_us"]),
        "committed_at_us": (row[5], doc["committed_at_us"]),
        "version": (row[6], doc.get("version")),
        "tables": (len(tables) == len(set(tables)) and set(tables), set(doc["tables"])),
        "upstream": (upstream, doc.get("upstream") or None),
        "data_change": (row[9], doc.get("data_change", True)),
    }
    for name, (have, want) in expected.items():
        if have != want:
            return f"disagrees with its column {name!r}"
    return None


def with_vacuum_marks(description: pa.Table, view: LogView) -> pa.Table:
    """The description with, per entry, whether a vacuum removed its files and which."""
    removed = view.removed
    by = [
        removed[seq].sequence if seq in removed else None
        for seq in description.column("sequence").to_pylist()
    ]
    return description.append_column(
        "vacuumed", pa.array([b is not None for b in by], pa.bool_())
    ).append_column("vacuumed_by", pa.array(by, pa.int64()))


def log_frame(records: Sequence[Revision]) -> pd.DataFrame:
    """Some entries of the log as a pandas DataFrame, one row per entry, in sequence order
    (without the vacuum marks, which need the whole log: see ``RevisionLog.description``)."""
    return table_frame(description_table(records))


def read_parquet_bytes(
    raw: bytes, columns: Sequence[str] | None = None, max_rows: int | None = None
) -> pa.Table:
    """A log-sized Parquet file (a checkpoint, description.parquet), decoded in this thread,
    and only once its footer promises no more than the log can hold.

    ``pq.read_table`` hands even a 1 KiB file to Arrow's I/O and CPU thread pools, and a
    process that started them can abort at exit ("terminate called without an active
    exception", apache/arrow#34314) when interpreter teardown races their idle workers.
    Every command reads the log, and most of them never need those pools. A requested
    column the file lacks is a KeyError (``ParquetFile.read`` alone would leave it out).

    The file is untrusted: before anything is decoded, its rows (at most ``max_rows``),
    its pages' sizes and its values (``decode_budget``) are checked from the footer;
    strings a dictionary encodes are decoded as dictionaries first, so that a value
    repeated through a dictionary is measured before it is copied (plain pages decode to
    about their size). OversizedFileError names what is too large.
    """
    file = pq.ParquetFile(pa.BufferReader(raw))
    missing = [c for c in columns or () if c not in file.schema_arrow.names]
    if missing:
        raise KeyError(f"the file has no column {missing[0]!r}")
    meta = file.metadata
    if max_rows is not None and meta.num_rows > max_rows:
        raise OversizedFileError(f"it holds {meta.num_rows} rows, more than {max_rows}")
    budget = decode_budget(meta.num_rows, len(raw))
    wanted = set(columns if columns is not None else file.schema_arrow.names)
    leaves = [
        i for i in range(meta.num_columns) if meta.schema.column(i).path.split(".")[0] in wanted
    ]
    pages = values = 0
    dictionaries = set()  # leaves some page of which a dictionary encodes
    for group in range(meta.num_row_groups):
        for i in leaves:
            chunk = meta.row_group(group).column(i)
            pages += chunk.total_uncompressed_size
            values += chunk.num_values
            if chunk.has_dictionary_page and chunk.physical_type == "BYTE_ARRAY":
                dictionaries.add(chunk.path_in_schema)
    if pages > budget or values * 4 > budget:
        raise OversizedFileError(
            f"its footer promises {pages} bytes of pages and {values} values, more than "
            f"{budget} bytes for {meta.num_rows} rows"
        )
    plain = file.schema_arrow
    if dictionaries:  # plain pages decode to what they hold; a dictionary's values repeat
        file = pq.ParquetFile(pa.BufferReader(raw), read_dictionary=sorted(dictionaries))
    table = file.read(columns=columns, use_threads=False)
    decoded = sum(_decoded_bytes(chunk) for column in table.columns for chunk in column.chunks)
    if decoded > budget:
        raise OversizedFileError(f"it decodes to {decoded} bytes, more than {budget}")
    if not dictionaries:
        return table
    return table.cast(pa.schema([plain.field(name) for name in table.column_names], plain.metadata))


def decode_budget(rows: int, size: int) -> int:
    """What a log-sized Parquet file of ``rows`` rows and ``size`` bytes may decode to."""
    return min(max(rows, 1) * MAX_ENTRY_BYTES, max(DECODE_FLOOR, DECODE_RATIO * size))


def _decoded_bytes(array: pa.Array) -> int:
    """The bytes ``array`` takes once its dictionaries are decoded."""
    if pa.types.is_dictionary(array.type):
        lengths = pc.binary_length(array.dictionary)
        used = pc.sum(pc.take(lengths, array.indices)).as_py() or 0
        return int(used) + 4 * len(array)
    if pa.types.is_list(array.type):
        return 4 * (len(array) + 1) + _decoded_bytes(array.flatten())
    return array.nbytes


def table_frame(table: pa.Table) -> pd.DataFrame:
    """A log-sized Arrow table as pandas, converted in this thread (see read_parquet_bytes)."""
    return table.to_pandas(use_threads=False)


def description_table(records: Sequence[Revision], root: str | None = None) -> pa.Table:
    """The log as a flat table (``description.parquet``); upstream roots as the log of
    ``root`` stores them (relative where they can be)."""

    def version(r: Revision) -> str | None:
        if r.version is not None or not r.tables:
            return r.version
        return json.dumps({t: w.version for t, w in r.tables.items()}, sort_keys=True)

    ts = pa.timestamp("us", tz="UTC")
    return pa.table(
        {
            "name": pa.array([r.name for r in records], pa.string()),
            "timestamp": pa.array([r.timestamp for r in records], ts),
            "is_major": pa.array([r.is_major for r in records], pa.bool_()),
            "kind": pa.array([r.kind for r in records], pa.string()),
            "version": pa.array([version(r) for r in records], pa.string()),
            "sequence": pa.array([r.sequence for r in records], pa.int64()),
            "committed_at": pa.array([r.committed_at for r in records], ts),
            "tables": pa.array([sorted(r.tables) for r in records], pa.list_(pa.string())),
            "rows": pa.array([r.rows for r in records], pa.int64()),
            "tombstones": pa.array([r.tombstones for r in records], pa.int64()),
            "files": pa.array([r.file_count for r in records], pa.int64()),
            "bytes": pa.array([r.bytes for r in records], pa.int64()),
            "data_change": pa.array([r.data_change for r in records], pa.bool_()),
            "asset_key": pa.array([r.producer.get("asset_key") for r in records], pa.string()),
            "run_id": pa.array([r.producer.get("run_id") for r in records], pa.string()),
            "partition_key": pa.array(
                [r.producer.get("partition_key") for r in records], pa.string()
            ),
            "upstream": pa.array(
                [
                    json.dumps(
                        {
                            f"{stored_dataset(root, p.dataset)}#{p.table}": p.sequence
                            for p in r.upstream
                        },
                        sort_keys=True,
                    )
                    if r.upstream
                    else None
                    for r in records
                ],
                pa.string(),
            ),
        }
    )
