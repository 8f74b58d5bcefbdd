"""The rules that resolve a run's slice from the logs, wherever the run is resolved: by the
revision IO manager (from a Dagster run's context) or by hand (``revisions_assets.pipes``).

Both build the one ``RunSlice`` with these: where a consumer stands in each input
(``input_state``), how far a major's window reaches (``major_window_end``), and a scoring
revision's logical time (``consumer_timestamp``). Major or minor is ``versions.py``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..log.consumers import consumer_position
from ..log.records import Revision, UpstreamPosition
from ..read.plan.selection import changes_by_sequence
from .run_slice import InputSlice, RunSliceError


class UpstreamNotReadyError(RunSliceError):
    """A consumer ran before one of its input tables had any revision."""


@dataclass(frozen=True)
class InputState:
    """Where a consumer stands in one input table (docs/concepts/consumers.md): its slice of
    the input (from the recorded position up to the pinned head), whether those changes are
    a reset, the input's revisions still to consume, and the logical time of its newest
    revision up to the head."""

    input: InputSlice
    is_reset: bool
    pending: tuple[Revision, ...]
    newest_timestamp: datetime

    @property
    def since(self) -> int:
        return self.input.since

    @property
    def head(self) -> int:
        return self.input.head

    @property
    def root(self) -> str:
        return self.input.root

    @property
    def data_version(self) -> str:
        return self.input.data_version

    @property
    def position(self) -> UpstreamPosition:
        return self.input.position


def input_state(
    *,
    name: str,
    asset_key: str,
    kind: str,
    root: str,
    table: str,
    records: Sequence[Revision],
    consumer_records: Sequence[Revision],
    consumer_table: str,
    id_columns: Sequence[str] | None = None,
    on: Mapping[str, str] | None = None,
    pinned_head: int | None = None,
) -> InputState:
    """Where the consumer table ``consumer_table`` (its log: ``consumer_records``) stands in
    the input ``table`` of ``root`` (its log: ``records``), pinned at ``pinned_head`` (default:
    the input's head). A pin older than the recorded position never moves it back.
    ``id_columns``: the input's (default: as its newest revision records them)."""
    since = consumer_position(consumer_records, root, table, consumer_table)
    head = len(records) if pinned_head is None else pinned_head
    if head > len(records):
        raise RunSliceError(
            f"{asset_key or name}: head {head} is beyond the input's {len(records)}"
        )
    head = max(head, since)
    history = [r for r in records[:head] if r.wrote(table)]
    if not history:
        raise UpstreamNotReadyError(
            f"input {asset_key or name} ({root}, table {table!r}) has no revision yet: "
            "materialize it first"
        )
    slice_ = InputSlice(
        name=name,
        asset_key=asset_key,
        root=root,
        table=table,
        id_columns=tuple(id_columns or history[-1].tables[table].id_columns),
        kind=kind,
        since=since,
        head=head,
        data_version=f"{table}@{history[-1].sequence}",
        on=dict(on or {}),
    )
    return InputState(
        input=slice_,
        is_reset=changes_by_sequence(history, table, since, head).is_reset,
        pending=tuple(r for r in history if r.sequence > since),
        newest_timestamp=max(r.timestamp for r in history),
    )


def major_window_end(history: Sequence[Revision], end: datetime) -> datetime:
    """Where a major's window ends: at the requested end, or at the logical time of the
    table's newest revision when that is later. A major re-evaluates every entity, so a major
    launched for one partition still covers every partition the table has: its revision
    leaves no partition computed by the old code (docs/guides/versions.md)."""
    return max([end, *(r.timestamp for r in history)])


def consumer_timestamp(history: Sequence[Revision], covered_end: datetime) -> datetime:
    """A scoring revision's logical time: the end of the newest partition it materializes
    (run by hand: the logical time of its main input's newest revision, which is the end of
    that revision's partition), never before the table's own newest revision, so newer scores
    are never shadowed by older ones."""
    return max([covered_end, *(r.timestamp for r in history)])
