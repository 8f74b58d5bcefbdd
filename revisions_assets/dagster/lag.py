"""Where a scoring asset stands in its upstream tables (docs/concepts/consumers.md), for checks and
sensors.

Read from the logs only, read-only and without Spark: the same pure rules as the IO
manager's resolver (``resources.slice``), through the location's read-only handles.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import dagster as dg

from revisions_assets.core.log.records import Revision

from .resources.address import address_of, upstream_refs
from .resources.location import DatasetLocation
from .resources.slice import UpstreamSlice, upstream_slices


@dataclass(frozen=True)
class ConsumerState:
    """A scoring table's own history and its position in each upstream table."""

    history: tuple[Revision, ...]
    upstream: tuple[UpstreamSlice, ...]


def read_consumer(
    logs: DatasetLocation | Callable[[str], tuple[str, Sequence[Revision]]],
    asset: dg.AssetsDefinition,
    pins: dict[str, int] | None = None,
) -> ConsumerState:
    """Where ``asset`` stands, from the logs ``logs`` gives: a location's (read afresh), or
    a run's snapshots (``RunState.log_of``: a check reads the logs its run read)."""
    log_of = logs.root_and_log if isinstance(logs, DatasetLocation) else logs
    address = address_of(asset)
    _, records = log_of(address.dataset)
    upstream = upstream_slices(
        upstream_refs(asset.metadata_by_key[asset.key]), records, address.table, log_of, pins
    )
    return ConsumerState(tuple(r for r in records if r.wrote(address.table)), upstream)


@dataclass(frozen=True)
class ConsumerLag:
    """How far one consumer table is behind one upstream table."""

    upstream: UpstreamSlice
    seconds_behind: float  # age of the oldest unconsumed upstream revision (0 when none)

    @property
    def revisions_behind(self) -> int:
        return len(self.upstream.pending)


def consumer_lags(upstream: Sequence[UpstreamSlice], now: datetime) -> list[ConsumerLag]:
    lags = []
    for u in upstream:
        oldest = min((r.committed_at for r in u.pending), default=None)
        lags.append(ConsumerLag(u, (now - oldest).total_seconds() if oldest else 0.0))
    return lags
