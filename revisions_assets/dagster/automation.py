"""Declarative Automation from the revisions log: the log says which partitions need a run.

The truth is in the log, not in Dagster's event history: revisions committed outside
Dagster count, a scoring run is sized by the upstream revisions it has not consumed, and a
code version bump of a partitioned asset is seen (Dagster's ``code_version_changed()``
compares tick to tick and misses partitioned assets: dagster#22553, #33708). One pure
reading of the logs, ``log_request``, serves both ways of acting on it:

- ``RevisionsLogCondition``, an ``AutomationCondition`` evaluated in the code server
  (``revisions_automation_sensor``), composed with Dagster's built-ins
  (``revisions_automation()``: not while in progress, not before the inputs' blocking checks
  passed), so the UI shows why each run was requested;
- the two sensors of ``sensors.py``, for deployments that cannot evaluate conditions in the
  code server.

What it asks for (docs/guides/versions.md, docs/concepts/consumers.md):

- an asset whose code or field versions differ from its table's head: one major over its
  materialized range (first partition .. the partition of the head's timestamp); for a
  scoring asset the partitions its major will cover. A major launched by hand for one
  partition covers the same range and reports every partition of it, so either way the
  catalog ends with the whole range at the new version;
- a scoring asset with unconsumed upstream revisions: exactly the partitions they cover;
- a featurized asset with gaps (partitions between materialized ones that were never
  materialized, ``RevisionsGapCondition``): each gap, once the asset's upstream assets have
  it (``revisions_automation()`` composes it with ``~any_deps_missing()``).

A range is one run (the assets' ``BackfillPolicy.single_run()``: the automation sensor emits
a backfill, which launches one run per range). A condition cannot tag the runs it requests
with the upstream heads it saw, so its sensor tags every run
``revisions/upstream_heads=partitions``: the IO manager pins each upstream at the newest head
whose unconsumed revisions the run's partitions cover (``resources.slice.fit_to_partitions``).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from .factory import io_manager_key_of
from .lag import read_consumer
from .resources.address import (
    NotRevisionedAssetError,
    Role,
    address_of,
    field_versions,
    role_of,
    upstream_refs,
)
from .resources.location import DatasetLocation
from .resources.slice import (
    PIN_BY_PARTITIONS,
    RANGE_END_TAG,
    RANGE_START_TAG,
    TAG_UPSTREAM_HEADS,
    UpstreamNotReadyError,
    describe,
    format_upstream_heads,
    partition_gaps,
    partition_key_for_end,
    partition_landings,
    plan_consumer,
    version_change,
)

#: run tag saying why the log asked for a run
TAG_REASON = "revisions/reason"


@dataclass(frozen=True)
class LogRequest:
    """A run the log asks for: the partitions (None: an unpartitioned asset), and the run key
    of the log state it answers (the same state is never requested twice)."""

    asset_key: dg.AssetKey
    run_key: str
    partitions: dg.PartitionKeyRange | None
    tags: dict[str, str] = field(default_factory=dict)

    def run_request(self) -> dg.RunRequest:
        """One run: a single partition by its key, a range as a single-run backfill."""
        single = self.partitions is not None and self.partitions.start == self.partitions.end
        ranged = self.partitions is not None and not single
        return dg.RunRequest(
            run_key=self.run_key,
            asset_selection=[self.asset_key],
            partition_key=self.partitions.start if single and self.partitions else None,
            tags={
                **self.tags,
                **(
                    {RANGE_START_TAG: self.partitions.start, RANGE_END_TAG: self.partitions.end}
                    if ranged and self.partitions
                    else {}
                ),
            },
        )


def _time_partitions(asset: dg.AssetsDefinition) -> dg.TimeWindowPartitionsDefinition | None:
    pdef = asset.partitions_def
    return pdef if isinstance(pdef, dg.TimeWindowPartitionsDefinition) else None


def version_request(location: DatasetLocation, asset: dg.AssetsDefinition) -> LogRequest | None:
    """A major over the materialized range when the asset's code or field versions differ from
    its table's head (None: current, or never materialized: its first run is a major anyway)."""
    key = asset.key.to_user_string()
    address = address_of(asset)
    history = [r for r in location.read_log(address.dataset) if r.wrote(address.table)]
    if not history:
        return None
    code_version = asset.code_versions_by_key.get(asset.key)
    metadata = asset.metadata_by_key[asset.key]
    change = version_change(history[-1], address.table, code_version, field_versions(metadata))
    if change is None:
        return None
    run_key = f"major:{key}:{code_version}@{history[-1].sequence}"
    tags = {TAG_REASON: change}
    pdef = _time_partitions(asset)
    if pdef is None:
        return LogRequest(asset.key, run_key, None, tags)
    if upstream_refs(metadata):
        try:
            state = read_consumer(location, asset)
        except UpstreamNotReadyError:
            return None
        plan = plan_consumer(history, address.table, code_version, False, state.upstream, pdef)
        assert plan.covers is not None  # a new code version: a major covers everything
        tags[TAG_UPSTREAM_HEADS] = format_upstream_heads(plan.upstream)
        return LogRequest(asset.key, run_key, plan.covers, tags)
    newest = partition_key_for_end(pdef, max(r.timestamp for r in history))
    first = pdef.get_first_partition_key() or newest
    return LogRequest(asset.key, run_key, dg.PartitionKeyRange(first, newest), tags)


