"""Commits made outside Dagster, shown in Dagster: a sensor that reports them to the catalog.

A Spark job using ``RevisionedDataset`` directly, a job run by hand
(``revisions_assets.pipes``), ``revisions purge``, ``compact`` or ``vacuum``, or an import
change the datasets the assets stand for. ``outside_commits_sensor`` reads their logs
(read-only, without Spark) and reports what no run of this Dagster instance wrote:

- a data revision of an asset's table becomes a runless ``AssetMaterialization`` on each
  partition it covers (``resources.slice.revision_partitions``: a major every partition up
  to its timestamp; a minor the partitions its producer recorded, else the one of its
  timestamp), with the revision's metadata, the table's columns, and as tags its data
  version and the code version it was written with: Dagster's staleness follows (the data
  version moved; a code version other than the asset's shows);
- a purge, a compaction or a vacuum of the table becomes an ``AssetObservation`` saying what
  it changed (a compaction a run's commit made is left out: that run reported it);
- the asset's blocking checks are requested on what it reported (one run per asset and
  range of partitions), so that ``revisions_automation()``, which waits for its inputs'
  blocking checks, lets consumers consume an outside revision once it passed them. The
  automation condition itself reads the logs, outside commits included.

Idempotent: the cursor holds, per asset, the last log sequence looked at, and each check
run's key names the revisions it checks. A revision whose producer's run id is a run of
this instance is never reported (that run materialized it). On its first tick the sensor
reports only each table's newest revision (when written outside Dagster), then every
outside commit after it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg

from revisions_assets.core.log.records import COMPACTION, PURGE, VACUUM, Revision

from .resources.address import address_of, column_descriptions
from .resources.keys import SENSOR_REQUESTS_TAG
from .resources.location import DatasetLocation
from .resources.metadata import (
    CODE_VERSION_TAG,
    DATA_VERSION_TAG,
    PARTITIONS,
    data_version,
    revision_entries,
    table_entries,
)
from .resources.slice import (
    RANGE_END_TAG,
    RANGE_START_TAG,
    describe,
    keys_of,
    revision_partitions,
)

#: materialization metadata: who committed the revision, outside this Dagster instance
COMMITTED_BY = "committed_by"


def outside_commits_sensor(
    assets: Sequence[dg.AssetsDefinition],
    *,
    name: str = "revisions_outside_commits",
    minimum_interval_seconds: int = 60,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """Report the revisions of ``assets``' tables that no run of this instance wrote, and
    request their blocking checks on them."""

    @dg.sensor(
        name=name,
        target=dg.AssetSelection.assets(*assets),
        tags={SENSOR_REQUESTS_TAG: "checks"},  # runs of checks only: never a scoring run
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description="Reports revisions committed outside this Dagster instance (engine "
        "commits, jobs run by hand, imports) as materializations, purges, compactions and "
        "vacuums as observations, and requests the blocking checks of what it reported.",
    )
    def _sensor(
        context: dg.SensorEvaluationContext, revisions_location: DatasetLocation
    ) -> dg.SensorResult:
        cursor = json.loads(context.cursor or "{}")
        ours = _runs_of(context.instance)
        logs: dict[str, Sequence[Revision]] = {}  # one read of each dataset's log per tick
        events: list[dg.AssetMaterialization | dg.AssetObservation] = []
        requests: list[dg.RunRequest] = []
        for asset in assets:
            key = asset.key.to_user_string()
            dataset = address_of(asset).dataset
            if dataset not in logs:
                logs[dataset] = revisions_location.read_log(dataset)
            records = logs[dataset]
            found = outside_events(asset, revisions_location, records, cursor.get(key), ours)
            events.extend(found)
            requests.extend(check_requests(context, asset, found))
            cursor[key] = records[-1].sequence if records else 0
        return dg.SensorResult(
            asset_events=events,
            run_requests=requests,
            cursor=json.dumps(cursor, sort_keys=True),
            skip_reason=None if events else "no commit made outside Dagster",
        )

    return _sensor


def _runs_of(instance: dg.DagsterInstance) -> Callable[[str | None], bool]:
    """Whether a run id is one of this instance's runs (asked once per id and tick)."""
    known: dict[str, bool] = {}

    def ours(run_id: str | None) -> bool:
        if not run_id:
            return False
        if run_id not in known:
            known[run_id] = instance.get_run_by_id(run_id) is not None
        return known[run_id]

    return ours


def outside_events(
    asset: dg.AssetsDefinition,
    location: DatasetLocation,
    records: Sequence[Revision],
    seen: int | None,
    ours: Callable[[str | None], bool],
) -> list[dg.AssetMaterialization | dg.AssetObservation]:
    """The events of the log entries after ``seen`` (None: a first look, the newest data
    revision only) that touch the asset's table and that no run of this instance wrote."""
    table = address_of(asset).table
    if seen is None:
        newest = [r for r in records if r.wrote(table)][-1:]
        entries: Sequence[Revision] = newest
    else:
        entries = [r for r in records if r.sequence > seen]
    by_sequence = {r.sequence: r for r in records}
    events: list[dg.AssetMaterialization | dg.AssetObservation] = []
    for r in entries:
        if r.wrote(table):
            if not ours(r.producer.get("run_id")):
                events.extend(_materializations(asset, location, r))
        elif _touches(r, table, by_sequence) and not _made_by_a_run(r, by_sequence, ours):
            events.append(_observation(asset, location, r, table, by_sequence))
    return events


