"""The one place where a Dagster context becomes a dataset slice.

An asset of this layer is one table of one revisioned dataset (its *address*,
kept in the asset's definition metadata so the UI shows it). At run time the
Dagster context (asset key, partition range, run tags, config, code version)
and the dataset's log are resolved exactly once into a frozen ``DatasetSlice``:
which window to compute, major or minor and why, and the revision timestamp.
Asset bodies, the IO manager, checks and sensors only read that object.

Revision timestamp: the *end* of the requested partition window (exclusive
end, e.g. partition 2013-01-05 -> 2013-01-06T00:00Z). The data of a day is
complete at the end of that day, so "state as of T" includes a partition
exactly when the whole day is before T.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import dagster as dg

from revisions_assets.core.backends import open_storage
from revisions_assets.core.errors import RevisionsError
from revisions_assets.core.log import RevisionLog
from revisions_assets.core.records import Revision
from revisions_assets.core.timeutil import now_utc, to_utc

META_DATASET = "revisions/dataset"
META_TABLE = "revisions/table"
META_ID_COLUMNS = "revisions/id_columns"
META_ROLE = "revisions/role"
META_UPSTREAM = "revisions/upstream"
#: run tag that forces a major revision (values true/1/yes)
TAG_FORCE_MAJOR = "revisions/force_major"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"

ROLES = ("featurized", "scoring", "reference")


class NotRevisionedAssetError(RevisionsError, ValueError):
    """An asset handled by the revisions layer that does not carry a dataset address."""


class UpstreamNotReadyError(RevisionsError):
    """A consumer ran before its upstream table had any revision."""


@dataclass(frozen=True)
class TableAddress:
    """Where an asset's data lives: one table of one revisioned dataset.

    ``dataset`` is a name under the location's base URI, or a full URI/absolute path.
    """

    dataset: str
    table: str
    id_columns: tuple[str, ...]
    role: str

    def to_metadata(self) -> dict[str, str]:
        return {
            META_DATASET: self.dataset,
            META_TABLE: self.table,
            META_ID_COLUMNS: ",".join(self.id_columns),
            META_ROLE: self.role,
        }

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any], what: str) -> TableAddress:
        missing = [k for k in (META_DATASET, META_TABLE, META_ID_COLUMNS) if k not in metadata]
        if missing:
            raise NotRevisionedAssetError(
                f"asset {what} has no revisioned-dataset address (missing metadata {missing}); "
                "declare it with featurized_asset, scoring_asset or reference_asset"
            )

        def text(key: str) -> str:
            value = metadata[key]
            return str(getattr(value, "value", value))

        return cls(
            dataset=text(META_DATASET),
            table=text(META_TABLE),
            id_columns=tuple(c for c in text(META_ID_COLUMNS).split(",") if c),
            role=text(META_ROLE) if META_ROLE in metadata else "featurized",
        )


@dataclass(frozen=True)
class UpstreamRef:
    """A scoring asset's input as recorded in its metadata (for checks and sensors)."""

    asset_key: str
    dataset: str
    table: str
    kind: str  # "main" or "reference"


def upstream_refs_to_metadata(refs: Sequence[UpstreamRef]) -> str:
    return json.dumps([ref.__dict__ for ref in refs])


def upstream_refs(metadata: Mapping[str, Any]) -> tuple[UpstreamRef, ...]:
    raw = metadata.get(META_UPSTREAM)
    if raw is None:
        return ()
    return tuple(UpstreamRef(**item) for item in json.loads(str(getattr(raw, "value", raw))))


def address_of(assets_def: dg.AssetsDefinition) -> TableAddress:
    key = assets_def.key
    return TableAddress.from_metadata(assets_def.metadata_by_key[key], key.to_user_string())


def read_log(root: str) -> tuple[Revision, ...]:
    """The committed revisions of a dataset, without Spark (sensors and the resolver use it)."""
    return RevisionLog(open_storage(root)).refresh()


def table_history(records: Sequence[Revision], table: str) -> list[Revision]:
    return [r for r in records if r.wrote(table)]


def decide_major(
    head: Revision | None, table: str, code_version: str | None, forced: bool
) -> tuple[bool, str]:
    """SPEC §5 as a pure function of the table's head revision: (is_major, why)."""
    if forced:
        return True, "major forced by run tag or config"
    if head is None:
        return True, "first revision of the table"
    recorded = head.version_of(table)
    if recorded != code_version:
        return True, f"code version changed: {recorded!r} -> {code_version!r}"
    return False, f"code version {code_version!r} unchanged since revision {head.sequence}"


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class DatasetSlice:
    """What one materialization writes: resolved once per run from the Dagster context."""

    asset_key: str
    root: str
    table: str
    id_columns: tuple[str, ...]
    code_version: str | None
    is_major: bool
    reason: str
    timestamp: datetime  # the revision's logical time (see the module docstring)
    compute_start: datetime | None  # None for unpartitioned assets
    compute_end: datetime | None
    partition: str | None  # "2013-01-05" or "2013-01-01...2013-01-31"

    def as_major(self, reason: str) -> DatasetSlice:
        """The same slice promoted to a major (an upstream reset found while reading inputs)."""
        return replace(self, is_major=True, reason=reason)


def resolve_slice(
    context: dg.AssetExecutionContext,
    root: str,
    address: TableAddress,
    *,
    forced_by_config: bool = False,
    monotonic: bool = False,
) -> DatasetSlice:
    """Turn the run's context and the dataset log into the slice to compute and commit.

    A major computes from the first partition's start to the requested end; a minor
    the requested window only. ``monotonic`` (scoring assets) keeps the timestamp at
    or after the table's head, so newer scores are never shadowed by older ones.
    """
    history = table_history(read_log(root), address.table)
    head = max(history, key=lambda r: r.key) if history else None
    code_version = context.assets_def.code_versions_by_key.get(context.asset_key)
    forced = forced_by_config or truthy(context.run.tags.get(TAG_FORCE_MAJOR))
    is_major, reason = decide_major(
        history[-1] if history else None, address.table, code_version, forced
    )
    partitions_def = context.assets_def.partitions_def
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        window = context.partition_time_window
        first_start = to_utc(partitions_def.start, "first partition start")
        start = first_start if is_major else to_utc(window.start, "window start")
        end = to_utc(window.end, "window end")
        key_range = context.partition_key_range
        partition = (
            key_range.start
            if key_range.start == key_range.end
            else f"{key_range.start}...{key_range.end}"
        )
        timestamp = end
    else:
        start = end = None
        partition = None
        timestamp = now_utc()
    if monotonic and head is not None and head.timestamp > timestamp:
        timestamp = head.timestamp
    return DatasetSlice(
        asset_key=context.asset_key.to_user_string(),
        root=root,
        table=address.table,
        id_columns=address.id_columns,
        code_version=code_version,
        is_major=is_major,
        reason=reason,
        timestamp=timestamp,
        compute_start=start,
        compute_end=end,
        partition=partition,
    )


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