def upstream_request(location: DatasetLocation, asset: dg.AssetsDefinition) -> LogRequest | None:
    """The partitions a scoring asset's unconsumed upstream revisions cover, pinned to the
    upstream heads seen (None: nothing unconsumed, or an input without any revision)."""
    pdef = _time_partitions(asset)
    if pdef is None or not upstream_refs(asset.metadata_by_key[asset.key]):
        return None
    try:
        state = read_consumer(location, asset)
    except UpstreamNotReadyError:
        return None
    behind = sum(len(u.pending) for u in state.upstream)
    if behind == 0:
        return None
    plan = plan_consumer(
        state.history,
        address_of(asset).table,
        asset.code_versions_by_key.get(asset.key),
        False,
        state.upstream,
        pdef,
    )
    assert plan.covers is not None  # something is pending
    heads = format_upstream_heads(state.upstream)
    return LogRequest(
        asset.key,
        f"score:{asset.key.to_user_string()}:{heads}",
        plan.covers,
        {TAG_REASON: f"{behind} upstream revision(s) not consumed", TAG_UPSTREAM_HEADS: heads},
    )


def log_request(location: DatasetLocation, asset: dg.AssetsDefinition) -> LogRequest | None:
    """What the log asks of one asset: its major when its versions changed, else (scoring) the
    partitions its unconsumed upstream revisions cover. A scoring major consumes everything
    pending up to the heads it is pinned to, so one request answers both."""
    return version_request(location, asset) or upstream_request(location, asset)


def gap_requests(location: DatasetLocation, asset: dg.AssetsDefinition) -> list[LogRequest]:
    """One run per range of a featurized asset's partitions that lie between materialized
    ones and were never materialized (none while a major is due: it covers them)."""
    pdef = _time_partitions(asset)
    metadata = asset.metadata_by_key[asset.key]
    if pdef is None or role_of(metadata) != Role.FEATURIZED:
        return []
    if version_request(location, asset) is not None:
        return []
    address = address_of(asset)
    history = [r for r in location.read_log(address.dataset) if r.wrote(address.table)]
    head = history[-1].sequence if history else 0
    key = asset.key.to_user_string()
    return [
        LogRequest(
            asset.key,
            f"gap:{key}:{describe(gap)}@{head}",
            gap,
            {TAG_REASON: f"partitions {describe(gap)} never materialized"},
        )
        for gap in partition_gaps(partition_landings(history, pdef), pdef)
    ]


