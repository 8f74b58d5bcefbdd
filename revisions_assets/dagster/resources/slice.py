"""The slice of one materialization, and the pure rules that derive it from the logs.

The revision IO manager resolves a run's Dagster context and the dataset logs,
once per run and asset, into a frozen ``DatasetSlice``: which window to compute,
major or minor and why, the revision timestamp, and for a scoring asset the
upstream positions it consumes from and the heads it is pinned to. Asset bodies,
``load_input`` and ``handle_output`` only read it. The rules here are pure
functions of the log records and the partitions definition (no Spark, no
instance), so sensors use exactly the same ones.

Revision timestamp: the *end* of the requested partition window (exclusive end,
e.g. partition 2013-01-05 -> 2013-01-06T00:00Z). The data of a day is complete
at the end of that day, so "state as of T" includes a partition exactly when the
whole day is before T.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import dagster as dg

from revisions_assets.core.errors import RevisionsError
from revisions_assets.core.log.consumers import consumer_position
from revisions_assets.core.log.records import Revision, UpstreamPosition
from revisions_assets.core.read.plan.selection import changes_by_sequence
from revisions_assets.core.runs.run_slice import InputSlice, RunSlice
from revisions_assets.core.runs.versions import decide_consumer_major

# re-exported: the checks and the automation compare a head with the asset's versions
from revisions_assets.core.runs.versions import version_change as version_change
from revisions_assets.core.timeutil import to_utc

from .address import Role, UpstreamRef

#: run tag that forces a major revision (values true/1/yes)
TAG_FORCE_MAJOR = "revisions/force_major"
#: run tag that compacts the table after the run's commit, whatever the policy (true/1/yes)
TAG_FORCE_COMPACTION = "revisions/force_compaction"
#: run tag pinning a scoring run's upstream heads: "<asset key>@<sequence>,…" (set by sensors),
#: or PIN_BY_PARTITIONS (set by the automation sensor: a condition cannot tag its requests)
TAG_UPSTREAM_HEADS = "revisions/upstream_heads"
#: ``revisions/upstream_heads=partitions``: pin each upstream at the newest head whose
#: unconsumed revisions the run's partitions cover (see ``fit_to_partitions``)
PIN_BY_PARTITIONS = "partitions"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


class UpstreamNotReadyError(RevisionsError):
    """A consumer ran before its upstream table had any revision."""


class InvalidRunTagError(RevisionsError, ValueError):
    """A run tag of the revisions layer whose value cannot be used."""


class UnknownInputError(RevisionsError, KeyError):
    """An input name that is not one of a scoring asset's revisioned inputs."""

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0]) if self.args else ""


class ScoringRangeError(RevisionsError, ValueError):
    """A scoring run asked for partitions other than those its upstream changes cover."""


@dataclass(frozen=True)
class UpstreamSlice:
    """One input of a scoring run: consumed from ``since`` (exclusive) up to the pinned ``head``."""

    ref: UpstreamRef
    root: str
    since: int  # the position the consumer recorded (0: never consumed)
    head: int  # the upstream dataset head the run is pinned to
    is_reset: bool  # a major of the table in (since, head]: replace, don't merge
    pending: tuple[Revision, ...]  # revisions of the table in (since, head]
    newest_timestamp: datetime  # logical time of the table's newest revision up to head
    data_version: str  # the table's data version at head: "<table>@<sequence>"

    @property
    def position(self) -> UpstreamPosition:
        """The position to record once these changes are processed: the pinned head."""
        return UpstreamPosition(self.root, self.ref.table, self.head)


