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

The file names are spelled in ``layout``; ``loghealth`` parses entries strictly and
checks, on the first refresh, that the log is whole (no gap, not lost).
"""

from __future__ import annotations

import gc
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptLogError, InvalidArgumentError
from ..storage.base import Storage
from ..storage.footer import stored_file
from ..timeutil import to_micros
from .health import REPAIR_HINT, check_log_health, parse_entry
from .layout import DESCRIPTION, LAST_CHECKPOINT, LOG_DIR, checkpoint_path, entry_path
from .records import DATA_KINDS, Revision, stored_dataset, upstream_doc
from .view import LogView

if TYPE_CHECKING:  # pandas loads only when a frame is asked for
    import pandas as pd

CHECKPOINT_INTERVAL = 100
__all__ = [
    "CHECKPOINT_INTERVAL",
    "DESCRIPTION",
    "LOG_DIR",
    "LostEntry",
    "RevisionLog",
    "checkpoint_path",
    "description_table",
    "entry_path",
    "log_frame",
    "lost_entries",
    "lost_head_message",
    "read_description",
    "read_parquet_bytes",
    "records_of_checkpoint",
    "table_frame",
]


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
        log raises CorruptLogError before anything could be written on top of it.
        """
        opening = not self._loaded
        if opening:
            self._records = self._read_checkpoint()
            self._loaded = True
        while True:
            entry = self._read_entry(self.head + 1)
            if entry is None:
                break
            self._records.append(entry)
        if opening:
            check_log_health(self.storage, self.head)
        return self.records

    def _read_entry(self, sequence: int) -> Revision | None:
        raw = self.storage.read(entry_path(sequence))
        if raw is None:
            return None
        return parse_entry(raw, sequence, self.root)

    def _read_checkpoint(self) -> list[Revision]:
        hint = self.storage.read(LAST_CHECKPOINT)
        if hint is None:
            return []
        try:
            sequence = int(json.loads(hint)["sequence"])
            raw = self.storage.read(checkpoint_path(sequence))
            if raw is None:
                return []
            records = records_of_checkpoint(read_parquet_bytes(raw), self.root)
        except (ValueError, KeyError, TypeError, pa.ArrowException):
            return []  # a damaged hint or checkpoint only costs a longer probe
        if [r.sequence for r in records] != list(range(1, len(records) + 1)):
            return []
        return records

    # -- writing ---------------------------------------------------------------------------

    def try_append(self, record: Revision) -> bool:
        """Commit ``record`` as entry ``head + 1``; False when another writer took it first."""
        if record.sequence != self.head + 1:
            raise InvalidArgumentError(
                f"record sequence {record.sequence} is not the log's head + 1 ({self.head + 1})"
            )
        if self._description is None:  # once per handle: is the head the log's end?
            self._description = self._stored_description()
        self._refuse_lost_head()
        payload = record.to_json(self.root).encode()
        if not self.storage.create_exclusive(entry_path(record.sequence), payload):
            return False
        self._records.append(record)
        return True

    def after_commit(self) -> None:
        """Post-commit upkeep: checkpoint when due, then bring description.parquet current."""
        if self.head % CHECKPOINT_INTERVAL == 0:
            self.write_checkpoint(self.head)
        self.publish_description()

    def write_checkpoint(self, sequence: int) -> None:
        table = checkpoint_table(self._records[:sequence], self.root)
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        self.storage.create_exclusive(checkpoint_path(sequence), buf.getvalue())
        current = self.storage.read(LAST_CHECKPOINT)
        if current is None or int(json.loads(current)["sequence"]) < sequence:
            self.storage.write(LAST_CHECKPOINT, json.dumps({"sequence": sequence}).encode())

    def publish_description(self, max_rounds: int = 20) -> None:
        """Rewrite description.parquet until no newer commit appeared meanwhile.

        Each writer re-checks the head after its own rewrite, so the last rewrite to land
        always covers every commit that finished before it.
        """
        for _ in range(max_rounds):
            self.refresh()
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
        stored = read_description(self.storage)
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


def read_description(storage: Storage) -> pa.Table | None:
    """description.parquet, or None when it is missing, damaged or of an older version."""
    raw = storage.read(DESCRIPTION)
    if raw is None:
        return None
    empty = description_table([])
    try:
        stored = read_parquet_bytes(raw, columns=empty.column_names)
    except (pa.ArrowException, ValueError, KeyError):
        return None
    return stored if stored.schema == empty.schema else None


def lost_entries(
    storage: Storage, records: Sequence[Revision], stored: pa.Table | None = None
) -> tuple[LostEntry, ...]:
    """The entries description.parquet lists after ``records`` (the log read up to its
    head) when it lists exactly ``records`` before them.

    description.parquet is rewritten only after a commit, so such entries were committed
    and their entry files are lost (deleted, or never restored with the rest of the log).
    Empty when it lists no more, lists another history (a log an operator cut by hand:
    stale, not evidence), or the next entry exists (committed while we looked).
    ``stored``: description.parquet already read (else its footer is read first).
    """
    head = len(records)
    if stored is None:
        footer = stored_file(storage, DESCRIPTION)
        if footer.rows is None or footer.rows <= head:
            return ()
        stored = read_description(storage)
    if stored is None or stored.num_rows <= head:
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


def checkpoint_table(records: Sequence[Revision], root: str | None = None) -> pa.Table:
    """A checkpoint: every entry's JSON, and its small fields as columns (upstream roots
    stored relative to the dataset's ``root`` where they can be)."""
    return pa.table(
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


def records_of_checkpoint(table: pa.Table, root: str | None = None) -> list[Revision]:
    """The entries of a checkpoint of the dataset at ``root``. Data revisions are
    materialized from the columns and parse their JSON only when a detail is needed;
    maintenance entries (few) are parsed. A checkpoint of the first format (sequence and
    JSON only) is parsed in full."""
    texts = table.column("record").to_pylist()
    if not set(CHECKPOINT_COLUMNS) <= set(table.column_names):
        return [Revision.from_json(text, root) for text in texts]
    columns = [table.column(c).to_pylist() for c in CHECKPOINT_COLUMNS]
    kinds = columns[CHECKPOINT_COLUMNS.index("kind")]
    records = []
    # thousands of small objects, none of them garbage: a collection pass (which walks
    # every object of the process) would cost more than building them
    collecting = gc.isenabled()
    gc.disable()
    try:
        for text, kind, row in zip(texts, kinds, zip(*columns, strict=True), strict=True):
            if kind in DATA_KINDS:
                records.append(Revision.from_checkpoint_row(row, text, root))
            else:
                records.append(Revision.from_json(text, root))
    finally:
        if collecting:
            gc.enable()
    return records


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


def read_parquet_bytes(raw: bytes, columns: Sequence[str] | None = None) -> pa.Table:
    """A log-sized Parquet file (a checkpoint, description.parquet), decoded in this thread.

    ``pq.read_table`` hands even a 1 KiB file to Arrow's I/O and CPU thread pools, and a
    process that started them can abort at exit ("terminate called without an active
    exception", apache/arrow#34314) when interpreter teardown races their idle workers.
    Every command reads the log, and most of them never need those pools. A requested
    column the file lacks is a KeyError (``ParquetFile.read`` alone would leave it out).
    """
    file = pq.ParquetFile(pa.BufferReader(raw))
    missing = [c for c in columns or () if c not in file.schema_arrow.names]
    if missing:
        raise KeyError(f"the file has no column {missing[0]!r}")
    return file.read(columns=columns, use_threads=False)


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
