"""The description log: the transaction keeper of a dataset.

Layout under the dataset root::

    _log/00000000000000000001.json   one immutable entry per commit (the truth)
    _log/checkpoint-…0100.parquet    every CHECKPOINT_INTERVAL commits: all entries so far
    _log/_last_checkpoint            a hint: the newest checkpoint's sequence
    description.parquet              the log as a flat table, rewritten after every commit

A commit is the exclusive creation of entry ``head + 1`` (put-if-absent). Two
writers racing for the same sequence: one wins, the other re-reads the log,
re-validates and retries at the next sequence. Sequences are therefore
gap-free, and nothing is ever lost or overwritten.

Opening a log reads the newest checkpoint and then probes forward entry by
entry, so both opening and committing cost O(CHECKPOINT_INTERVAL) reads,
whatever the length of the log. ``description.parquet`` is derived: it is
rewritten after each commit (and healed on open if a writer died before
rewriting it); the engine itself never trusts it.

The file names are spelled in ``layout``; ``loghealth`` parses entries strictly and
checks, on the first refresh, that the log is whole (no gap, not lost).
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import InvalidArgumentError
from .layout import DESCRIPTION, LAST_CHECKPOINT, LOG_DIR, checkpoint_path, entry_path
from .loghealth import check_log_health, parse_entry
from .records import Revision
from .storage import Storage

CHECKPOINT_INTERVAL = 100
__all__ = [
    "CHECKPOINT_INTERVAL",
    "DESCRIPTION",
    "LOG_DIR",
    "RevisionLog",
    "checkpoint_path",
    "description_table",
    "entry_path",
    "log_frame",
]


class RevisionLog:
    """The committed revisions of one dataset, cached and refreshed incrementally."""

    def __init__(self, storage: Storage):
        self.storage = storage
        self._records: list[Revision] = []
        self._loaded = False
        self._description: pa.Table | None = None  # rows for the first records, appended to

    # -- reading ---------------------------------------------------------------------------

    @property
    def records(self) -> tuple[Revision, ...]:
        """The revisions known to this handle, in sequence order (call refresh() first)."""
        return tuple(self._records)

    @property
    def head(self) -> int:
        return len(self._records)

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
        return parse_entry(raw, sequence, self.storage.uri)

    def _read_checkpoint(self) -> list[Revision]:
        hint = self.storage.read(LAST_CHECKPOINT)
        if hint is None:
            return []
        try:
            sequence = int(json.loads(hint)["sequence"])
            raw = self.storage.read(checkpoint_path(sequence))
            if raw is None:
                return []
            table = pq.read_table(io.BytesIO(raw))
            records = [Revision.from_json(text) for text in table.column("record").to_pylist()]
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
        payload = record.to_json().encode()
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
        records = self._records[:sequence]
        table = pa.table(
            {
                "sequence": pa.array([r.sequence for r in records], pa.int64()),
                "record": pa.array([r.to_json() for r in records], pa.string()),
            }
        )
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
            self.storage.write(DESCRIPTION, self._description_parquet())
            if not self.storage.exists(entry_path(self.head + 1)):
                return

    def _description_parquet(self) -> bytes:
        """description.parquet for the cached log, appending only rows not yet tabulated."""
        done = 0 if self._description is None else self._description.num_rows
        new_rows = description_table(self._records[done:])
        self._description = (
            new_rows
            if self._description is None
            else pa.concat_tables([self._description, new_rows])
        )
        if self._description.column(0).num_chunks > 64:  # one chunk per commit otherwise
            self._description = self._description.combine_chunks()
        buf = io.BytesIO()
        pq.write_table(self._description, buf)
        return buf.getvalue()

    def description_is_current(self) -> bool:
        raw = self.storage.read(DESCRIPTION)
        if raw is None:
            return self.head == 0
        try:
            return pq.read_metadata(io.BytesIO(raw)).num_rows == self.head
        except (pa.ArrowException, ValueError):
            return False  # damaged: rewrite it


def log_frame(records: Sequence[Revision]) -> pd.DataFrame:
    """The log as a pandas DataFrame, one row per revision, in sequence order."""
    return description_table(records).to_pandas()


def description_table(records: Sequence[Revision]) -> pa.Table:
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
                    json.dumps({p.key: p.sequence for p in r.upstream}, sort_keys=True)
                    if r.upstream
                    else None
                    for r in records
                ],
                pa.string(),
            ),
        }
    )