class _LogCondition(dg.AutomationCondition[dg.AssetKey]):
    """True for the partitions of the runs the revisions log asks for (``requests``), once
    per log state: once a request went out (the asset was requested on the tick after it
    was true), the same run key is not asked for again, so a failed run is not retried in a
    loop: its request comes back when the log changes (or retry the run).

    Evaluated in the code server only (``revisions_automation_sensor``): it reads the logs
    through the location of the asset's IO manager."""

    #: a request is true for all of its partitions or none (a range is one revision)
    all_or_nothing = True

    def requests(self, location: DatasetLocation, asset: dg.AssetsDefinition) -> list[LogRequest]:
        raise NotImplementedError

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        asset = _assets_def(context)
        requests = self.requests(_location(asset), asset)
        state = json.loads(context.cursor or "{}")
        handled = set(state.get("handled", []))
        previous = context.get_previous_requested_subset(context.key)
        if previous is not None and not previous.is_empty:
            handled |= set(state.get("pending", []))  # requested on the previous tick
        true = context.get_empty_subset()
        pending = []
        for request in requests:
            if request.run_key in handled:
                continue
            wanted = context.candidate_subset
            if request.partitions is not None and asset.partitions_def is not None:
                keys = asset.partitions_def.get_partition_keys_in_range(request.partitions)
                wanted = wanted.compute_intersection_with_partition_keys(set(keys))
                complete = wanted.size == len(keys)
            else:
                complete = not wanted.is_empty
            if wanted.is_empty or (self.all_or_nothing and not complete):
                continue
            true = true.compute_union(wanted)
            pending.append(request.run_key)
        asked = {r.run_key for r in requests}
        cursor = {"handled": sorted(handled & asked), "pending": pending}
        return dg.AutomationResult(context, true, cursor=json.dumps(cursor))


class RevisionsLogCondition(_LogCondition):
    """True for exactly the partitions the revisions log says need a run (``log_request``),
    once per log state.

    All or nothing: when it is not the first operand of an ``&``, the partitions an earlier
    operand left out make it false for the whole range (a range is one revision; a part of it
    is a run the IO manager refuses).
    """

    @property
    def name(self) -> str:
        return "revisions_log"

    @property
    def description(self) -> str:
        return (
            "The revisions log says these partitions need a run: a code or field version "
            "changed (a major over the materialized range), or upstream revisions are not "
            "consumed yet (the partitions they cover)"
        )

    def requests(self, location: DatasetLocation, asset: dg.AssetsDefinition) -> list[LogRequest]:
        request = log_request(location, asset)
        return [request] if request is not None else []


class RevisionsGapCondition(_LogCondition):
    """True for the partitions of a featurized asset that lie between materialized ones and
    were never materialized (``gap_requests``), once per log state; each is a minor of its
    own, so a part of a gap may run."""

    all_or_nothing = False

    @property
    def name(self) -> str:
        return "revisions_gaps"

    @property
    def description(self) -> str:
        return "Partitions between materialized ones that were never materialized"

    def requests(self, location: DatasetLocation, asset: dg.AssetsDefinition) -> list[LogRequest]:
        return gap_requests(location, asset)


def _assets_def(context: dg.AutomationContext) -> dg.AssetsDefinition:
    node = context.asset_graph.get(context.key)
    assets_def = getattr(node, "assets_def", None)
    if assets_def is None:
        raise NotRevisionedAssetError(
            f"{context.key.to_user_string()}: the revisions conditions read the revisions log, "
            "so they are evaluated in the code server: target the asset with "
            "revisions_automation_sensor (use_user_code_server=True)"
        )
    return assets_def


def _location(asset: dg.AssetsDefinition) -> DatasetLocation:
    """The location of the IO manager the asset is bound to in its Definitions (read-only)."""
    key = io_manager_key_of(asset)
    resource = asset.resource_defs.get(key)
    if resource is None:
        raise NotRevisionedAssetError(
            f"{asset.key.to_user_string()}: no {key!r} resource bound to the asset; give the "
            "Definitions revisions_resources(...)"
        )
    return built_location(resource, key)


def built_location(io_manager: Any, key: str) -> DatasetLocation:
    """The location of a revision IO manager resource (bound under ``key``), built as a run
    builds it (its S3 access configured), once per code server: a tick evaluates the
    conditions of every asset, and building a resource costs more than reading a log."""
    cached = _LOCATIONS.get(id(io_manager))
    if cached is None or cached[0] is not io_manager:
        with dg.build_resources({key: io_manager}) as built:
            cached = _LOCATIONS[id(io_manager)] = (io_manager, getattr(built, key).location)
    return cached[1]


