"""The pure rules that turn a Dagster run's partitions and the dataset logs into its slice.

The revision IO manager resolves a run's Dagster context and the dataset logs, once per
run and asset, into the one frozen ``RunSlice`` (``revisions_assets.core.runs``): which
window to compute, major or minor and why, the revision timestamp, and for a scoring asset
the upstream positions it consumes from and the heads it is pinned to. Asset bodies,
``load_input`` and the commit only read it. The rules here are pure functions of the log
records and the partitions definition (no Spark, no instance), so sensors and the
automation condition use exactly the same ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import dagster as dg

from revisions_assets.core.errors import RevisionsError
from revisions_assets.core.log.records import Revision
from revisions_assets.core.runs.resolve import InputState, UpstreamNotReadyError, input_state
from revisions_assets.core.runs.run_slice import RunSlice
from revisions_assets.core.runs.versions import decide_consumer_major

# re-exported: the checks and the automation compare a head with the asset's versions
from revisions_assets.core.runs.versions import version_change as version_change
from revisions_assets.core.timeutil import to_utc

from .address import UpstreamRef

#: the run's slice, as asset functions receive it (``window``): the engine's ``RunSlice``
DatasetSlice = RunSlice
#: where a scoring run stands in one of its inputs (``revisions_assets.core.runs.InputState``)
UpstreamSlice = InputState

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


class InvalidRunTagError(RevisionsError, ValueError):
    """A run tag of the revisions layer whose value cannot be used."""


class ScoringRangeError(RevisionsError, ValueError):
    """A scoring run asked for other partitions than those its upstream changes cover.
    ``covers``: the range to materialize instead (``A`` or ``A...B``)."""

    def __init__(self, message: str, covers: str = ""):
        super().__init__(message)
        self.covers = covers


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
    return ",".join(f"{u.input.asset_key}@{u.head}" for u in upstream)


def upstream_slice(
    ref: UpstreamRef,
    root: str,
    records: Sequence[Revision],
    consumer_records: Sequence[Revision],
    consumer_table: str,
    pinned_head: int | None = None,
) -> UpstreamSlice:
    """Where a consumer stands in one upstream table, pinned at ``pinned_head`` (default: the
    upstream's head; a run tag's pin beyond it: InvalidRunTagError)."""
    if pinned_head is not None and pinned_head > len(records):
        raise InvalidRunTagError(
            f"{ref.asset_key}: pinned head {pinned_head} is beyond the upstream head {len(records)}"
        )
    return input_state(
        name=ref.input_name,
        asset_key=ref.asset_key,
        kind=ref.kind,
        root=root,
        table=ref.table,
        records=records,
        consumer_records=consumer_records,
        consumer_table=consumer_table,
        id_columns=ref.id_columns,
        on=ref.on,
        pinned_head=pinned_head,
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
    resets = [u.input.asset_key for u in upstream if u.is_reset]
    head = history[-1] if history else None
    is_major, reason, soft = decide_consumer_major(head, table, code_version, forced, resets)
    main = next(u for u in upstream if u.input.kind == "main")
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
        consumed = ", ".join(f"{u.input.asset_key}@{u.since}" for u in upstream)
        reason = f"nothing new upstream (consumed up to {consumed})"
        return ConsumerPlan(False, reason, tuple(upstream), None)
    return ConsumerPlan(is_major, reason, tuple(upstream), covers, soft)


def check_requested_partitions(
    asset_key: str,
    plan: ConsumerPlan,
    requested: dg.PartitionKeyRange,
    history: Sequence[Revision],
    partitions_def: dg.TimeWindowPartitionsDefinition,
    requested_by: str = "the revisions automation requests exactly that",
) -> None:
    """A scoring run materializes the partitions its changes cover, plus at most partitions
    already scored: never a day that looks scored but is not, never a scored day left out.
    Decided from the logs alone, before any data is read. ``requested_by``: what requests the
    right range in this project (named in the error)."""
    if fits(plan, requested, history, partitions_def):
        return
    consumed = ", ".join(f"{u.input.asset_key} {u.since}->{u.head}" for u in plan.upstream)
    covers = describe(plan.covers)
    raise ScoringRangeError(
        f"{asset_key}: this run asks for partitions {describe(requested)}, but the upstream "
        f"revisions it consumes ({consumed}) cover {covers}; materialize {covers} instead "
        f"({requested_by}). A run may add only partitions that are already scored.",
        covers,
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
    main = next(u for u in current if u.input.kind == "main")
    main_heads = [main.head, *(r.sequence - 1 for r in reversed(main.pending))]
    for references_at_head in (True, False):
        for main_head in main_heads:
            pins = {
                u.input.asset_key: main_head
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


# -- partition freshness and gaps ------------------------------------------------------------


def partition_landings(
    history: Sequence[Revision], partitions_def: dg.TimeWindowPartitionsDefinition
) -> dict[str, Revision]:
    """{partition: the newest revision covering it} (``revision_partitions``): when each
    partition's data last landed is that revision's ``committed_at``."""
    landed: dict[str, Revision] = {}
    for revision in history:  # in sequence order: a later commit replaces an earlier one
        covered = revision_partitions(revision, partitions_def)
        for key in partitions_def.get_partition_keys_in_range(covered):
            landed[key] = revision
    return landed


def partition_gaps(
    landed: Mapping[str, Revision], partitions_def: dg.TimeWindowPartitionsDefinition
) -> list[dg.PartitionKeyRange]:
    """The ranges of partitions between the first and the newest covered ones that no
    revision covers: never materialized, although later ones were."""
    if not landed:
        return []
    keys = partitions_def.get_partition_keys_in_range(
        span(partitions_def, [dg.PartitionKeyRange(k, k) for k in landed])
    )
    missing = [k for k in keys if k not in landed]
    if not missing:
        return []
    return partitions_def.subset_with_partition_keys(missing).get_partition_key_ranges(
        partitions_def
    )
