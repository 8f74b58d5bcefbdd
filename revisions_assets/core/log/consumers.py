"""Consumer positions: what a consumer dataset recorded as consumed of its upstreams, read
from its own log. Pure functions of the log.

A consumer records, in each revision it commits, the last upstream sequence it consumed
per upstream table (``UpstreamPosition``): output and position commit atomically, so a
consumer processes every upstream revision exactly once. Positions never decrease.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import ConsumerPositionConflictError
from .records import Revision, UpstreamPosition
from .view import table_revisions


def consumer_position(
    records: Sequence[Revision], dataset: str, table: str, consumer_table: str | None = None
) -> int:
    """The last upstream sequence of ``dataset#table`` recorded as consumed (0 if none).

    ``consumer_table``: only revisions that wrote this table of the consumer count.
    """
    best = 0
    for r in records:
        if consumer_table is not None and consumer_table not in r.tables:
            continue
        seq = r.position_in(dataset, table)
        if seq is not None and seq > best:
            best = seq
    return best


def recorded_positions(records: Sequence[Revision]) -> dict[tuple[str, str, str], int]:
    """Every position a consumer dataset recorded: (consumer table, upstream dataset,
    upstream table) -> the last upstream sequence consumed (the maximum ever recorded)."""
    out: dict[tuple[str, str, str], int] = {}
    for r in records:
        for position in r.upstream:
            for table in r.tables:
                key = (table, position.dataset, position.table)
                out[key] = max(out.get(key, 0), position.sequence)
    return out


def unconsumed(records: Sequence[Revision], table: str, position: int) -> list[Revision]:
    """The revisions of ``table`` committed after a consumer's ``position``: its lag."""
    return [r for r in table_revisions(records, table) if r.sequence > position]


def moves_positions(
    records: Sequence[Revision],
    upstream: Sequence[UpstreamPosition],
    consumer_tables: Sequence[str],
) -> bool:
    """Whether committing ``upstream`` moves any recorded position of the consumer tables."""
    return any(
        p.sequence > consumer_position(records, p.dataset, p.table, t)
        for p in upstream
        for t in consumer_tables
    )


def check_positions(
    records: Sequence[Revision],
    root: str,
    consumer_tables: Sequence[str],
    upstream: Sequence[UpstreamPosition],
    expected: Mapping[tuple[str, str], int],
) -> None:
    """Positions never decrease, and a consumer commits only from the position it started at."""

    def current(dataset: str, table: str) -> int:
        return max(
            (consumer_position(records, dataset, table, t) for t in consumer_tables), default=0
        )

    for position in upstream:
        now = current(position.dataset, position.table)
        if position.sequence < now:
            raise ConsumerPositionConflictError(
                f"{root}: position in {position.key} would go back from {now} to "
                f"{position.sequence}; positions never decrease"
            )
    for (dataset, table), since in expected.items():
        now = current(dataset, table)
        if now != since:
            raise ConsumerPositionConflictError(
                f"{root}: expected to consume {dataset}#{table} from sequence "
                f"{since}, but {now} is already recorded (another run committed it)"
            )
