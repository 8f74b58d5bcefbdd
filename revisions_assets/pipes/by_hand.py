"""A run's slice resolved by hand, from the logs, for a job run without Dagster (a backfill
from a notebook): the same rules as the Dagster layer's (``core.runs.versions``,
``core.log.consumers``), without partitions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from ..core.arguments import check_bool, check_text
from ..core.dataset import DEFAULT_COMPACT_AFTER
from ..core.errors import ArgumentTypeError, InvalidArgumentError
from ..core.log.consumers import consumer_position
from ..core.log.records import Revision
from ..core.log.revision_log import RevisionLog
from ..core.read.plan.selection import changes_by_sequence
from ..core.runs.run_slice import InputSlice, RunSlice, RunSliceError
from ..core.runs.versions import decide_consumer_major, decide_major
from ..core.storage.backends import open_storage
from ..core.timeutil import TimeLike, to_utc
from ..core.uris import describe


@dataclass(frozen=True)
class JobInput:
    """An input of a scoring job run by hand: a table of another dataset, consumed from the
    position this consumer recorded up to its current head."""

    name: str  # the scoring function's argument
    root: str
    table: str
    kind: str = "main"  # or "reference", joined on ``on``
    on: Mapping[str, str] = field(default_factory=dict)  # {main column: reference column}


def slice_by_hand(
    *,
    dataset_root: str,
    table: str,
    id_columns: Sequence[str],
    code_version: str,
    window: tuple[TimeLike, TimeLike] | None = None,
    upstream: Sequence[JobInput] = (),
    is_major: bool | None = None,
    lookback: timedelta = timedelta(0),
    field_versions: Mapping[str, str] | None = None,
    uses_columns: Sequence[str] | None = None,
    timestamp: TimeLike | None = None,
    partition: str = "",
    asset_key: str = "",
    compact_after: int | None = DEFAULT_COMPACT_AFTER,
    force_compaction: bool = False,
    storage_options: Mapping[str, object] | None = None,
) -> RunSlice:
    """The slice of a featurized run over ``window = (start, end)`` or of a scoring run over
    ``upstream``, decided from the logs as Dagster decides it.

    A featurized major recomputes every entity from the first partition's start: when the
    log says a major is due (first revision, a code or field version changed), the window
    must say so, so ``is_major=True`` is required then (RunSliceError otherwise). The
    revision's timestamp is the window's end (a scoring run: the newest input revision's,
    never before its own newest).
    """
    check_text(dataset_root, "dataset_root")
    check_text(table, "table")
    check_text(code_version, "code_version")
    if isinstance(id_columns, str) or not id_columns:
        raise ArgumentTypeError(f"id_columns must be a list of columns, got {describe(id_columns)}")
    if (window is None) == (not upstream):
        raise InvalidArgumentError(
            "give window=(start, end) for a featurized job or upstream=[JobInput(...)] for a "
            "scoring job (exactly one of them)"
        )
    options = dict(storage_options or {})
    own = RevisionLog(open_storage(dataset_root, **options))
    records = own.refresh()
    history = [r for r in records if r.wrote(table)]
    head = history[-1] if history else None
    common = {
        "asset_key": asset_key,
        "root": own.storage.uri,
        "table": table,
        "id_columns": tuple(id_columns),
        "code_version": code_version,
        "partition": partition,
        "compact_after": compact_after,
        "force_compaction": check_bool(force_compaction, "force_compaction"),
        "expected_head": records[-1].sequence if records else 0,
    }
    if window is not None:
        start, end = (to_utc(t, "window") for t in window)
        due, why = decide_major(head, table, code_version, False, field_versions)
        if due and is_major is not True:
            raise RunSliceError(
                f"{table}: a major is due ({why}): a major recomputes every entity, so give "
                "a window from the first partition's start and is_major=True"
            )
        major = due or bool(is_major)
        return RunSlice(
            **common,
            is_major=major,
            reason=why if due else ("major given by hand" if major else why),
            timestamp=end,
            window_start=start,
            window_end=end,
            lookback=lookback,
            field_versions=dict(field_versions or {}),
        )
    inputs = [_input(j, records, table, options) for j in upstream]
    if sum(1 for j in upstream if j.kind == "main") != 1:
        raise InvalidArgumentError("upstream needs exactly one JobInput of kind 'main'")
    resets = [u.name for u, reset, _ in inputs if reset]
    major, why, soft = decide_consumer_major(head, table, code_version, bool(is_major), resets)
    newest = max([t for *_, t in inputs] + [r.timestamp for r in history])
    return RunSlice(
        **common,
        is_major=major,
        reason=why,
        timestamp=to_utc(timestamp, "timestamp") if timestamp is not None else newest,
        upstream=tuple(u for u, _, _ in inputs),
        soft=soft,
        uses_columns=tuple(uses_columns) if uses_columns is not None else None,
    )


def _input(
    job: JobInput, consumer: Sequence[Revision], consumer_table: str, options: dict[str, object]
):
    """(the input's slice at its current head, whether its changes are a reset, the
    timestamp of its newest revision)."""
    if job.kind not in ("main", "reference"):
        raise InvalidArgumentError(f"JobInput {job.name!r}: kind must be 'main' or 'reference'")
    log = RevisionLog(open_storage(job.root, **options))
    records = log.refresh()
    root = log.storage.uri
    history = [r for r in records if r.wrote(job.table)]
    if not history:
        raise RunSliceError(f"input {job.name!r} ({root}, table {job.table!r}) has no revision")
    since = consumer_position(consumer, root, job.table, consumer_table)
    head = records[-1].sequence
    reset = changes_by_sequence(history, job.table, since, head).is_reset
    u = InputSlice(
        name=job.name,
        asset_key="",
        root=root,
        table=job.table,
        id_columns=tuple(history[-1].tables[job.table].id_columns),
        kind=job.kind,
        since=since,
        head=head,
        data_version=f"{job.table}@{history[-1].sequence}",
        on=dict(job.on),
    )
    return u, reset, max(r.timestamp for r in history)
