"""Sensors of the revisions layer (SPEC §7). They read logs read-only, never write.

Both are idempotent: a cursor remembers what was requested and every request carries a
run key derived from the log state it answers, so the same change never yields two runs.

- ``code_version_sensor``: an asset whose code version differs from the version of its
  table's head revision gets ONE major run over its materialized range, as a single-run
  backfill: first partition .. the partition of the head's timestamp (for a scoring
  asset: the partitions its major will cover, with the upstream heads pinned).
  Dagster's own staleness does not mark partitioned assets stale after a code version
  bump (dagster#22553, #18921) and ``AutomationCondition.code_version_changed`` knows
  nothing of the log, hence this sensor.
- ``upstream_changes_sensor``: a scoring asset with unconsumed upstream revisions gets
  one run over exactly the partitions those revisions cover, pinned to the upstream
  heads it saw (run tag ``revisions/upstream_heads``), so the run scores what the
  sensor saw and its revision materializes every scored day.
"""

import json
from collections.abc import Sequence

import dagster as dg

from resources.address import address_of, field_versions, upstream_refs
from resources.location import DatasetLocation
from resources.slice import (
    RANGE_END_TAG,
    RANGE_START_TAG,
    TAG_UPSTREAM_HEADS,
    UpstreamNotReadyError,
    format_upstream_heads,
    partition_key_for_end,
    plan_consumer,
    version_change,
)

from .lag import read_consumer


def _time_partitions(asset: dg.AssetsDefinition) -> dg.TimeWindowPartitionsDefinition | None:
    pdef = asset.partitions_def
    return pdef if isinstance(pdef, dg.TimeWindowPartitionsDefinition) else None


def _partition_tags(keys: dg.PartitionKeyRange) -> dict[str, str]:
    return {RANGE_START_TAG: keys.start, RANGE_END_TAG: keys.end}


def code_version_sensor(
    assets: Sequence[dg.AssetsDefinition],
    *,
    name: str = "revisions_code_version_sensor",
    minimum_interval_seconds: int = 60,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """Request one major run per asset whose code version differs from its table's head."""

    @dg.sensor(
        name=name,
        target=dg.AssetSelection.assets(*assets),
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description="Requests a major rematerialization (one run over the materialized partition "
        "range) of every revisioned asset whose code version differs from the "
        "version recorded on its table's head revision.",
    )
    def _sensor(
        context: dg.SensorEvaluationContext, revisions_location: DatasetLocation
    ) -> dg.SensorResult:
        location = revisions_location
        cursor = json.loads(context.cursor or "{}")
        requests = []
        for asset in assets:
            key = asset.key.to_user_string()
            address = address_of(asset)
            records = location.read_log(address.dataset)
            history = [r for r in records if r.wrote(address.table)]
            if not history:
                continue  # never materialized: its first run is a major anyway
            code_version = asset.code_versions_by_key.get(asset.key)
            fields = field_versions(asset.metadata_by_key[asset.key])
            change = version_change(history[-1], address.table, code_version, fields)
            marker = f"{code_version}@{history[-1].sequence}"
            if change is None or cursor.get(key) == marker:
                continue
            tags = {"revisions/reason": change}
            pdef = _time_partitions(asset)
            if pdef is not None and upstream_refs(asset.metadata_by_key[asset.key]):
                try:
                    state = read_consumer(location, asset)
                except UpstreamNotReadyError:
                    continue
                plan = plan_consumer(
                    history, address.table, code_version, False, state.upstream, pdef
                )
                assert plan.covers is not None  # a new code version: a major covers everything
                tags |= _partition_tags(plan.covers)
                tags[TAG_UPSTREAM_HEADS] = format_upstream_heads(plan.upstream)
            elif pdef is not None:
                newest = partition_key_for_end(pdef, max(r.timestamp for r in history))
                tags |= _partition_tags(
                    dg.PartitionKeyRange(pdef.get_first_partition_key() or newest, newest)
                )
            requests.append(
                dg.RunRequest(
                    run_key=f"major:{key}:{marker}", asset_selection=[asset.key], tags=tags
                )
            )
            cursor[key] = marker
        return dg.SensorResult(
            run_requests=requests,
            cursor=json.dumps(cursor, sort_keys=True),
            skip_reason=None if requests else "all code versions current",
        )

    return _sensor


def upstream_changes_sensor(
    scoring_assets: Sequence[dg.AssetsDefinition],
    *,
    name: str = "revisions_upstream_changes_sensor",
    minimum_interval_seconds: int = 60,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """Request a run of each scoring asset that has unconsumed upstream revisions, over the
    partitions those revisions cover."""

    @dg.sensor(
        name=name,
        target=dg.AssetSelection.assets(*scoring_assets),
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description="Requests the incremental runs of scoring assets whose upstream tables have "
        "revisions they have not consumed yet, over the partitions those revisions cover.",
    )
    def _sensor(
        context: dg.SensorEvaluationContext, revisions_location: DatasetLocation
    ) -> dg.SensorResult:
        cursor = json.loads(context.cursor or "{}")
        requests = []
        for asset in scoring_assets:
            key = asset.key.to_user_string()
            pdef = _time_partitions(asset)
            try:
                state = read_consumer(revisions_location, asset)
            except UpstreamNotReadyError:
                continue
            behind = sum(len(u.pending) for u in state.upstream)
            marker = format_upstream_heads(state.upstream)
            if pdef is None or behind == 0 or cursor.get(key) == marker:
                continue
            plan = plan_consumer(
                state.history,
                address_of(asset).table,
                asset.code_versions_by_key.get(asset.key),
                False,
                state.upstream,
                pdef,
            )
            assert plan.covers is not None  # something is pending
            single = plan.covers.start == plan.covers.end
            requests.append(
                dg.RunRequest(
                    run_key=f"score:{key}:{marker}",
                    asset_selection=[asset.key],
                    partition_key=plan.covers.start if single else None,
                    tags={
                        "revisions/reason": f"{behind} upstream revision(s) not consumed",
                        TAG_UPSTREAM_HEADS: marker,
                        **({} if single else _partition_tags(plan.covers)),
                    },
                )
            )
            cursor[key] = marker
        return dg.SensorResult(
            run_requests=requests,
            cursor=json.dumps(cursor, sort_keys=True),
            skip_reason=None if requests else "no unconsumed upstream revisions",
        )

    return _sensor