def _materializations(
    asset: dg.AssetsDefinition, location: DatasetLocation, r: Revision
) -> list[dg.AssetMaterialization]:
    """A data revision as the runless materializations of the partitions it covers."""
    address = address_of(asset)
    ds = location.dataset(address.dataset)
    write = r.tables[address.table]
    pdef = asset.partitions_def
    partitioned = isinstance(pdef, dg.TimeWindowPartitionsDefinition)
    covers = revision_partitions(r, pdef) if partitioned else None
    metadata: dict[str, Any] = {
        **revision_entries(address.table, r, partitioned=partitioned),
        "why": r.properties.get("reason", ""),
        COMMITTED_BY: _committed_by(r),
        **table_entries(
            ds.root,
            address.table,
            tuple(write.id_columns),
            ds.tables()[address.table].schema,
            None,
            column_descriptions(asset.metadata_by_key[asset.key]),
        ),
    }
    if covers is not None:
        metadata[PARTITIONS] = describe(covers)
    tags = {
        DATA_VERSION_TAG: data_version(address.table, r.sequence),
        CODE_VERSION_TAG: write.version or "",
    }
    partitions = sorted(keys_of(pdef, [covers])) if covers is not None else [None]
    return [
        dg.AssetMaterialization(asset.key, partition=p, metadata=metadata, tags=tags)
        for p in partitions
    ]


def _committed_by(r: Revision) -> str:
    """Who wrote a revision no run of this instance wrote, from its producer."""
    run_id = r.producer.get("run_id")
    if run_id:
        return f"run {run_id} of another Dagster instance"
    if r.producer.get("asset_key"):
        return "a job run by hand (revisions_assets.pipes)"
    return "a commit outside Dagster"


def _touches(r: Revision, table: str, by_sequence: dict[int, Revision]) -> bool:
    """Whether a maintenance entry changes what is stored of ``table``."""
    if r.kind == COMPACTION:
        return table in r.tables
    if r.kind == PURGE and r.purge is not None:
        return table in r.purge.swaps
    if r.kind == VACUUM and r.vacuum is not None:
        return any(by_sequence[s].wrote(table) for s in r.vacuum.removed if s in by_sequence)
    return False


def _made_by_a_run(
    r: Revision, by_sequence: dict[int, Revision], ours: Callable[[str | None], bool]
) -> bool:
    """A compaction right after a revision of one of this instance's runs: that run's
    commit made it (the ``compact_after`` policy, or a forced compaction) and reported it."""
    before = by_sequence.get(r.sequence - 1)
    return r.kind == COMPACTION and before is not None and ours(before.producer.get("run_id"))


def _observation(
    asset: dg.AssetsDefinition,
    location: DatasetLocation,
    r: Revision,
    table: str,
    by_sequence: dict[int, Revision],
) -> dg.AssetObservation:
    """What a purge, compaction or vacuum changed of the table."""
    metadata: dict[str, Any] = {
        "change": r.kind,
        "revision": r.name,
        "sequence": r.sequence,
        "dagster/uri": location.root_for(address_of(asset).dataset),
    }
    if r.kind == COMPACTION:
        written = r.tables[table]
        metadata.update(
            {
                "what": "the table's state rewritten in a few files (reads are unchanged)",
                "rows": written.rows,
                "files": len(written.files),
            }
        )
    elif r.kind == PURGE and r.purge is not None:
        swaps = r.purge.swaps[table]
        metadata.update(
            {
                "what": "entities removed from every revision of the table",
                "reason": r.purge.reason,
                "entities": r.purge.entities,
                "rows_removed": sum(s.rows_removed for s in swaps),
                "revisions_rewritten": len(swaps),
            }
        )
    elif r.kind == VACUUM and r.vacuum is not None:
        removed = [s for s in r.vacuum.removed if s in by_sequence and by_sequence[s].wrote(table)]
        metadata.update(
            {
                "what": "files no read at or after the retention horizon needs, removed",
                "revisions_removed": len(removed),
                "horizon_sequence": r.vacuum.horizon_sequence,
            }
        )
    return dg.AssetObservation(asset.key, metadata=metadata)


def check_requests(
    context: dg.SensorEvaluationContext,
    asset: dg.AssetsDefinition,
    events: Sequence[dg.AssetMaterialization | dg.AssetObservation],
) -> list[dg.RunRequest]:
    """Runs of the asset's blocking checks on the partitions of the reported revisions: one
    per contiguous range (a partitioned asset's partitioned checks, else its checks)."""
    mats = [e for e in events if isinstance(e, dg.AssetMaterialization)]
    repository = context.repository_def
    if not mats or repository is None:
        return []
    graph = repository.asset_graph
    pdef = asset.partitions_def
    checks = [
        k
        for k in graph.get_check_keys_for_assets({asset.key})
        if graph.get(k).blocking and (graph.get(k).partitions_def is not None) == bool(pdef)
    ]
    if not checks:
        return []
    sequences = sorted({int(m.metadata["sequence"].value) for m in mats})
    run_key = f"checks:{asset.key.to_user_string()}:{','.join(map(str, sequences))}"
    if pdef is None:
        return [dg.RunRequest(run_key=run_key, asset_selection=[], asset_check_keys=checks)]
    keys = {m.partition for m in mats if m.partition is not None}
    ranges = pdef.subset_with_partition_keys(keys).get_partition_key_ranges(pdef)
    return [
        dg.RunRequest(
            run_key=f"{run_key}:{describe(r)}",
            asset_selection=[],
            asset_check_keys=checks,
            partition_key=r.start if r.start == r.end else None,
            tags={} if r.start == r.end else {RANGE_START_TAG: r.start, RANGE_END_TAG: r.end},
        )
        for r in ranges
    ]
