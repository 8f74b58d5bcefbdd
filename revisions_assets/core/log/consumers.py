"""Consumer positions: what a consumer dataset recorded as consumed of its upstreams, read
from its own log. Pure functions of the log, and which upstreams a command follows.

A consumer records, in each revision it commits, the last upstream sequence it consumed
per upstream table (``UpstreamPosition``): output and position commit atomically, so a
consumer processes every upstream revision exactly once. Positions never decrease.

The upstream roots a log records are data like the rest of it: a command that reads the
upstreams (``revisions lag``, ``verify``) follows those under the roots its operator allows
only (``upstream_roots``: the consumer's parent folder, and the roots given), so a crafted
log cannot make it open another path or bucket with the operator's credentials.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping, Sequence
from urllib.parse import unquote, urlparse

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


def upstream_roots(consumer_root: str, more: Sequence[str] = ()) -> tuple[str, ...]:
    """The roots under which a command follows the upstreams of the dataset at
    ``consumer_root``: the folder holding it (its bucket, for a dataset at a bucket's top),
    and ``more``, as ``follows`` compares them."""
    own = _comparable(consumer_root)
    if "://" in own:
        scheme, rest = own.split("://", 1)
        bucket, _, path = rest.partition("/")
        folder = posixpath.dirname(path)
        parent = f"{scheme}://{bucket}" + (f"/{folder}" if folder else "")
    else:
        parent = posixpath.dirname(own)
    return (parent, *(_comparable(r) for r in more))


def follows(roots: Sequence[str], dataset: str) -> bool:
    """Whether the upstream root ``dataset`` lies at or under one of ``roots``
    (``upstream_roots``): a local path by its real path (symbolic links resolved), a URI by
    its text, segment by segment."""
    at = _comparable(dataset)
    return any(at == root or at.startswith(root.rstrip("/") + "/") for root in roots)


def _comparable(root: str) -> str:
    """A root as ``follows`` compares it: a URI without a trailing slash, a local path
    (``file://`` ones too) as its real absolute path."""
    if root.startswith("file://"):
        root = unquote(urlparse(root).path)
    elif "://" in root:
        return root.rstrip("/")
    return os.path.realpath(os.path.expanduser(root))
