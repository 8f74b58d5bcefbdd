"""Sensors of the revisions layer (docs/guides/first-assets.md). They read logs read-only, never
write.

The alternative to ``RevisionsLogCondition`` (``automation.py``) for deployments that cannot
evaluate conditions in the code server: the same reading of the logs
(``version_request``, ``upstream_request``), acted on by two plain sensors that pin each
scoring run to the upstream heads they saw.

Both are idempotent: a cursor remembers what was requested and every request carries a
run key derived from the log state it answers, so the same change never yields two runs.

- ``code_version_sensor``: an asset whose code version differs from the version of its
  table's head revision gets ONE major run over its materialized range, as a single-run
  backfill: first partition .. the partition of the head's timestamp (for a scoring
  asset: the partitions its major will cover, with the upstream heads pinned).
  Dagster's own staleness does not mark partitioned assets stale after a code version
  bump (dagster#22553, #18921) and ``AutomationCondition.code_version_changed`` knows
  nothing of the log.
- ``upstream_changes_sensor``: a scoring asset with unconsumed upstream revisions gets
  one run over exactly the partitions those revisions cover, pinned to the upstream
  heads it saw (run tag ``revisions/upstream_heads``), so the run scores what the
  sensor saw and its revision materializes every scored day.
"""

import json
from collections.abc import Callable, Sequence

import dagster as dg

from .automation import LogRequest, upstream_request, version_request
from .resources.location import DatasetLocation


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
        return _requests(context, revisions_location, assets, version_request, "code versions")

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
        return _requests(
            context, revisions_location, scoring_assets, upstream_request, "upstream revisions"
        )

    return _sensor


def _requests(
    context: dg.SensorEvaluationContext,
    location: DatasetLocation,
    assets: Sequence[dg.AssetsDefinition],
    request_for: Callable[[DatasetLocation, dg.AssetsDefinition], LogRequest | None],
    what: str,
) -> dg.SensorResult:
    """One request per asset the log asks a run of, unless the cursor has it already."""
    cursor = json.loads(context.cursor or "{}")
    requests = []
    for asset in assets:
        request = request_for(location, asset)
        key = asset.key.to_user_string()
        if request is None or cursor.get(key) == request.run_key:
            continue
        requests.append(request.run_request())
        cursor[key] = request.run_key
    return dg.SensorResult(
        run_requests=requests,
        cursor=json.dumps(cursor, sort_keys=True),
        skip_reason=None if requests else f"the log asks for no run ({what} current)",
    )
