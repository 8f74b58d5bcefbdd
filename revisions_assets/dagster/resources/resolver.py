"""The resolver: a Dagster run's context and the dataset logs -> the run's ``RunSlice``.

The one place where a run's facts (the asset's definition, its partitions, the run's tags
and config, its code version) meet the logs, as Dagster's ``DbIOManager`` resolves a table
slice once: ``run_facts`` reads the step, ``resolve_slice`` decides with the engine's rules
(``core.runs``: major or minor, the window, the positions and pinned heads of a scoring
run) and the partition rules of ``slice.py``, reading the logs only (no JVM: a run refused
by its slice fails before Spark starts). A job run by hand resolves its slice with the same
engine rules (``revisions_assets.pipes.slice_by_hand``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster._check import CheckError  # what a step context without a code location raises

from revisions_assets.core.runs.resolve import (
    RunTarget,
    featurized_slice,
    log_head,
    scoring_slice,
)
from revisions_assets.core.runs.run_slice import RunSlice
from revisions_assets.core.runs.versions import decide_major

from .address import (
    NotRevisionedAssetError,
    TableAddress,
    field_versions,
    lookback,
    runs_remotely,
    upstream_refs,
    uses_columns,
)
from .keys import SENSOR_REQUESTS_TAG
from .location import DatasetLocation
from .metadata import COLUMN_SCHEMA, table_schema
from .run_state import RunState
from .slice import (
    PIN_BY_PARTITIONS,
    TAG_FORCE_COMPACTION,
    TAG_FORCE_MAJOR,
    TAG_UPSTREAM_HEADS,
    check_requested_partitions,
    compute_window,
    describe,
    fit_to_partitions,
    parse_upstream_heads,
    plan_consumer,
    truthy,
    upstream_slices,
)

AnyContext = dg.AssetExecutionContext | dg.InputContext | dg.OutputContext


def step_of(context: AnyContext) -> Any:
    """The step execution context behind any of the three contexts (the framework-author hook
    Dagster documents on ``get_step_execution_context``)."""
    if isinstance(context, dg.AssetExecutionContext):
        return context.get_step_execution_context()
    return context.step_context


def step_asset_key(step: Any) -> dg.AssetKey | None:
    """The one asset the step materializes (None: a step of several assets, or of none)."""
    assets_def = step.assets_def
    keys = list(assets_def.keys) if assets_def is not None else []
    return keys[0] if len(keys) == 1 else None


def time_partitions(pdef: dg.PartitionsDefinition | None) -> Any:
    """``pdef`` when it is time partitions (the only partitions the layer plans with)."""
    return pdef if isinstance(pdef, dg.TimeWindowPartitionsDefinition) else None


@dataclass(frozen=True)
class RunFacts:
    """What a step says about the run of one revisioned asset."""

    key: dg.AssetKey
    step: Any
    metadata: Any  # the asset's definition metadata
    address: TableAddress
    code_version: str | None
    forced: bool  # a major asked for (run tag or config)
    compact: bool  # a compaction asked for
    partitions: Any  # the time partitions definition (None: unpartitioned)
    keys: dg.PartitionKeyRange | None  # the run's partitions

    @property
    def run_id(self) -> str:
        return self.step.run_id


def run_facts(step: Any, key: dg.AssetKey) -> RunFacts:
    """The facts of the run of ``key`` in ``step``: definition, partitions, tags, config."""
    assets_def = step.assets_def
    metadata = assets_def.metadata_by_key[key]
    config = step.op_config if isinstance(step.op_config, dict) else {}
    tags = step.run_tags
    pdef = time_partitions(assets_def.partitions_def)
    output = assets_def.get_output_name_for_asset_key(key)
    return RunFacts(
        key=key,
        step=step,
        metadata=metadata,
        address=TableAddress.from_metadata(metadata, key.to_user_string()),
        code_version=assets_def.code_versions_by_key.get(key),
        forced=truthy(tags.get(TAG_FORCE_MAJOR)) or bool(config.get("force_major")),
        compact=truthy(tags.get(TAG_FORCE_COMPACTION)) or bool(config.get("force_compaction")),
        partitions=pdef,
        keys=step.asset_partition_key_range_for_output(output) if pdef is not None else None,
    )


def resolve_slice(
    step: Any, key: dg.AssetKey, location: DatasetLocation, state: RunState
) -> RunSlice:
    """The run's facts and the logs (the run's snapshots, ``state``) -> the slice."""
    facts = run_facts(step, key)
    address = facts.address
    # the logs only, through the location's handles; a remote job commits (read-only here)
    writes = None if runs_remotely(facts.metadata) else {address.table: address.id_columns}
    own = location.dataset(address.dataset, writes=writes)
    records = tuple(state.snapshot(own.root).revisions())
    history = [r for r in records if r.wrote(address.table)]
    declared = facts.metadata.get(COLUMN_SCHEMA)
    pdef, keys = facts.partitions, facts.keys
    target = RunTarget(
        asset_key=key.to_user_string(),
        root=own.root,
        table=address.table,
        id_columns=address.id_columns,
        code_version=facts.code_version,
        expected_head=log_head(records),
        run_id=facts.run_id,
        partition=describe(keys) if keys is not None else "",
        partition_keys=tuple(pdef.get_partition_keys_in_range(keys)) if keys else (),
        columns=(
            {c.name: c.type for c in table_schema(declared).columns}
            if declared is not None
            else None
        ),
        force_compaction=facts.compact,
        compact_after=location.compact_after,
    )
    refs = upstream_refs(facts.metadata)
    if not refs:
        fields = field_versions(facts.metadata)
        head = history[-1] if history else None
        decision = decide_major(head, address.table, facts.code_version, facts.forced, fields)
        window = compute_window(pdef, keys, decision[0]) if keys is not None else None
        return featurized_slice(
            target,
            history,
            decision,
            window,
            lookback=lookback(facts.metadata),
            field_versions=fields,
        )
    if keys is None:
        raise NotRevisionedAssetError(
            f"{target.asset_key}: a scoring asset needs time partitions (scoring_asset)"
        )
    pin_tag = step.run_tags.get(TAG_UPSTREAM_HEADS)
    if pin_tag == PIN_BY_PARTITIONS:
        plan = fit_to_partitions(
            refs,
            history,
            records,
            address.table,
            facts.code_version,
            facts.forced,
            state.log_of,
            keys,
            pdef,
        )
    else:
        pins = parse_upstream_heads(pin_tag)
        upstream = upstream_slices(refs, records, address.table, state.log_of, pins)
        plan = plan_consumer(
            history, address.table, facts.code_version, facts.forced, upstream, pdef
        )
    if plan.covers is not None:
        check_requested_partitions(
            target.asset_key, plan, keys, history, pdef, range_hint(step, key)
        )
    return scoring_slice(
        target,
        history,
        (plan.is_major, plan.reason, plan.soft),
        [u.input for u in plan.upstream],
        compute_window(pdef, keys, False)[1],
        uses_columns=uses_columns(facts.metadata),
        skip=None if plan.covers is not None else plan.reason,
    )


def range_hint(step: Any, key: dg.AssetKey) -> str:
    """What requests a scoring asset's runs in this code location, named in a
    ``ScoringRangeError``: the sensors that target it (an automation condition sensor when the
    asset has a condition), else how to launch the range or what to add."""
    conditioned = step.assets_def.automation_conditions_by_key.get(key) is not None
    try:
        repository = step.repository_def
    except CheckError:  # a run without a code location (dg.materialize): no sensor to name
        repository = None
    sensors = [
        sensor.name
        for sensor in (repository.sensor_defs if repository is not None else [])
        if key in _sensor_targets(sensor, repository)
        and (conditioned or not isinstance(sensor, dg.AutomationConditionSensorDefinition))
        and sensor.tags.get(SENSOR_REQUESTS_TAG) != "checks"
    ]
    named = f"the sensor{'s' if len(sensors) > 1 else ''} {' and '.join(map(repr, sensors))}"
    if sensors and conditioned:
        return f"its automation condition requests exactly that, on {named} of this code location"
    if sensors:
        return f"{named} of this code location requests exactly that"
    if conditioned:
        return (
            "its automation condition requests exactly that once a revisions_automation_sensor "
            "targets the asset; no sensor of this code location does yet"
        )
    return (
        "no sensor of this code location requests this asset's runs: launch that range, or give "
        "the asset revisions_automation() with a revisions_automation_sensor"
    )


def _sensor_targets(sensor: dg.SensorDefinition, repository: Any) -> set[dg.AssetKey]:
    """The assets a sensor of ``repository`` requests: its asset selection (an automation
    condition sensor), else the assets of the jobs it targets (``target=`` of ``dg.sensor``)."""
    if sensor.asset_selection is not None:
        return set(sensor.asset_selection.resolve(repository.asset_graph, allow_missing=True))
    jobs = [repository.get_job(target.job_name) for target in sensor.targets]
    return {key for job in jobs for key in job.asset_layer.selected_asset_keys}