@dataclass(frozen=True)
class DatasetSlice:
    """What one materialization computes and commits, resolved once per run and asset."""

    asset_key: str
    role: Role
    root: str
    table: str
    id_columns: tuple[str, ...]
    code_version: str | None
    is_major: bool
    reason: str
    timestamp: datetime  # the revision's logical time (see the module docstring)
    compute_start: datetime | None  # None for unpartitioned and scoring assets
    compute_end: datetime | None
    partitions: dg.PartitionKeyRange | None  # the partitions this run materializes
    upstream: tuple[UpstreamSlice, ...] = ()  # scoring assets: one per input
    skip: str | None = None  # scoring: nothing to consume; no revision, no materialization
    force_compaction: bool = False  # compact the table after the commit (tag or run config)
    #: scoring: a major caused only by upstream resets, not by this asset's code version:
    #: re-score the entities that changed (``ChangeSet.changed``), keep the other scores
    soft: bool = False
    #: featurized: {value column: version} declared (others are at the code version)
    field_versions: Mapping[str, str] = field(default_factory=dict)
    #: scoring: the main input's value columns whose changes count (None: all)
    uses_columns: tuple[str, ...] | None = None
    #: the dataset's log head when the slice was resolved (a run's revisions come after it)
    head: int = 0

    @property
    def partition(self) -> str | None:
        """The run's partitions as recorded in the revision: ``2013-01-05`` or ``A...B``."""
        return None if self.partitions is None else describe(self.partitions)

    @property
    def upstream_positions(self) -> tuple[UpstreamPosition, ...]:
        return tuple(u.position for u in self.upstream)

    @property
    def expected_positions(self) -> dict[tuple[str, str], int]:
        """The commit's precondition: the positions this run started from."""
        return {(u.root, u.ref.table): u.since for u in self.upstream}

    def to_run(
        self,
        run_id: str,
        *,
        compact_after: int | None,
        partition_keys: Sequence[str] = (),
        columns: Mapping[str, str] | None = None,
        joins: Mapping[str, Mapping[str, str]] | None = None,
        lookback: timedelta = timedelta(0),
    ) -> RunSlice:
        """The slice as plain data for the engine: what the run commits with, in process or in
        a remote job. ``compact_after``: the location's policy; ``columns``: the declared
        output; ``joins``: each reference input's ``on``; ``lookback``: how far before the
        window a featurized job reads its sources."""
        return RunSlice(
            asset_key=self.asset_key,
            root=self.root,
            table=self.table,
            id_columns=self.id_columns,
            code_version=self.code_version,
            is_major=self.is_major,
            reason=self.reason,
            timestamp=self.timestamp,
            run_id=run_id,
            partition=self.partition or "",
            partition_keys=tuple(partition_keys),
            window_start=self.compute_start,
            window_end=self.compute_end,
            lookback=lookback,
            upstream=tuple(
                InputSlice(
                    name=u.ref.input_name,
                    asset_key=u.ref.asset_key,
                    root=u.root,
                    table=u.ref.table,
                    id_columns=u.ref.id_columns,
                    kind=u.ref.kind,
                    since=u.since,
                    head=u.head,
                    data_version=u.data_version,
                    on=dict((joins or {}).get(u.ref.input_name, {})),
                )
                for u in self.upstream
            ),
            soft=self.soft,
            field_versions=dict(self.field_versions),
            uses_columns=self.uses_columns,
            columns=dict(columns) if columns is not None else None,
            force_compaction=self.force_compaction,
            compact_after=compact_after,
            expected_head=self.head,
        )

    def input(self, name: str) -> UpstreamSlice:
        for u in self.upstream:
            if u.ref.input_name == name:
                return u
        known = [u.ref.input_name for u in self.upstream]
        raise UnknownInputError(f"{self.asset_key} has no revisioned input {name!r}: {known}")


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


# -- partitions and windows ------------------------------------------------------------------


def compute_window(
    partitions_def: dg.TimeWindowPartitionsDefinition, keys: dg.PartitionKeyRange, is_major: bool
) -> tuple[datetime, datetime]:
    """The one place where partitions become a time window: [start, end) of the requested
    range, starting at the first partition's start for a major (docs/guides/versions.md)."""
    first = partitions_def.time_window_for_partition_key(keys.start)
    last = partitions_def.time_window_for_partition_key(keys.end)
    start = partitions_def.start if is_major else first.start
    return to_utc(start, "window start"), to_utc(last.end, "window end")


def partition_key_for_end(partitions_def: dg.TimeWindowPartitionsDefinition, end: datetime) -> str:
    """The partition whose window ends at (or contains the instant before) ``end``, clamped."""
    instant = to_utc(end, "revision timestamp") - timedelta(microseconds=1)
    first = partitions_def.get_first_partition_key()
    last = partitions_def.get_last_partition_key()
    if first is None or last is None:
        raise UpstreamNotReadyError("the partitions definition has no partitions yet")
    if instant < to_utc(partitions_def.start, "first partition start"):
        return first
    key = partitions_def.get_partition_key_for_timestamp(instant.timestamp())
    return key if partitions_def.has_partition_key(key) else last


def parse_partitions(text: str | None) -> dg.PartitionKeyRange | None:
    """``A`` or ``A...B`` (as recorded in a revision's producer) as a key range."""
    if not text:
        return None
    start, _, end = text.partition("...")
    return dg.PartitionKeyRange(start, end or start)


def revision_partitions(
    revision: Revision, partitions_def: dg.TimeWindowPartitionsDefinition
) -> dg.PartitionKeyRange:
    """The partitions a revision covers: a major every partition up to its timestamp; a minor
    those its run materialized (or, written outside Dagster, the partition of its timestamp)."""
    end = partition_key_for_end(partitions_def, revision.timestamp)
    if revision.is_major:
        return dg.PartitionKeyRange(partitions_def.get_first_partition_key() or end, end)
    produced = parse_partitions(revision.producer.get("partition_key"))
    if produced and all(
        partitions_def.has_partition_key(k) for k in (produced.start, produced.end)
    ):
        return produced
    return dg.PartitionKeyRange(end, end)


