"""The rules that resolve a run's slice from the logs, wherever the run is resolved: by the
revision IO manager (from a Dagster run's context) or by hand (``revisions_assets.pipes``).

Both build the one ``RunSlice`` with these: what every slice names (``RunTarget``), where a
consumer stands in each input (``input_state``), and the slice of a featurized run
(``featurized_slice``: how far a major's window reaches) or of a scoring run
(``scoring_slice``: its revision's logical time). Major or minor is ``versions.py``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from ..dataset import DEFAULT_COMPACT_AFTER
from ..log.consumers import consumer_position
from ..log.records import Revision, UpstreamPosition
from ..read.plan.selection import changes_by_sequence
from ..timeutil import now_utc
from .run_slice import InputSlice, RunSlice, RunSliceError


class UpstreamNotReadyError(RunSliceError):
    """A consumer ran before one of its input tables had any revision."""


@dataclass(frozen=True)
class RunTarget:
    """What every run's slice names, however it is resolved: the asset and its table, the
    log head the run starts from (``log_head``), the run and its partitions, and how it
    commits. ``featurized_slice`` and ``scoring_slice`` complete it into the ``RunSlice``."""

    asset_key: str
    root: str
    table: str
    id_columns: tuple[str, ...]
    code_version: str | None
    expected_head: int
    run_id: str = ""
    partition: str = ""
    partition_keys: tuple[str, ...] = ()
    columns: Mapping[str, str] | None = None
    force_compaction: bool = False
    compact_after: int | None = DEFAULT_COMPACT_AFTER

    def _fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def log_head(records: Sequence[Revision]) -> int:
    """The sequence of a log's newest entry (0: an empty log): a run's commit precondition."""
    return records[-1].sequence if records else 0


def featurized_slice(
    target: RunTarget,
    history: Sequence[Revision],
    decision: tuple[bool, str],
    window: tuple[datetime, datetime] | None,
    *,
    lookback: timedelta = timedelta(0),
    field_versions: Mapping[str, str] | None = None,
) -> RunSlice:
    """The slice of a featurized run (``window``: its compute window ``[start, end)``) or of a
    reference run (None: a full snapshot, stamped now). ``decision``: (is_major, why). A
    major's window reaches the table's newest revision (``major_window_end``); the revision
    is stamped at the window's end."""
    is_major, reason = decision
    start, end = window if window is not None else (None, None)
    if end is not None and is_major:
        end = major_window_end(history, end)
    return RunSlice(
        **target._fields(),
        is_major=is_major,
        reason=reason,
        timestamp=end or now_utc(),
        compute_start=start,
        compute_end=end,
        lookback=lookback,
        field_versions=dict(field_versions or {}),
    )


def scoring_slice(
    target: RunTarget,
    history: Sequence[Revision],
    decision: tuple[bool, str, bool],
    upstream: Sequence[InputSlice],
    covered_end: datetime,
    *,
    uses_columns: Sequence[str] | None = None,
    skip: str | None = None,
) -> RunSlice:
    """The slice of a scoring run over ``upstream``: ``decision`` (is_major, why, soft), the
    end of the newest partition it covers (``consumer_timestamp``: its revision's logical
    time), ``skip``: why there is nothing to consume (no revision)."""
    is_major, reason, soft = decision
    return RunSlice(
        **target._fields(),
        is_major=is_major,
        reason=reason,
        timestamp=consumer_timestamp(history, covered_end),
        upstream=tuple(upstream),
        soft=soft,
        uses_columns=tuple(uses_columns) if uses_columns is not None else None,
        skip=skip,
    )


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
