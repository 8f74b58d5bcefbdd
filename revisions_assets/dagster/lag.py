"""Consumer lag (SPEC §6): how far a scoring table is behind each of its upstream tables.

Read from the logs only (no Spark), shared by the lag check and the upstream-changes sensor.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from resources.slice import UpstreamRef, table_history
from revisions_assets import RevisionedDataset
from revisions_assets.core.timeutil import now_utc


@dataclass(frozen=True)
class ConsumerLag:
    """One consumer table's lag behind one upstream table."""

    upstream: UpstreamRef
    root: str
    position: int  # last upstream sequence consumed (0: never)
    head: int  # upstream dataset head sequence
    revisions_behind: int  # upstream revisions of that table not consumed yet
    seconds_behind: float  # age of the oldest unconsumed upstream revision (0 when none)
    newest_timestamp: datetime | None  # logical time of the newest upstream revision of the table

    @property
    def key(self) -> str:
        return f"{self.upstream.asset_key}@{self.head}"


def consumer_lags(
    consumer_root: str, own_table: str, refs: Sequence[UpstreamRef], root_for: Callable[[str], str]
) -> list[ConsumerLag]:
    """The lag of one consumer table behind each of its upstream tables."""
    consumer = RevisionedDataset(consumer_root)
    now = now_utc()
    lags = []
    for ref in refs:
        upstream = RevisionedDataset(root_for(ref.dataset))
        records = upstream.refresh()
        position = consumer.upstream_position(upstream.root, ref.table, own_table)
        history = table_history(records, ref.table)
        pending = [r for r in history if r.sequence > position]
        oldest = min((r.committed_at for r in pending), default=None)
        lags.append(
            ConsumerLag(
                upstream=ref,
                root=upstream.root,
                position=position,
                head=len(records),
                revisions_behind=len(pending),
                seconds_behind=(now - oldest).total_seconds() if oldest else 0.0,
                newest_timestamp=max((r.timestamp for r in history), default=None),
            )
        )
    return lags