def keys_of(
    partitions_def: dg.TimeWindowPartitionsDefinition, ranges: Iterable[dg.PartitionKeyRange]
) -> set[str]:
    return {k for r in ranges for k in partitions_def.get_partition_keys_in_range(r)}


def span(
    partitions_def: dg.TimeWindowPartitionsDefinition, ranges: Iterable[dg.PartitionKeyRange]
) -> dg.PartitionKeyRange:
    """The smallest contiguous range holding every given range."""
    keys = [k for r in ranges for k in (r.start, r.end)]

    def order(key: str) -> datetime:
        return partitions_def.time_window_for_partition_key(key).start

    return dg.PartitionKeyRange(min(keys, key=order), max(keys, key=order))


def describe(keys: dg.PartitionKeyRange) -> str:
    return keys.start if keys.start == keys.end else f"{keys.start}...{keys.end}"


# -- consumers (docs/concepts/consumers.md) --------------------------------------------------------


def parse_upstream_heads(value: str | None) -> dict[str, int]:
    """The ``revisions/upstream_heads`` tag: ``<asset key>@<sequence>,…`` -> {asset key: head}."""
    heads: dict[str, int] = {}
    for item in (value or "").split(","):
        if not item.strip():
            continue
        key, _, sequence = item.strip().rpartition("@")
        if not key or not sequence.isdigit():
            raise InvalidRunTagError(
                f"run tag {TAG_UPSTREAM_HEADS}={value!r}: expected '<asset key>@<sequence>,…'"
            )
        heads[key] = int(sequence)
    return heads


def format_upstream_heads(upstream: Sequence[UpstreamSlice]) -> str:
    return ",".join(f"{u.ref.asset_key}@{u.head}" for u in upstream)


def upstream_slice(
    ref: UpstreamRef,
    root: str,
    records: Sequence[Revision],
    consumer_records: Sequence[Revision],
    consumer_table: str,
    pinned_head: int | None = None,
) -> UpstreamSlice:
    """Where a consumer stands in one upstream table, pinned at ``pinned_head`` (default: the
    upstream's head). A pin older than the recorded position never moves it back."""
    since = consumer_position(consumer_records, root, ref.table, consumer_table)
    head = len(records) if pinned_head is None else pinned_head
    if head > len(records):
        raise InvalidRunTagError(
            f"{ref.asset_key}: pinned head {head} is beyond the upstream head {len(records)}"
        )
    head = max(head, since)
    history = [r for r in records[:head] if r.wrote(ref.table)]
    if not history:
        raise UpstreamNotReadyError(
            f"input {ref.asset_key} ({root}, table {ref.table!r}) has no revision yet: "
            "materialize it first"
        )
    return UpstreamSlice(
        ref=ref,
        root=root,
        since=since,
        head=head,
        is_reset=changes_by_sequence(history, ref.table, since, head).is_reset,
        pending=tuple(r for r in history if r.sequence > since),
        newest_timestamp=max(r.timestamp for r in history),
        data_version=f"{ref.table}@{history[-1].sequence}",
    )


@dataclass(frozen=True)
class ConsumerPlan:
    """What a scoring run over ``upstream`` must do: major or minor, and which partitions
    its revision covers (None: nothing to consume)."""

    is_major: bool
    reason: str
    upstream: tuple[UpstreamSlice, ...]
    covers: dg.PartitionKeyRange | None
    #: a soft major: major only because an upstream reset (own code version unchanged)
    soft: bool = False


def plan_consumer(
    history: Sequence[Revision],
    table: str,
    code_version: str | None,
    forced: bool,
    upstream: Sequence[UpstreamSlice],
    partitions_def: dg.TimeWindowPartitionsDefinition,
) -> ConsumerPlan:
    """A scoring revision covers the partitions of the upstream revisions it consumes: every
    partition up to the main upstream's newest one for a major (a reset or a new scoring code
    version re-scores everything), else the span of the pending main revisions' partitions,
    else (reference changes only) the main upstream's newest partition."""
    resets = [u.ref.asset_key for u in upstream if u.is_reset]
    head = history[-1] if history else None
    is_major, reason, soft = decide_consumer_major(head, table, code_version, forced, resets)
    main = next(u for u in upstream if u.ref.kind == "main")
    newest = partition_key_for_end(partitions_def, main.newest_timestamp)
    if is_major:
        covers = dg.PartitionKeyRange(partitions_def.get_first_partition_key() or newest, newest)
    elif main.pending:
        covers = span(
            partitions_def, (revision_partitions(r, partitions_def) for r in main.pending)
        )
    elif any(u.pending for u in upstream):
        covers = dg.PartitionKeyRange(newest, newest)
    else:
        consumed = ", ".join(f"{u.ref.asset_key}@{u.since}" for u in upstream)
        reason = f"nothing new upstream (consumed up to {consumed})"
        return ConsumerPlan(False, reason, tuple(upstream), None)
    return ConsumerPlan(is_major, reason, tuple(upstream), covers, soft)


