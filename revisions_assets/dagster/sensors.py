"""Sensors of the revisions layer (SPEC §7). Both are idempotent: a cursor remembers
what was requested and every request carries a run key derived from the log state
it answers, so the same change never yields two runs.

- ``code_version_sensor``: an asset whose code version differs from the version of
  its table's head revision gets ONE major run over its materialized range (first
  partition .. the partition of the head's timestamp), as a single-run backfill.
  (Dagster's ``AutomationCondition.code_version_changed`` compares definitions tick to
  tick and knows nothing of the log, hence this sensor.)
- ``upstream_changes_sensor``: a scoring asset behind any upstream table gets a minor
  run for the partition of the newest main-upstream revision.
"""

import json
from collections.abc import Sequence

import dagster as dg

from resources.location import DatasetLocation
from resources.slice import (
    RANGE_END_TAG,
    RANGE_START_TAG,
    address_of,
    partition_key_for_end,
    read_log,
    table_history,
    upstream_refs,
)

from .lag import consumer_lags


def _time_partitions(asset: dg.AssetsDefinition) -> dg.TimeWindowPartitionsDefinition | None:
    pdef = asset.partitions_def
    return pdef if isinstance(pdef, dg.TimeWindowPartitionsDefinition) else None


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
            history = table_history(read_log(location.root_for(address.dataset)), address.table)
            if not history:
                continue  # never materialized: its first run is a major anyway
            head = history[-1]
            code_version = asset.code_versions_by_key.get(asset.key)
            recorded = head.version_of(address.table)
            marker = f"{code_version}@{head.sequence}"
            if recorded == code_version or cursor.get(key) == marker:
                continue
            tags = {"revisions/reason": f"code version {recorded!r} -> {code_version!r}"}
            pdef = _time_partitions(asset)
            if pdef is not None:
                tags[RANGE_START_TAG] = pdef.get_first_partition_key() or ""
                tags[RANGE_END_TAG] = partition_key_for_end(pdef, max(r.timestamp for r in history))
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
    """Request a minor run of each scoring asset that has unconsumed upstream revisions."""

    @dg.sensor(
        name=name,
        target=dg.AssetSelection.assets(*scoring_assets),
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description="Requests the incremental runs of scoring assets whose upstream tables have "
        "revisions they have not consumed yet.",
    )
    def _sensor(
        context: dg.SensorEvaluationContext, revisions_location: DatasetLocation
    ) -> dg.SensorResult:
        location = revisions_location
        cursor = json.loads(context.cursor or "{}")
        requests = []
        for asset in scoring_assets:
            key = asset.key.to_user_string()
            address = address_of(asset)
            lags = consumer_lags(
                location.root_for(address.dataset),
                address.table,
                upstream_refs(asset.metadata_by_key[asset.key]),
                location.root_for,
            )
            main = next(lag for lag in lags if lag.upstream.kind == "main")
            marker = ",".join(lag.key for lag in lags)
            behind = sum(lag.revisions_behind for lag in lags)
            if main.newest_timestamp is None or behind == 0 or cursor.get(key) == marker:
                continue
            partition = None
            pdef = _time_partitions(asset)
            if pdef is not None:
                partition = partition_key_for_end(pdef, main.newest_timestamp)
            requests.append(
                dg.RunRequest(
                    run_key=f"score:{key}:{marker}",
                    asset_selection=[asset.key],
                    partition_key=partition,
                    tags={"revisions/reason": f"{behind} upstream revision(s) not consumed"},
                )
            )
            cursor[key] = marker
        return dg.SensorResult(
            run_requests=requests,
            cursor=json.dumps(cursor, sort_keys=True),
            skip_reason=None if requests else "no unconsumed upstream revisions",
        )

    return _sensor