#: the built location of each bound IO manager
_LOCATIONS: dict[int, tuple[object, DatasetLocation]] = {}


def revisions_log_condition() -> RevisionsLogCondition:
    """The bare condition, to compose with Dagster's (put it last in an ``&``)."""
    return RevisionsLogCondition()


def revisions_automation() -> dg.AutomationCondition:
    """The log's requests, and its gaps once the asset's upstream assets have them, not while
    a run of the asset is in progress, and not before the blocking checks of the asset's
    inputs passed (a scoring run never consumes a revision whose blocking checks failed).
    Only materializable upstream assets count for a gap: an external source (an
    ``AssetSpec``) is taken as having every partition."""
    upstream_has_it = ~dg.AutomationCondition.any_deps_missing().allow(
        dg.AssetSelection.all().materializable()
    )
    return (
        ~dg.AutomationCondition.in_progress()
        & dg.AutomationCondition.all_deps_blocking_checks_passed()
        & (RevisionsLogCondition() | (RevisionsGapCondition() & upstream_has_it))
    ).with_label("revisions_automation")


def backfill_runs(
    request: dg.RunRequest, assets: Sequence[dg.AssetsDefinition]
) -> list[dg.RunRequest]:
    """The runs the backfill daemon launches for an automation sensor's request when every
    asset has ``BackfillPolicy.single_run()``: one per asset and partition range, in the order
    of ``assets`` (upstream first); a request of one run is returned as it is. For running
    automation in process (the demo, tests); a deployment's daemons do this themselves."""
    subset = request.asset_graph_subset
    if subset is None:
        return [request]
    runs = []
    for asset in assets:
        if asset.key not in subset.asset_keys:
            continue
        if asset.partitions_def is None:
            runs.append(dg.RunRequest(asset_selection=[asset.key], tags=dict(request.tags)))
            continue
        ranges = subset.get_partitions_subset(asset.key).get_partition_key_ranges(
            asset.partitions_def
        )
        runs.extend(
            dg.RunRequest(
                asset_selection=[asset.key],
                tags={**request.tags, RANGE_START_TAG: keys.start, RANGE_END_TAG: keys.end},
            )
            for keys in ranges
        )
    return runs


def revisions_automation_sensor(
    target: dg.AssetSelection | Sequence[dg.AssetsDefinition],
    *,
    name: str = "revisions_automation",
    minimum_interval_seconds: int = 30,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.AutomationConditionSensorDefinition:
    """The automation condition sensor of revisioned assets: evaluated in the code server (the
    condition reads the logs), a range as one single-run backfill, every run pinned by its
    partitions (``revisions/upstream_heads=partitions``). STOPPED until turned on."""
    with warnings.catch_warnings():  # use_user_code_server is a beta parameter of Dagster 1.13
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.AutomationConditionSensorDefinition(
            name,
            target=target,
            run_tags={TAG_UPSTREAM_HEADS: PIN_BY_PARTITIONS},
            default_status=default_status,
            minimum_interval_seconds=minimum_interval_seconds,
            description="Requests the runs the revisions log asks for: majors after a code or "
            "field version change, scoring runs over the partitions of unconsumed upstream "
            "revisions (evaluated in the code server).",
            emit_backfills=True,
            use_user_code_server=True,
        )


def automation_tick(
    sensor: dg.AutomationConditionSensorDefinition,
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    assets: Sequence[dg.AssetsDefinition],
    cursor: str | None = None,
) -> tuple[list[dg.RunRequest], str | None]:
    """One tick of the automation sensor in process (the demo, tests): the runs it requests,
    its backfills as their single runs (``backfill_runs``, ``assets`` upstream first), and the
    cursor of the next tick. A deployment's daemons do this themselves."""
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, repository_def=defs.get_repository_def()
    ) as context:
        data = sensor.evaluate_tick(context)
    runs = [run for r in data.run_requests or [] for run in backfill_runs(r, assets)]
    return runs, data.cursor