def check_requested_partitions(
    asset_key: str,
    plan: ConsumerPlan,
    requested: dg.PartitionKeyRange,
    history: Sequence[Revision],
    partitions_def: dg.TimeWindowPartitionsDefinition,
) -> None:
    """A scoring run materializes the partitions its changes cover, plus at most partitions
    already scored: never a day that looks scored but is not, never a scored day left out."""
    if fits(plan, requested, history, partitions_def):
        return
    consumed = ", ".join(f"{u.ref.asset_key} {u.since}->{u.head}" for u in plan.upstream)
    raise ScoringRangeError(
        f"{asset_key}: this run asks for partitions {describe(requested)}, but the upstream "
        f"revisions it consumes ({consumed}) cover {describe(plan.covers)}; materialize "
        f"{describe(plan.covers)} instead (the upstream-changes sensor requests exactly that). "
        "A run may add only partitions that are already scored."
    )


def fits(
    plan: ConsumerPlan,
    requested: dg.PartitionKeyRange,
    history: Sequence[Revision],
    partitions_def: dg.TimeWindowPartitionsDefinition,
) -> bool:
    """Whether a run of ``requested`` may commit ``plan`` (see check_requested_partitions)."""
    assert plan.covers is not None
    wanted = keys_of(partitions_def, [requested])
    covers = keys_of(partitions_def, [plan.covers])
    scored = keys_of(partitions_def, (revision_partitions(r, partitions_def) for r in history))
    return covers <= wanted and wanted <= covers | scored


def fit_to_partitions(
    refs: Sequence[UpstreamRef],
    history: Sequence[Revision],
    consumer_records: Sequence[Revision],
    table: str,
    code_version: str | None,
    forced: bool,
    log_of: Callable[[str], tuple[str, Sequence[Revision]]],
    requested: dg.PartitionKeyRange,
    partitions_def: dg.TimeWindowPartitionsDefinition,
) -> ConsumerPlan:
    """The plan of a run pinned by its partitions (``revisions/upstream_heads=partitions``).

    An automation condition requests the partitions the unconsumed revisions it saw cover, but
    cannot tag the run with the heads it saw; revisions committed since would widen the run's
    plan beyond its partitions. So the heads are chosen here: the main input at the newest head
    (its current one, else just before each of its pending revisions, newest first) whose plan
    the requested partitions materialize, the references at their heads or, failing that, where
    they were consumed. What is left stays unconsumed for the next request. No fit: the plan at
    the current heads, which ``check_requested_partitions`` refuses (ScoringRangeError)."""
    logs = {ref.dataset: log_of(ref.dataset) for ref in refs}
    current = upstream_slices(refs, consumer_records, table, logs.__getitem__)
    at_head = plan_consumer(history, table, code_version, forced, current, partitions_def)
    if at_head.covers is None:
        return at_head  # nothing to consume at all
    main = next(u for u in current if u.ref.kind == "main")
    main_heads = [main.head, *(r.sequence - 1 for r in reversed(main.pending))]
    for references_at_head in (True, False):
        for main_head in main_heads:
            pins = {
                u.ref.asset_key: main_head
                if u is main
                else (u.head if references_at_head else u.since)
                for u in current
            }
            upstream = upstream_slices(refs, consumer_records, table, logs.__getitem__, pins)
            plan = plan_consumer(history, table, code_version, forced, upstream, partitions_def)
            if plan.covers is not None and fits(plan, requested, history, partitions_def):
                return plan
    return at_head


def upstream_slices(
    refs: Sequence[UpstreamRef],
    consumer_records: Sequence[Revision],
    consumer_table: str,
    log_of: Callable[[str], tuple[str, Sequence[Revision]]],
    pins: Mapping[str, int] | None = None,
) -> tuple[UpstreamSlice, ...]:
    """``upstream_slice`` of every input; ``log_of(dataset)`` gives an upstream's (root, log)."""
    out = []
    for ref in refs:
        root, records = log_of(ref.dataset)
        pinned = (pins or {}).get(ref.asset_key)
        out.append(upstream_slice(ref, root, records, consumer_records, consumer_table, pinned))
    return tuple(out)
